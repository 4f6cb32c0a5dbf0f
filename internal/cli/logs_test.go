package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// logsWorld is a server whose workload "job" of contoso runs on node n1,
// whose agent serves log as the real one does (?tail=N: the last N bytes);
// tails records the tails it was asked for.
func logsWorld(t *testing.T, log string) (url string, tails func() []int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.0.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, "no log", http.StatusNotFound)
			return
		}
		defer f.Close()
		n, _ := strconv.ParseInt(r.URL.Query().Get("tail"), 10, 64)
		mu.Lock()
		asked = append(asked, n)
		mu.Unlock()
		if st, err := f.Stat(); err == nil && n > 0 && st.Size() > n {
			f.Seek(st.Size()-n, 0)
		}
		http.ServeContent(w, r, "", time.Time{}, struct{ *os.File }{f})
	}))
	t.Cleanup(agent.Close)
	return logsWorldWith(t, agent.URL), func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), asked...)
	}
}

// logsWorldWith is a server whose workload "job" of contoso runs on node
// n1, whose agent serves logs at agentURL.
func logsWorldWith(t *testing.T, agentURL string) string {
	t.Helper()
	ctx := context.Background()
	_, st, hsURL := seededServerWith(t, contextsWorld, server.Options{})
	admin := client.New(hsURL, testAdmin)
	tok, err := admin.CreateNodeToken(ctx, "n1", "")
	if err != nil {
		t.Fatal(err)
	}
	node := client.New(hsURL, tok.Secret)
	if _, err := node.RegisterNode(ctx, api.NodeRegistration{ID: "n1", Region: "eastus", Zone: "1", Block: "h1", SKU: "Standard_ND96isr_H100_v5",
		Labels: map[string]string{api.LabelAgent: "true"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Heartbeat(ctx, "n1", api.Heartbeat{Running: []api.ReplicaRef{}, LogURL: agentURL, LogKey: strings.Repeat("k", api.MinLogKey)}); err != nil {
		t.Fatal(err)
	}
	started := time.Now().UTC().Truncate(time.Second)
	if err := st.Update(ctx, func(tx store.WriteTx) error {
		x := &store.Workload{Tenant: "contoso", State: store.StateRunning, SubmittedAt: started,
			Spec:    workload.Spec{Name: "job", Tenant: "contoso", GPUs: 1000, Replicas: 1, Priority: workload.PriorityNormal, Flavors: []fleet.ModelID{"H100-80G"}, Regions: []string{"eastus"}},
			Running: &workload.Assignment{Flavor: "H100-80G", Region: "eastus", StartedAt: started, Replicas: []workload.Replica{{Node: "n1", GPUs: []int{0}, Milli: 1000}}}}
		return store.Put(tx, x, store.MustNotExist)
	}); err != nil {
		t.Fatal(err)
	}
	return hsURL
}

// TestWorkloadLogsTailLines (issue 22, point 4): --tail N prints the last
// N lines, whole, though the API tails by bytes; a short log is printed
// whole, and lines longer than the first guess make the CLI ask again.
func TestWorkloadLogsTailLines(t *testing.T) {
	cleanEnv(t)
	var b strings.Builder
	var lines []string
	for i := range 400 {
		l := fmt.Sprintf("line %d %s\n", i, strings.Repeat("x", (i*37)%900))
		lines = append(lines, l)
		b.WriteString(l)
	}
	log := b.String()
	url, tails := logsWorld(t, log)
	as := []string{"--server", url, "--token-file", secretFile(t, "admin.token", testAdmin), "--tenant", "contoso"}
	logs := func(args ...string) string {
		return mustRun(t, append(append([]string{"workload", "logs", "job"}, args...), as...)...)
	}
	for _, n := range []int{1, 3, 40, 399, 400, 1000} {
		want := strings.Join(lines[max(len(lines)-n, 0):], "")
		if got := logs("--tail", strconv.Itoa(n)); got != want {
			t.Errorf("--tail %d: %d lines (%d bytes), want %d lines (%d bytes); asked for %v",
				n, strings.Count(got, "\n"), len(got), strings.Count(want, "\n"), len(want), tails())
		}
	}
	// 40 lines of some 450 bytes are more than the first guess of 256 a
	// line: the CLI asked again, for more.
	asked, retried := tails(), false
	for i := 1; i < len(asked); i++ {
		retried = retried || asked[i] > asked[i-1] && asked[i-1] > 0
	}
	if !retried {
		t.Errorf("the CLI never asked for a longer tail: %v", asked)
	}
	if got := logs(); got != log {
		t.Errorf("no --tail: %d bytes, want the whole log's %d", len(got), len(log))
	}
	if ts := tails(); len(ts) == 0 || ts[len(ts)-1] != 0 {
		t.Errorf("no --tail asked the agent for tails %v, want the last one 0 (all)", ts)
	}
}
