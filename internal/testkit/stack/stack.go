package stack

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/client"
)

// Stack is the multi-machine scene most end-to-end tests start from: the
// real binary serving a bridge as a process, the fake adapter its
// machines run, and a client holding the bridge's person token. Machine
// adds coordinators, each a process of its own.
type Stack struct {
	t testing.TB
	// Bin is the agent-bridge binary; Fake the fake adapter.
	Bin, Fake string
	// Bridge is the running serve.
	Bridge *Bridge
	// Person is a client of the bridge with its person token.
	Person *client.Client
	// Ledger, when set, is the --state of every machine Machine makes: one
	// PostgreSQL ledger they share. Unset, each has a SQLite file of its
	// own.
	Ledger string
}

// New builds (once per test binary, through progs) the binary and the
// fake adapter and serves a bridge on db: a SQLite file or a PostgreSQL
// URL, "" for a SQLite file of the test's own.
func New(t testing.TB, progs *Programs, db string) *Stack {
	t.Helper()
	s := &Stack{t: t, Bin: progs.Build(t, AgentBridge), Fake: progs.Build(t, FakeAdapter)}
	if db == "" {
		db = filepath.Join(t.TempDir(), "bridge.db")
	}
	s.Bridge = Serve(t, s.Bin, db)
	s.Person = s.Bridge.Client()
	return s
}

// URL is the bridge's URL.
func (s *Stack) URL() string { return s.Bridge.URL }

// Machine writes the config of a coordinator id serving agents with the
// fake adapter (NewMachine); Start runs it.
func (s *Stack) Machine(id string, agents ...string) *Machine {
	s.t.Helper()
	m := NewMachine(s.t, s.Person, s.Bridge.URL, s.Bin, s.Fake, id, agents...)
	m.State = s.Ledger
	return m
}

// Machines starts a coordinator for each spec, "id=agent,agent" (the
// agents it serves with the fake adapter), with the config keys of set
// over NewMachine's: the N coordinators of a multi-machine test, in the
// order of specs.
func (s *Stack) Machines(set map[string]any, specs ...string) []*Machine {
	s.t.Helper()
	out := make([]*Machine, len(specs))
	for i, spec := range specs {
		id, agents, _ := strings.Cut(spec, "=")
		out[i] = s.Machine(id, strings.Split(agents, ",")...)
		for k, v := range set {
			out[i].Set(k, v)
		}
	}
	for _, m := range out {
		m.Start()
	}
	return out
}
