package server

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSanitizeMessage(t *testing.T) {
	for in, want := range map[string]string{
		"exited after SIGTERM":    "exited after SIGTERM",
		"a\nFAKE EVENT\r\x1b[31m": "a FAKE EVENT  [31m",
		"bad \xff utf8":           "bad \uFFFD utf8",
	} {
		if got := sanitizeMessage(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if got := sanitizeMessage(strings.Repeat("é", 1000)); len(got) > maxReportMessage || !utf8.ValidString(got) {
		t.Errorf("long message kept as %d bytes (valid %v)", len(got), utf8.ValidString(got))
	}
}

func FuzzSanitizeMessage(f *testing.F) {
	for _, s := range []string{"", "ok", "a\nb", "\xff\xfe", strings.Repeat("x", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := sanitizeMessage(s)
		if len(got) > maxReportMessage || !utf8.ValidString(got) || strings.IndexFunc(got, unicode.IsControl) >= 0 {
			t.Fatalf("%q sanitized to %q", s, got)
		}
	})
}

// FuzzCheckLogURL: what is accepted is http(s) on the node's label or
// remote address, without user information, query or fragment.
func FuzzCheckLogURL(f *testing.F) {
	for _, s := range []string{"http://n1:9000", "https://10.0.0.1/x", "http://u@n1/", "file:///x", "http://n1:7070", "http://[::1]:1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkLogURL(s, "n1", "10.0.0.1", "n1:7070") != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
			!strings.EqualFold(u.Hostname(), "n1") && u.Hostname() != "10.0.0.1" || strings.EqualFold(u.Host, "n1:7070") {
			t.Fatalf("%q accepted", s)
		}
	})
}
