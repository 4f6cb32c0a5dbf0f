package agent

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestLogServer checks the agent's log answers: signed requests only,
// tail and from pieces with their headers, offsets refused, and a follow
// answer that streams what is appended while the replica runs and ends
// once it is gone and all is sent.
func TestLogServer(t *testing.T) {
	a, err := New(Options{Server: "http://127.0.0.1:1", Token: "x", NodeID: "n1", Region: "r", Block: "b", Inventory: Fake("n1", 1, "A100-80G"),
		DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), AllowRoot: true, LogFollowFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	path := a.LogPath("t/w", 0)
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.logHandler())
	defer hs.Close()
	get := func(query string, sign bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", hs.URL+"/logs/t/w/0?"+query, nil)
		if sign {
			req.Header.Set("Authorization", api.SignLogRequest(a.logKey, "GET", req.URL.EscapedPath(), req.URL.RawQuery, "n1", time.Now().Add(api.LogSigLifetime)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	read := func(resp *http.Response) string {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	if resp := get("from=0", false); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned: %d, want 401", resp.StatusCode)
	}
	for _, tc := range []struct {
		query, body, start string
	}{{"", "one\ntwo\n", "0"}, {"tail=4", "two\n", "4"}, {"from=4", "two\n", "4"}, {"from=8&follow=true", "", "8"}} {
		resp := get(tc.query, true)
		h := resp.Header
		if got := read(resp); resp.StatusCode != 200 || got != tc.body || h.Get(api.HeaderLogStart) != tc.start || h.Get(api.HeaderLogSize) != "8" || h.Get(api.HeaderLogEnded) != "true" {
			t.Errorf("?%s: %d %q start %s size %s ended %s, want %q from %s of 8, ended", tc.query, resp.StatusCode, got,
				h.Get(api.HeaderLogStart), h.Get(api.HeaderLogSize), h.Get(api.HeaderLogEnded), tc.body, tc.start)
		}
	}
	for query, want := range map[string]int{"from=9": 416, "from=-1": 400, "from=1099511627777": 400, "from=x": 400, "tail=1&from=0": 400, "from=+1": 400} {
		if resp := get(query, true); resp.StatusCode != want {
			t.Errorf("?%s: %d, want %d", query, resp.StatusCode, want)
		}
	}

	// Following while it runs: what is appended comes, then the end.
	ref := api.ReplicaRef{Workload: "t/w", Replica: 0}
	a.mu.Lock()
	a.procs[ref] = &proc{}
	a.mu.Unlock()
	resp := get("from=4&follow=true", true)
	defer resp.Body.Close()
	if resp.Header.Get(api.HeaderLogEnded) != "false" {
		t.Fatalf("%s = %q while it runs, want false", api.HeaderLogEnded, resp.Header.Get(api.HeaderLogEnded))
	}
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(20 * time.Second)
	next := func() (string, bool) {
		select {
		case l, ok := <-lines:
			return l, ok
		case <-deadline:
			t.Fatal("timed out reading the follow answer")
		}
		return "", false
	}
	if l, _ := next(); l != "two" {
		t.Fatalf("got %q, want two", l)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("three\n")
	if l, _ := next(); l != "three" {
		t.Fatalf("got %q, want three (written after the answer began)", l)
	}
	f.WriteString("four\n")
	f.Close()
	a.mu.Lock()
	delete(a.procs, ref)
	a.mu.Unlock()
	var rest []string
	for l, ok := next(); ok; l, ok = next() {
		rest = append(rest, l)
	}
	if strings.Join(rest, ",") != "four" {
		t.Errorf("after the replica ended: %q, want four and the end", rest)
	}
}
