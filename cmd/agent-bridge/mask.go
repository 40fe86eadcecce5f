package main

import (
	"net/url"
	"strings"
)

// maskURL hides the secrets of a database URL for messages and logs
// (contract 6.2): the password of its user info and the values of
// password-like query parameters become "xxxxx". Every command logs and
// prints database URLs through it. A value that is not a URL is returned
// as it is.
func maskURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		// An unparsable URL may still hold a password; show only its
		// scheme.
		scheme, _, _ := strings.Cut(s, "://")
		return scheme + "://(unparsable URL hidden)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if strings.Contains(strings.ToLower(k), "password") {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
