package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestAgentProbes: a probe with from: node: runs on that node's agent,
// which reads the probe's headers file on its own machine (the server
// never holds or sends the secret) and reports each attempt in its
// heartbeat; the server shows the attempts with the node that ran them.
func TestAgentProbes(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	var hits, unauth atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer agent-side-secret" {
			unauth.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		hits.Add(1)
	}))
	defer hs.Close()
	headers := filepath.Join(e.dir, "assist.headers")
	if err := os.WriteFile(headers, []byte("Authorization: Bearer agent-side-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := e.admin.ApplyProbes(e.ctx, api.ProbesApply{Source: fmt.Sprintf(`probes:
  - name: assist
    url: %s/healthz
    interval: 1s
    timeout: 500ms
    headers_file: %s
    from: node:a1
`, hs.URL, headers)})
	if err != nil {
		t.Fatal(err)
	}
	e.startAgent("a1")
	e.startAgent("a2")
	var last api.Probe
	e.waitFor("three attempts reported by a1", 20*time.Second, func() bool {
		ps, err := e.admin.Probes(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = ps.Items[0]
		return last.Samples >= 3
	})
	if last.Last == nil || last.Last.Node != "a1" || !last.Last.OK || last.SuccessRatio == nil || *last.SuccessRatio != 1 {
		t.Errorf("probe: %+v last %+v", last, last.Last)
	}
	if unauth.Load() != 0 || hits.Load() < 3 {
		t.Errorf("%d attempts without the headers file's secret, %d with", unauth.Load(), hits.Load())
	}
}
