package storetest

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// LegacyKeyRows are idempotency keys as the releases before stored them in
// thread "t", and whether the migration that keeps a release's unscoped
// keys apart (idempotency_legacy) takes each: the header's value as it
// came (v3) is taken, the scoped forms of v4 ("person/…",
// "coordinator:<id>/…", "<token id>/…") and the bridge's own
// "claim-expired/…" are not.
var LegacyKeyRows = []struct {
	Key    string
	Legacy bool
}{
	{"hello-1", true}, {"reply/01JD5K3Q8X/echo", true}, {"Person/x", true}, {"coordinator:no-slash", true},
	{"01JD5K3Q8X0000000000000000", true}, {"01jd5k3q8x0000000000000000/x", true},
	{"person/hello-1", false}, {"coordinator:laptop/reply/01JD5K3Q8X/echo", false},
	{"01JD5K3Q8X0000000000000000/reply-1", false}, {"claim-expired/t/01JD5K3Q8X/echo", false},
}

// WantLegacyKeys checks got, the keys idempotency_legacy holds, against
// LegacyKeyRows.
func WantLegacyKeys(t *testing.T, got []string) {
	t.Helper()
	var want []string
	for _, r := range LegacyKeyRows {
		if r.Legacy {
			want = append(want, r.Key)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("idempotency_legacy holds %q, want %q", got, want)
	}
}

// MigrationsBefore is the migrations folder dir of fsys without the file
// whose name contains name and every later one, as a database of the
// release before it had them.
func MigrationsBefore(t *testing.T, fsys fs.FS, dir, name string) fstest.MapFS {
	t.Helper()
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		if strings.Contains(e.Name(), name) {
			return out
		}
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[dir+"/"+e.Name()] = &fstest.MapFile{Data: b}
	}
	t.Fatalf("no migration %q in %s", name, dir)
	return nil
}
