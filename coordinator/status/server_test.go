package status

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLoginRefusesDuplicateKeys: the status API's one body goes through
// the bridge's decoder, so a key twice is named rather than resolved.
func TestLoginRefusesDuplicateKeys(t *testing.T) {
	s := New(nil, nil, slog.New(slog.DiscardHandler))
	for _, tc := range []struct{ body, code string }{
		{`{"token":"a","token":"b"}`, "duplicate_key"},
		{`{"tok":"a"}`, "invalid_json"},
		{`{`, "invalid_json"},
	} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/auth/login", strings.NewReader(tc.body))
		s.handleLogin(rec, r)
		var ans struct {
			Error struct{ Code, Message, Field string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("%s: answer %s: %v", tc.body, rec.Body, err)
		}
		if rec.Code != http.StatusBadRequest || ans.Error.Code != tc.code || ans.Error.Message == "" {
			t.Errorf("%s: %d %s, want 400 %s", tc.body, rec.Code, rec.Body, tc.code)
		}
	}
}
