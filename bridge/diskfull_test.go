package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestHealthzWhileDiskFull fills the database's disk: appends are answered
// 503 and store nothing, reads go on, and GET /healthz answers 503 with
// the reason while writes are refused (a read that works does not make it
// ok). Once there is space, the next append is served and /healthz is ok
// again.
func TestHealthzWhileDiskFull(t *testing.T) {
	disk := testutil.SmallDisk(t, "4m")
	t.Cleanup(testutil.CheckGoroutines(t))
	st, err := sqlite.Open(context.Background(), filepath.Join(disk, "bridge.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ts := serve(t, st, Options{})
	ts.store = st
	ts.newThread("t1")
	ts.must(200, "GET", "/healthz", "")
	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	big := `"` + strings.Repeat("x", 16<<10) + `"`
	refused := false
	for range 64 {
		a := ts.do("POST", "/threads/t1/events", `{"from":"user","content":`+big+`}`)
		if a.status == 503 {
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("64 appends of 16 KiB fitted on a full 4 MiB disk")
	}
	before := ts.head()
	ts.must(200, "GET", "/threads/t1/events", "")
	for range 2 {
		a := ts.do("GET", "/healthz", "")
		if a.status != 503 || a.errCode() != "unavailable" || !strings.Contains(string(a.body), "refuses writes") {
			t.Fatalf("healthz while writes are refused: %d %s", a.status, a.body)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ts.post("t1", "user", "after the outage")
	ts.must(200, "GET", "/healthz", "")
	if h := ts.head(); h != before+1 {
		t.Errorf("head %d after one append past %d", h, before)
	}
}
