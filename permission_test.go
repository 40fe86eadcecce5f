package agentbridge

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// TestParsePermissionControl: the answer to an ACP agent's permission
// request (contract 6.6) is a known control with a checked shape.
func TestParsePermissionControl(t *testing.T) {
	t.Parallel()
	good := `{"permission":{"event":"01JD3Q6Y7M8K9N0P1Q2R3S4T5V","option":"allow"}}`
	got, err := ParseControl(json.RawMessage(good))
	if err != nil {
		t.Fatalf("ParseControl: %v", err)
	}
	want := Control{Permission: &PermissionControl{Event: "01JD3Q6Y7M8K9N0P1Q2R3S4T5V", Option: "allow"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseControl = %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		`{"permission":{}}`,
		`{"permission":{"event":"01JD"}}`,
		`{"permission":{"option":"allow"}}`,
		`{"permission":{"event":"01JD","option":""}}`,
		`{"permission":{"event":"a b","option":"allow"}}`,
		`{"permission":{"event":1,"option":"allow"}}`,
		`{"permission":"allow"}`,
	} {
		_, err := ParseControl(json.RawMessage(bad))
		var e *Error
		if !errors.As(err, &e) || e.Code != ECodeInvalidControl || e.Field != "content.permission" {
			t.Errorf("%s: err = %v, want invalid_control on content.permission", bad, err)
		}
	}
}
