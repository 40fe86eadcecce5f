// Package ui embeds the bridge's web UI and serves it at /ui.
//
// The UI is plain HTML, CSS and ES modules embedded in the binary, so the
// bridge needs no Node build and no files on disk; the two libraries it uses
// (marked for Markdown, DOMPurify to sanitise) are vendored as ES modules in
// static/vendor by vendor.sh. It talks to
// the bridge's own HTTP API from the browser; this package only serves the
// files, with a strict Content-Security-Policy that keeps untrusted event
// content inert even if a rendering bug slipped through.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

//go:embed static
var static embed.FS

// ContentSecurityPolicy is the policy sent with every UI response. It allows
// only the bridge's own scripts, styles and connections and no inline code,
// so a message that smuggled markup into the page still could not run.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'; object-src 'none'"

// DefaultCoordinatorURL is where the UI links to the coordinator's runs
// dashboard when Options.CoordinatorURL says nothing: the coordinator's
// default status_addr.
const DefaultCoordinatorURL = agentbridge.DefaultStatusURL

// Options configures the UI beyond its files.
type Options struct {
	// CoordinatorURL returns the base URL of the coordinator's status
	// server (its runs dashboard), which the UI links to; nil or "" means
	// DefaultCoordinatorURL. A function, because "up" learns the address
	// only once the coordinator listens, after the bridge started.
	CoordinatorURL func() string
}

// uiConfig is the answer of GET /ui/config.json: what the page needs to
// know about its surroundings.
type uiConfig struct {
	CoordinatorURL string `json:"coordinator_url"`
}

// NewHandler serves the web UI: GET /ui, /ui/ and /ui/threads/{id} return
// the single-page app (the browser's history API does the routing, so a
// deep link must load the same page); its assets are served under
// /ui/static/, and what the page needs to know of its surroundings at
// /ui/config.json. It accepts paths with or without the /ui prefix, so it
// works whether the server mounts it as is or behind http.StripPrefix.
func NewHandler(opts Options) http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// The embedded tree is fixed at build time; a missing folder is a
		// broken build, not a runtime condition.
		panic("ui: embedded static folder missing: " + err.Error())
	}
	return &handler{files: sub, opts: opts, etags: etags(sub)}
}

type handler struct {
	files fs.FS
	opts  Options
	// etags holds each file's entity tag, a hash of its content, so a
	// reload revalidates the page's modules with 304s instead of sending
	// them again.
	etags map[string]string
}

// etags hashes every embedded file once.
func etags(files fs.FS) map[string]string {
	out := make(map[string]string)
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[p] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return out
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeMethodNotAllowed,
			"The web UI only answers GET and HEAD, not %s.", r.Method))
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/ui")
	switch {
	case p == "" || p == "/" || p == "/index.html" || p == "/login" || strings.HasPrefix(p, "/threads/"):
		h.serveFile(w, r, "index.html")
	case p == "/sw.js" || p == "/manifest.webmanifest":
		// At /ui/, so that the service worker's scope is the whole app.
		h.serveFile(w, r, strings.TrimPrefix(p, "/"))
	case p == "/config.json":
		cfg := uiConfig{CoordinatorURL: DefaultCoordinatorURL}
		if h.opts.CoordinatorURL != nil {
			if u := h.opts.CoordinatorURL(); u != "" {
				cfg.CoordinatorURL = u
			}
		}
		httpjson.Write(w, http.StatusOK, cfg)
	case strings.HasPrefix(p, "/static/"):
		name := path.Clean(strings.TrimPrefix(p, "/static/"))
		if name == "index.html" || name == "sw.js" || strings.HasPrefix(name, ".") {
			h.notFound(w, r)
			return
		}
		h.serveFile(w, r, name)
	default:
		h.notFound(w, r)
	}
}

// serveFile writes one embedded file. Everything is revalidated on each load
// (no-cache): a stale app.js after an upgrade would talk to the new server
// with old assumptions. The entity tag makes the revalidation a 304 when
// the file is the one the browser has.
func (h *handler) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	b, err := fs.ReadFile(h.files, name)
	if err != nil {
		h.notFound(w, r)
		return
	}
	w.Header().Set("Content-Type", contentType(name))
	w.Header().Set("Cache-Control", "no-cache")
	if tag := h.etags[name]; tag != "" {
		w.Header().Set("ETag", tag)
		if r.Header.Get("If-None-Match") == tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeNotFound,
		"There is no UI page or asset at %s.", r.URL.Path))
}

// contentType names the type explicitly: with nosniff, a guessed type would
// make the browser refuse the module scripts.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".webmanifest":
		return "application/manifest+json"
	default:
		return "application/octet-stream"
	}
}
