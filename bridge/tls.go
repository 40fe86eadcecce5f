package bridge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
)

// hstsValue tells a browser to reach this origin only over HTTPS for a
// year (RFC 6797); it is sent only over TLS, where browsers heed it.
const hstsValue = "max-age=31536000"

// loadTLS reads the certificate and key files; both empty means plain
// HTTP, one without the other is a mistake worth refusing.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("--tls-cert and --tls-key go together: give both files or neither")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	// HTTP/1.1 only, as over plain HTTP: the gate's limits (request time,
	// streams) are written and tested for it.
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// hsts adds Strict-Transport-Security to every answer sent over TLS.
func (s *Server) hsts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", hstsValue)
		}
		next.ServeHTTP(w, r)
	})
}
