package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// previousReleases are the releases an upgrade is tested from, built from
// this repository's history, as .ci/previous-releases lists them: v3, the
// last before idempotency keys were scoped by principal (contract 7.3),
// and v4, the release before this one.
func previousReleases(t *testing.T) [][2]string {
	t.Helper()
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, ".ci", "previous-releases"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			out = append(out, [2]string{f[0], f[1]})
		}
	}
	if len(out) == 0 {
		t.Fatal(".ci/previous-releases lists no release")
	}
	return out
}

// previousRelease returns the agent-bridge binary of commit, built from
// git history (git archive, then go build with this machine's module
// cache) into the user's cache folder, where later runs find it. Without
// git or the commit (a shallow clone), the test is skipped, and fails
// under CI=true: .ci/run fetches the history it needs.
func previousRelease(t *testing.T, commit string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agent-bridge-tests", "release-"+commit)
	bin := filepath.Join(dir, "agent-bridge")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	unusable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		unusable("the previous release %s is not in this clone's history (git fetch --unshallow): %v %s", commit, err, out)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		unusable("git archive %s: %v %s", commit, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	build := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./cmd/agent-bridge")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the release at %s: %v\n%s", commit, err, out)
	}
	// Another test process may have built it meanwhile: the rename
	// replaces one complete binary with another.
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// keyedPost posts body to thread with an Idempotency-Key and returns the
// status and the stored (or replayed) event's id, or the error's code.
func keyedPost(t *testing.T, url, token, thread, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/threads/"+thread+"/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Event struct{ ID string }
		Error struct{ Code string }
	}
	_ = json.Unmarshal(b, &out)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, out.Error.Code
	}
	return resp.StatusCode, out.Event.ID
}

// laptopToken makes a coordinator token for coordinator id laptop and
// registers laptop serving echo, as a coordinator's start does.
func laptopToken(t *testing.T, url, person string) string {
	t.Helper()
	st, body := pushCall(t, "POST", url+"/auth/tokens", person, `{"scope":"coordinator","name":"laptop"}`)
	var tok struct{ Token string }
	if st != 200 || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("coordinator token: %d %s", st, body)
	}
	reg := `{"instance":"` + fmt.Sprint(time.Now().UnixNano()) + `","host":"laptop","ttl_ms":60000,"agents":[{"name":"echo","client":"echo","kind":"adapter"}]}`
	if st, body := pushCall(t, "PUT", url+"/coordinators/laptop", tok.Token, reg); st != 200 {
		t.Fatalf("register laptop: %d %s", st, body)
	}
	return tok.Token
}

// TestUpgradeKeepsIdempotencyKeys (contract 8.3, issue 45 break 7): the
// previous releases' binaries, built from git history, make a database
// (SQLite, and PostgreSQL) and store a person's message and a
// coordinator's reply under Idempotency-Keys; after the upgrade, the
// current binary on that database answers each retry with the event the
// first try stored, and stores nothing twice; the same key from another
// sender is 409 idempotency_conflict. Before, v3's keys (stored as the
// header came) were not found under the scoped keys v4 looks up, and
// retries spanning the upgrade were stored twice.
func TestUpgradeKeepsIdempotencyKeys(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds previous releases from git history and runs them")
	}
	current := buildServeBinary(t)
	for _, rel := range previousReleases(t) {
		t.Run(rel[0], func(t *testing.T) {
			t.Parallel()
			old := previousRelease(t, rel[1])
			for _, store := range []string{"sqlite", "postgres"} {
				t.Run(store, func(t *testing.T) {
					db := filepath.Join(t.TempDir(), "data", "bridge.db")
					if store == "postgres" {
						db = pg.Database(t)
					}
					testUpgradeKeys(t, old, current, db)
				})
			}
		})
	}
}

func testUpgradeKeys(t *testing.T, old, current, db string) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	const person = "upgrade-test-person-token"
	if err := os.WriteFile(tokenFile, []byte(person+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	oldServe := startServe(t, old, db, "--token-file", tokenFile)
	url := oldServe.URL
	if st, body := pushCall(t, "POST", url+"/threads", person, `{"id":"t1","name":"upgrade"}`); st != 200 {
		t.Fatalf("create t1: %d %s", st, body)
	}
	const hello = `{"from":"user","to":"echo","content":"hello"}`
	st, first := keyedPost(t, url, person, "t1", "user-hello-1", hello)
	if st != 200 {
		t.Fatalf("the person's post: %d %s", st, first)
	}
	reply := `{"from":"echo","to":"user","content":"hello back","meta":{"reply_to":"` + first + `"}}`
	// A release without the token API (v3) knew one token, which its
	// coordinator held too; later ones give the coordinator its own.
	coordinator := person
	if st, _ := pushCall(t, "GET", url+"/auth/whoami", person, ""); st == http.StatusOK {
		coordinator = laptopToken(t, url, person)
	}
	st, answer := keyedPost(t, url, coordinator, "t1", "reply/"+first+"/echo", reply)
	if st != 200 {
		t.Fatalf("the coordinator's reply: %d %s", st, answer)
	}
	_ = oldServe.Cmd.Process.Signal(os.Interrupt)
	<-oldServe.Done

	url = startServe(t, current, db, "--token-file", tokenFile).URL
	if st, id := keyedPost(t, url, person, "t1", "user-hello-1", hello); st != 200 || id != first {
		t.Errorf("the person's retry after the upgrade: %d %s, want 200 and the first try's %s", st, id, first)
	}
	// The coordinator restarted with the new release holds a new token of
	// its own, under the same coordinator id.
	if st, id := keyedPost(t, url, laptopToken(t, url, person), "t1", "reply/"+first+"/echo", reply); st != 200 || id != answer {
		t.Errorf("the coordinator's retry after the upgrade: %d %s, want 200 and the first try's %s", st, id, answer)
	}
	if st, code := keyedPost(t, url, person, "t1", "user-hello-1", `{"from":"bob","content":"hello"}`); st != http.StatusConflict || code != agentbridge.ECodeIdempotencyConflict {
		t.Errorf("another sender under the old key: %d %s, want 409 idempotency_conflict", st, code)
	}
	_, body := pushCall(t, "GET", url+"/threads/t1/events", person, "")
	var page struct{ Events []agentbridge.Event }
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	if n := len(page.Events); n != 3 {
		t.Errorf("t1 holds %d events after the retries, want 3 (created, hello, the reply): %s", n, body)
	}
}
