package agentbridge

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestCleanAttachmentName: a file name is kept to its last path element,
// without control or formatting characters or leading dots, within the
// length cap on a rune boundary; "file" when nothing is left.
func TestCleanAttachmentName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"shot.png":                    "shot.png",
		"../../etc/passwd":            "passwd",
		`C:\Users\me\Desktop\a b.txt`: "a b.txt",
		".bashrc":                     "bashrc",
		"...":                         "file",
		"":                            "file",
		"/":                           "file",
		"dir/":                        "dir",
		"\u202egnp.exe":               "gnp.exe",
		"a\x00b\nc.txt":               "abc.txt",
		"  spaced  ":                  "spaced",
		"caf\xe9.txt":                 "caf.txt",
		strings.Repeat("é", 200):      strings.Repeat("é", 127),
	} {
		if got := CleanAttachmentName(in); got != want {
			t.Errorf("CleanAttachmentName(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCleanAttachmentName: whatever a client sends, the name kept is valid
// text of at most MaxAttachmentNameLen bytes with no path separator, no
// control or formatting character, not starting with a dot or a space,
// and cleaning it again changes nothing.
func FuzzCleanAttachmentName(f *testing.F) {
	for _, s := range []string{"shot.png", "../x", `a\b`, ".", "\u202e", "\xff\xfe", strings.Repeat("ü", 300), "a/b/", " .x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := CleanAttachmentName(in)
		if got == "" || len(got) > MaxAttachmentNameLen || !utf8.ValidString(got) || strings.ContainsAny(got, `/\`) ||
			strings.HasPrefix(got, ".") || strings.HasPrefix(got, " ") {
			t.Fatalf("CleanAttachmentName(%q) = %q", in, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("CleanAttachmentName(%q) = %q holds %U", in, got, r)
			}
		}
		if again := CleanAttachmentName(got); again != got {
			t.Fatalf("cleaning %q again gave %q", got, again)
		}
	})
}

// TestEventAttachments: meta.attachments is read as ids and cleaned
// names; a list that is not one, an id that is not sha256, or too many
// entries are invalid_field naming where.
func TestEventAttachments(t *testing.T) {
	t.Parallel()
	id := "sha256:" + strings.Repeat("ab", 32)
	meta := func(v string) Meta {
		return Meta{Extra: map[string]json.RawMessage{MetaAttachments: json.RawMessage(v)}}
	}
	got, err := EventAttachments(meta(`[{"id":"` + id + `","name":"../x.png","type":"text/html","size":3},{"id":"` + id + `"}]`))
	if err != nil || len(got) != 2 || got[0] != (Attachment{ID: id, Name: "x.png"}) || got[1].Name != "" {
		t.Fatalf("EventAttachments = %+v, %v", got, err)
	}
	many := strings.Repeat(`{"id":"`+id+`"},`, MaxEventAttachments)
	for v, field := range map[string]string{
		`{"id":"x"}`:                        "meta.attachments",
		`[{"id":"shot.png"}]`:               "meta.attachments[0].id",
		`[{"name":"x"}]`:                    "meta.attachments[0].id",
		"[" + many + `{"id":"` + id + `"}]`: "meta.attachments",
	} {
		_, err := EventAttachments(meta(v))
		if e, ok := err.(*Error); !ok || e.Code != ECodeInvalidField || e.Field != field {
			t.Errorf("EventAttachments(%s) = %v, want invalid_field %s", v, err, field)
		}
	}
	if got, err := EventAttachments(Meta{}); err != nil || got != nil {
		t.Errorf("no attachments = %v, %v", got, err)
	}
}
