package postgres

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// connectTimeout bounds one connection attempt when the URL sets none: a
// database host that does not answer must turn into 503 unavailable, not
// into requests that hang.
const connectTimeout = 5 * time.Second

// unreachable reports whether err means the database cannot be reached:
// no connection could be made, the connection broke, or the server is
// shutting down or starting up (SQLSTATE class 08, 57P01–57P03). Errors of
// the database itself (a constraint, a bad query) are not outages.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08",
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return true
		}
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
