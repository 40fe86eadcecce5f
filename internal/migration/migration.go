// Package migration reads a schema's numbered migration files and applies
// them: the one runner (Run) of both databases, which internal/sqlitex and
// internal/pgschema each give a Dialect. The files are NNNN_name.sql in a
// folder, where NNNN is the schema version the file brings the database to.
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

// fileName matches NNNN_name.sql.
var fileName = regexp.MustCompile(`^([0-9]{4})_[A-Za-z0-9_-]+\.sql$`)

// File is one numbered schema step.
type File struct {
	Version int
	Name    string
	SQL     string
}

// Read reads the numbered .sql files of dir in fsys, in version order. The
// versions must run 1, 2, 3 … without gaps or duplicates, so that a missing
// or misnamed file fails loudly at start-up rather than leaving a schema
// half-built.
func Read(fsys fs.FS, dir string) ([]File, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations %s: %w", dir, err)
	}
	var out []File
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %s: name must look like 0001_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		out = append(out, File{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions must run 1, 2, 3 … without gaps or duplicates)", m.Name, i+1)
		}
	}
	return out, nil
}
