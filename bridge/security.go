package bridge

import (
	"net/http"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// TokenCookie is the cookie a browser gets from POST /auth/login (see
// httpguard.TokenCookie).
const TokenCookie = httpguard.TokenCookie

// newGate builds the bridge's gate (internal/httpguard, shared with the
// coordinator's status API) with the bridge's open routes and the flags a
// person uses to widen it.
func newGate(opts Options, s *Server) (*httpguard.Guard, error) {
	return httpguard.New(httpguard.Options{
		Token:                   opts.Token,
		AllowedHosts:            opts.AllowedHosts,
		CORSOrigins:             opts.CORSOrigins,
		ListenAddr:              opts.Addr,
		Open:                    open,
		TokenHint:               "the file \"token\" serve made next to its database, such as ./data/token, or the server's --token-file or BRIDGE_TOKEN",
		HostHint:                "start the server with --allowed-hosts naming it",
		OriginHint:              "only the server's own pages and origins listed with --cors-origin may",
		WriteError:              s.writeError,
		RequestTimeout:          opts.RequestTimeout,
		MaxStreams:              opts.MaxStreams,
		MaxStreamsPerCredential: opts.MaxStreamsPerCredential,
		CoordinatorStreams:      opts.CoordinatorStreams,
		Resolve:                 s.resolve,
		RequireCredential:       opts.RequireCredential,
		Upload:                  isUpload,
	})
}

// open reports whether a request needs no token: liveness probes, the login
// itself, and the UI's static assets (they hold no data; the UI asks the
// person for the token and logs in).
func open(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (p == "/ping" || p == "/healthz"):
		return true
	case r.Method == http.MethodPost && (p == "/auth/login" || p == "/auth/pair/redeem"):
		return true
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (p == "/" || p == "/ui" || strings.HasPrefix(p, "/ui/")):
		return true
	}
	return false
}

// loginRequest is the body of POST /auth/login: a token pasted into the
// login form, or the one-time code of a login link (NewLoginCode).
type loginRequest struct {
	Token string `json:"token"`
	Code  string `json:"code"`
}

// handleLogin checks a token (or exchanges a login link's code for a new
// person token) and sets the HttpOnly, SameSite=Strict cookie the browser
// then sends with every request, EventSource included.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) error {
	var req loginRequest
	if err := s.decodeStrict(w, r, &req, []string{"token", "code"}, false); err != nil {
		return err
	}
	if s.gate.Open() && req.Code == "" {
		httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": false})
		return nil
	}
	token := req.Token
	if req.Code != "" {
		t, secret, err := s.redeemLoginCode(r.Context(), req.Code)
		if err != nil {
			return err
		}
		s.log.Info("login link used", "token", t.ID, "name", t.Name)
		token = secret
	} else if _, err := s.gate.Credential(r.Context(), req.Token); req.Token == "" || err != nil {
		if err != nil && agentbridge.ErrorCode(err) != agentbridge.ECodeUnauthorized {
			return err
		}
		return agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "token", "That token is not valid here: it is unknown, revoked or expired.")
	}
	httpguard.SetLoginCookie(w, r, token)
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": true})
	return nil
}

// handleLogout clears the login cookie.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) error {
	httpguard.ClearLoginCookie(w)
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}
