package agentbridge

import "testing"

// TestCreateThreadWithDefaults: the checks and defaults both stores apply
// to a new thread before it reaches their writers.
func TestCreateThreadWithDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		in        CreateThreadRequest
		want      CreateThreadRequest
		wantField string
	}{
		{"empty gets defaults", CreateThreadRequest{}, CreateThreadRequest{Name: "Untitled", From: "user"}, ""},
		{"given values kept", CreateThreadRequest{ID: "design-1", Name: "design", From: "codex"}, CreateThreadRequest{ID: "design-1", Name: "design", From: "codex"}, ""},
		{"bad id", CreateThreadRequest{ID: "-x"}, CreateThreadRequest{}, "id"},
		{"bad sender", CreateThreadRequest{From: "a b"}, CreateThreadRequest{}, "from"},
		{"name too long", CreateThreadRequest{Name: string(make([]byte, MaxThreadNameLen+1))}, CreateThreadRequest{}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.WithDefaults()
			if tc.wantField != "" {
				e, ok := err.(*Error)
				if !ok || e.Field != tc.wantField || e.Code != ECodeInvalidField {
					t.Fatalf("err = %v, want invalid_field on %s", err, tc.wantField)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
