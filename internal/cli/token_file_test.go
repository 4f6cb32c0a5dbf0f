package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestTokenFile: client commands read the token from --token-file or
// ARBITER_TOKEN_FILE (a trailing newline trimmed), refuse a token given
// twice and an empty file, and send exactly the file's token.
func TestTokenFile(t *testing.T) {
	var mu sync.Mutex
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"items":[]}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, crlf, empty, two := write("good", "secret-1\n"), write("crlf", "secret-2\r\n"), write("empty", "\n"), write("two", "a\nb\n")
	t.Setenv("ARBITER_TOKEN", "")
	t.Setenv("ARBITER_TOKEN_FILE", "")
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		bearer  string // want sent
		wantErr string
	}{
		{"flag file", []string{"--token-file", good}, nil, "Bearer secret-1", ""},
		{"crlf file", []string{"--token-file", crlf}, nil, "Bearer secret-2", ""},
		{"env file", nil, map[string]string{"ARBITER_TOKEN_FILE": good}, "Bearer secret-1", ""},
		{"env token", nil, map[string]string{"ARBITER_TOKEN": "secret-3"}, "Bearer secret-3", ""},
		{"flag file over env token", []string{"--token-file", good}, map[string]string{"ARBITER_TOKEN": "other"}, "Bearer secret-1", ""},
		{"both flags", []string{"--token", "x", "--token-file", good}, nil, "", "not both"},
		{"both env", nil, map[string]string{"ARBITER_TOKEN": "x", "ARBITER_TOKEN_FILE": good}, "", "not both"},
		{"empty file", []string{"--token-file", empty}, nil, "", "empty"},
		{"two lines", []string{"--token-file", two}, nil, "", "more than one line"},
		{"missing file", []string{"--token-file", filepath.Join(dir, "nope")}, nil, "", "--token-file"},
		{"none", nil, nil, "", "no token"},
	}
	for _, c := range cases {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		mu.Lock()
		got = ""
		mu.Unlock()
		_, errOut, code := run(t, append([]string{"tenant", "list", "--server", srv.URL}, c.args...)...)
		for k := range c.env {
			t.Setenv(k, "")
		}
		mu.Lock()
		sent := got
		mu.Unlock()
		if c.wantErr != "" {
			if code == 0 || !strings.Contains(errOut, c.wantErr) || sent != "" {
				t.Errorf("%s: exit %d, %q, sent %q; want an error with %q and no request", c.name, code, errOut, sent, c.wantErr)
			}
			continue
		}
		if code != 0 || sent != c.bearer {
			t.Errorf("%s: exit %d, %q, sent %q; want %q", c.name, code, errOut, sent, c.bearer)
		}
	}
	// The agent takes the same flags.
	_, errOut, code := run(t, "agent", "--token", "x", "--token-file", good, "--gpus", "fake:1xA100-80G")
	if code == 0 || !strings.Contains(errOut, "not both") {
		t.Errorf("agent with --token and --token-file: exit %d, %q", code, errOut)
	}
}

// FuzzParseTokenFile: a token read from a file is one non-empty line with
// no spaces at its ends or control characters, and reads back the same.
func FuzzParseTokenFile(f *testing.F) {
	for _, s := range []string{"abc\n", "abc", "", "\n", "a\r\n", "a\nb", " a", "a\x00", "\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := parseTokenFile(b)
		if err != nil {
			return
		}
		if tok == "" || strings.ContainsAny(tok, "\r\n\x00") || strings.TrimSpace(tok) != tok {
			t.Fatalf("%q: token %q", b, tok)
		}
		if again, err := parseTokenFile([]byte(tok + "\n")); err != nil || again != tok {
			t.Fatalf("%q: token %q reads back as %q, %v", b, tok, again, err)
		}
	})
}
