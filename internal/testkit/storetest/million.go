package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// The large corpus of the search tests and benchmarks (docs/performance.md,
// "Search"): a deterministic log of events over many threads, built
// straight into a database of the previous release's schema, so that the
// bridge's migration indexes it as it would a user's.

// PreviousRelease is the commit of the release before search: its schema
// is the one the migration starts from.
const PreviousRelease = "5fd2c81"

// CorpusEvents is how many events the corpus tests build: SEARCH_EVENTS
// when set (CI runs them once with 1000000), else def.
func CorpusEvents(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SEARCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return def
}

// OldMigrations are the migration files of dir (such as
// "bridge/sqlite/migrations") as they were at PreviousRelease, read from
// git; the test is skipped without the history (but fails in CI).
func OldMigrations(t testing.TB, dir string) fstest.MapFS {
	t.Helper()
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) []byte {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("git %v: %v", args, err)
			}
			t.Skipf("no git history of %s: %v", PreviousRelease, err)
		}
		return out
	}
	fsys := fstest.MapFS{}
	for _, name := range strings.Fields(string(git("ls-tree", "--name-only", PreviousRelease, dir+"/"))) {
		if path.Ext(name) != ".sql" {
			continue
		}
		fsys["migrations/"+path.Base(name)] = &fstest.MapFile{Data: git("show", PreviousRelease+":"+name)}
	}
	if len(fsys) == 0 {
		t.Fatalf("no migrations under %s at %s", dir, PreviousRelease)
	}
	return fsys
}

// Corpus describes the generated log: Threads threads of Events events in
// all, senders cycling through Senders; every Plant-th event is one of the
// planted sentences, so that the tests know which hits to expect.
type Corpus struct {
	Events, Threads int
}

// Senders are the corpus's senders.
var Senders = []string{"user", "claude", "codex", "gemini", "ci"}

// Planted sentences: the corpus holds Decision once per thread 0's
// plant and the rest at every plantEvery-th event.
const (
	Decision   = "Decision: we migrate the billing ledger to PostgreSQL on Thursday."
	plantEvery = 997
)

// words is the vocabulary of the generated messages: common words drawn
// often, the rest rarely (a Zipf-like spread, as in real conversations).
var words = strings.Fields(`the a to of and in is it that for on with we this be are as at not
	but can will should deploy build test fix bug review parser release plan ledger billing schema
	migration index query latency cache token agent thread message reply question answer decision
	friday monday thursday api client server database postgres sqlite error timeout retry lock
	commit branch merge patch diff file config log metric alert dashboard issue ticket design doc
	benchmark profile memory cpu disk network request response stream event queue worker scheduler`)

// Text is the content of event i (0-based): a planted sentence or words
// drawn from the vocabulary, the same for the same i every time.
func (c Corpus) Text(i int) string {
	if i%plantEvery == 0 {
		return fmt.Sprintf("Note %d: the %s rollout is blocked on review.", i, []string{"orange", "violet", "indigo"}[i/plantEvery%3])
	}
	r := rand.New(rand.NewPCG(uint64(i), 7))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(words)-1))
	n := 6 + r.IntN(20)
	ws := make([]string, n)
	for k := range ws {
		ws[k] = words[zipf.Uint64()]
	}
	ws = append(ws, "w"+strconv.Itoa(r.IntN(50000)))
	return strings.Join(ws, " ")
}

// Thread and Sender are event i's thread id and sender.
func (c Corpus) Thread(i int) string { return "t" + strconv.Itoa(i%c.Threads) }
func (c Corpus) Sender(i int) string { return Senders[i%len(Senders)] }

// Row is event i as the events table stores it: id, thread, seq, ts, type,
// sender, recipient, content, meta, hop. The decision is event
// c.Events/2 (in thread c.Thread(c.Events/2)).
func (c Corpus) Row(i int, base time.Time) []any {
	text := c.Text(i)
	if i == c.Events/2 {
		text = Decision
	}
	content, _ := json.Marshal(text)
	seq := i/c.Threads + 2 // seq 1 is thread.created
	ts := base.Add(time.Duration(i) * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000000Z")
	return []any{fmt.Sprintf("E%025d", i), c.Thread(i), int64(seq), ts, "message", c.Sender(i), "all", string(content), "{}", 0}
}

// Contains is a plain scan: the corpus events of thread (any when "") and
// sender (any when "") whose text holds every word of ws (whole tokens),
// for checking the index's answers.
func (c Corpus) Contains(thread, sender string, ws ...string) int {
	n := 0
	for i := range c.Events {
		if (thread != "" && c.Thread(i) != thread) || (sender != "" && c.Sender(i) != sender) {
			continue
		}
		text := c.Text(i)
		if i == c.Events/2 {
			text = Decision
		}
		toks := " " + strings.ToLower(strings.Join(strings.FieldsFunc(text, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}), " ")) + " "
		all := true
		for _, w := range ws {
			if !strings.Contains(toks, " "+w+" ") {
				all = false
				break
			}
		}
		if all {
			n++
		}
	}
	return n
}

// Percentile is the p-th percentile (0–100) of ds, sorted in place.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}
