package ui_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVendoredVersions: the vendored modules are the versions vendor.sh
// pins (their banners say so), the README records those versions, and
// each file stays well under the 1 MB CI allows for a tracked file.
func TestVendoredVersions(t *testing.T) {
	script, err := os.ReadFile("vendor.sh")
	if err != nil {
		t.Fatal(err)
	}
	pin := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(script)
		if m == nil {
			t.Fatalf("vendor.sh pins no %s", name)
		}
		return string(m[1])
	}
	readme, err := os.ReadFile(filepath.Join("static", "vendor", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, banner, version string }{
		{"marked.esm.js", "marked v", pin("MARKED_VERSION")},
		{"purify.es.js", "DOMPurify ", pin("DOMPURIFY_VERSION")},
	} {
		p := filepath.Join("static", "vendor", c.file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b[:min(len(b), 400)]), c.banner+c.version) {
			t.Errorf("%s is not version %s (vendor.sh's pin): run bridge/ui/vendor.sh", p, c.version)
		}
		if len(b) > 512*1024 {
			t.Errorf("%s is %d bytes; keep vendored files well under CI's 1 MB limit", p, len(b))
		}
		if !strings.Contains(string(readme), "| "+c.file+" |") || !strings.Contains(string(readme), "| "+c.version+" |") {
			t.Errorf("static/vendor/README.md does not record %s %s", c.file, c.version)
		}
	}
}
