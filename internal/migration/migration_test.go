package migration

import (
	"testing"
	"testing/fstest"
)

// TestRead reads a folder of numbered files in version order, skipping
// other files, and refuses gaps, duplicates and misnamed files.
func TestRead(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"m/0002_b.sql": {Data: []byte("B")},
		"m/0001_a.sql": {Data: []byte("A")},
		"m/README.md":  {Data: []byte("not a migration")},
	}
	got, err := Read(fsys, "m")
	if err != nil || len(got) != 2 || got[0] != (File{1, "0001_a.sql", "A"}) || got[1] != (File{2, "0002_b.sql", "B"}) {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	for name, files := range map[string][]string{
		"gap":       {"0001_a.sql", "0003_c.sql"},
		"duplicate": {"0001_a.sql", "0001_b.sql"},
		"misnamed":  {"0001_a.sql", "2_b.sql"},
		"no one":    {"0002_b.sql"},
	} {
		fsys := fstest.MapFS{}
		for _, f := range files {
			fsys["m/"+f] = &fstest.MapFile{}
		}
		if _, err := Read(fsys, "m"); err == nil {
			t.Errorf("%s: Read accepted %v", name, files)
		}
	}
	if _, err := Read(fstest.MapFS{}, "missing"); err == nil {
		t.Error("Read of a missing folder succeeded")
	}
}
