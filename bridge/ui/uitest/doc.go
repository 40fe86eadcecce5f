// Package uitest holds the web UI's end-to-end tests: they build the real
// agent-bridge binary and the fake adapter, run serve and coordinator as
// subprocesses, and drive Debian's Chromium through chromedp. It has no
// non-test code; the tests skip when Chromium is missing (and fail instead
// when the CI environment variable is set).
package uitest
