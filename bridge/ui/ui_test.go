package ui_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/bridge/ui"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestHandlerServesAppOnEveryRoute(t *testing.T) {
	h := ui.NewHandler(ui.Options{})
	for _, p := range []string{"/ui", "/ui/", "/ui/threads/01JD3Q6Y7M8K9N0P1Q2R3S4T5V", "/ui/threads/a/b", "/", "/threads/x"} {
		res := get(t, h, http.MethodGet, p)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", p, res.StatusCode)
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
		if !strings.Contains(string(body), `src="/ui/static/app.js"`) {
			t.Errorf("GET %s: body is not the app page", p)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: missing nosniff", p)
		}
	}
}

func TestHandlerServesAssetsWithTypes(t *testing.T) {
	h := ui.NewHandler(ui.Options{})
	for p, want := range map[string]string{
		"/ui/static/app.js":      "text/javascript",
		"/ui/static/api.js":      "text/javascript",
		"/ui/static/markdown.js": "text/javascript",
		"/ui/static/app.css":     "text/css",
	} {
		res := get(t, h, http.MethodGet, p)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", p, res.StatusCode)
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, want) {
			t.Errorf("GET %s: Content-Type %q, want %s", p, ct, want)
		}
		if res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: no CSP", p)
		}
	}
	res := get(t, h, http.MethodHead, "/ui/static/app.js")
	if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusOK || len(b) != 0 {
		t.Errorf("HEAD app.js: status %d, %d body bytes", res.StatusCode, len(b))
	}
}

func errorBody(t *testing.T, res *http.Response) (code, message string) {
	t.Helper()
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("error body is not JSON: %v", err)
	}
	return body.Error.Code, body.Error.Message
}

func TestHandlerRefusesWithJSONErrors(t *testing.T) {
	h := ui.NewHandler(ui.Options{})
	for _, p := range []string{"/ui/static/nope.js", "/ui/static/../ui.go", "/ui/other", "/ui/static/index.html"} {
		res := get(t, h, http.MethodGet, p)
		code, msg := errorBody(t, res)
		if res.StatusCode != http.StatusNotFound || code != "not_found" || msg == "" {
			t.Errorf("GET %s: %d %q %q, want 404 not_found with a message", p, res.StatusCode, code, msg)
		}
	}
	res := get(t, h, http.MethodPost, "/ui/")
	code, msg := errorBody(t, res)
	if res.StatusCode != http.StatusMethodNotAllowed || code != "method_not_allowed" || msg == "" {
		t.Errorf("POST /ui/: %d %q %q", res.StatusCode, code, msg)
	}
	if res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui/: Allow %q", res.Header.Get("Allow"))
	}
}

// TestStaticFilesKeepContentInert guards the rules the CSP and the XSS tests
// rely on: no inline scripts or styles in the page, and no HTML parsing of
// strings anywhere in the UI's own scripts: Markdown becomes HTML only
// inside the vendored sanitiser (static/vendor, DOMPurify), whose parsing
// is its job.
func TestStaticFilesKeepContentInert(t *testing.T) {
	dir := "static"
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == filepath.Join(dir, "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := string(b)
		switch filepath.Ext(p) {
		case ".js":
			for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser"} {
				if strings.Contains(s, bad) {
					t.Errorf("%s uses %s", p, bad)
				}
			}
		case ".html":
			if regexp.MustCompile(`<script(?:\s+type="module")?>`).MatchString(s) || regexp.MustCompile(`<script[^>]*>[^<]+</script>`).MatchString(s) {
				t.Errorf("%s has an inline script", p)
			}
			if strings.Contains(s, "<style") || regexp.MustCompile(`\sstyle=`).MatchString(s) || regexp.MustCompile(`\son[a-z]+=`).MatchString(s) {
				t.Errorf("%s has inline style or event handler attributes", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConfigNamesTheCoordinator checks /ui/config.json: the default
// coordinator URL, then the one the options give.
func TestConfigNamesTheCoordinator(t *testing.T) {
	get := func(h http.Handler) string {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/config.json", nil))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("config.json: %d %s", rec.Code, rec.Header().Get("Content-Type"))
		}
		var cfg struct {
			CoordinatorURL string `json:"coordinator_url"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &cfg); err != nil {
			t.Fatal(err)
		}
		return cfg.CoordinatorURL
	}
	if got := get(ui.NewHandler(ui.Options{})); got != ui.DefaultCoordinatorURL {
		t.Errorf("default coordinator URL = %q", got)
	}
	if got := get(ui.NewHandler(ui.Options{CoordinatorURL: func() string { return "http://127.0.0.1:7000" }})); got != "http://127.0.0.1:7000" {
		t.Errorf("coordinator URL = %q", got)
	}
}

// TestRevalidationWithETag: a file comes with an entity tag, and asking
// again with it gets 304 and no body; a changed tag gets the file.
func TestRevalidationWithETag(t *testing.T) {
	h := ui.NewHandler(ui.Options{})
	for _, p := range []string{"/ui/static/app.js", "/ui/static/vendor/marked.esm.js", "/ui/"} {
		res := get(t, h, http.MethodGet, p)
		tag := res.Header.Get("ETag")
		if res.StatusCode != http.StatusOK || tag == "" || res.Header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("GET %s: %d, ETag %q, Cache-Control %q", p, res.StatusCode, tag, res.Header.Get("Cache-Control"))
		}
		for _, c := range []struct {
			ifNoneMatch string
			want        int
		}{{tag, http.StatusNotModified}, {`"other"`, http.StatusOK}} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, p, nil)
			req.Header.Set("If-None-Match", c.ifNoneMatch)
			h.ServeHTTP(rec, req)
			if rec.Code != c.want || (c.want == http.StatusNotModified && rec.Body.Len() != 0) {
				t.Errorf("GET %s If-None-Match %s: %d with %d bytes, want %d", p, c.ifNoneMatch, rec.Code, rec.Body.Len(), c.want)
			}
		}
	}
}
