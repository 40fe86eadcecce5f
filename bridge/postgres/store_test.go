package postgres

import (
	"context"
	"os"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
)

var pg = pgtest.New()

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

func openStore(t testing.TB, url string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestConformance runs the behaviour every event store shares.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, humans agentbridge.Humans) agentbridge.EventStore {
		return openStore(t, pg.Database(t), Options{Humans: humans})
	})
}

// TestTwoBridgesSweep: two stores on one database (two bridges) sweep
// attachments and append events naming them at once; no event is stored
// naming a file that is gone, and none named is removed.
func TestTwoBridgesSweep(t *testing.T) {
	url := pg.Database(t)
	storetest.RaceSweepsAndAppends(t, openStore(t, url, Options{}), openStore(t, url, Options{}))
}
