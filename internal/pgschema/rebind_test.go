package pgschema

import "testing"

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`UPDATE t SET a = ? WHERE b = ?`, `UPDATE t SET a = $1 WHERE b = $2`},
		{`SELECT '?' , "a?b", ? FROM x WHERE y = 'it''s ?'`, `SELECT '?' , "a?b", $1 FROM x WHERE y = 'it''s ?'`},
		{`CASE WHEN ? = '' THEN s ELSE ? END`, `CASE WHEN $1 = '' THEN s ELSE $2 END`},
	} {
		if got := Rebind(c.in); got != c.want {
			t.Errorf("Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
