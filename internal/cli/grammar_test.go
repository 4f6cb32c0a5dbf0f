package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// recordingServer is the seeded server behind a handler that keeps the
// bodies of the POST /v1/metrics calls it passes on.
func recordingServer(t *testing.T) (url string, pushed func() []api.MetricSample) {
	t.Helper()
	s, _ := seededServer(t, contextsWorld)
	var mu sync.Mutex
	var got []api.MetricSample
	h := s.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/metrics" {
			b, _ := io.ReadAll(r.Body)
			var ms api.MetricSamples
			if err := json.Unmarshal(b, &ms); err == nil {
				mu.Lock()
				got = append(got, ms.Samples...)
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, func() []api.MetricSample {
		mu.Lock()
		defer mu.Unlock()
		return append([]api.MetricSample(nil), got...)
	}
}

// TestMetricPushUnits (issue 22, point 4): --value is written as policy
// files write quantities and reaches the server in the metric's base
// unit; a bad value is an error naming the flag.
func TestMetricPushUnits(t *testing.T) {
	cleanEnv(t)
	url, pushed := recordingServer(t)
	as := []string{"--server", url, "--token-file", secretFile(t, "admin.token", testAdmin)}
	push := func(metric, value string) []string {
		return append([]string{"metric", "push", "--metric", metric, "--target", "service:chat", "--value", value}, as...)
	}
	for _, tc := range []struct {
		metric, value string
		want          float64
	}{
		{"p95_latency", "400ms", 0.4},
		{"p99_latency", "1.5s", 1.5},
		{"queue_wait", "2m", 120},
		{"p50_latency", "0.182", 0.182},
		{"capacity_failure_rate", "85%", 0.85},
		{"spot_price", "$2.50", 2.5},
	} {
		mustRun(t, push(tc.metric, tc.value)...)
		got := pushed()
		if len(got) == 0 || got[len(got)-1].Metric != tc.metric || got[len(got)-1].Value != tc.want {
			t.Errorf("--metric %s --value %s: pushed %+v, want value %v", tc.metric, tc.value, got, tc.want)
		}
	}
	n := len(pushed())
	for _, tc := range []struct{ metric, value, want string }{
		{"p95_latency", "400 mss", `metric push: --value: invalid value "400 mss"`},
		{"p95_latency", "fast", `metric push: --value: invalid value "fast"`},
		{"p95_latency", "85%", `metric push: --value: "85%" is a fraction, but p95_latency is a duration`},
		{"p95_latency", "5 minutes", `metric push: --value: duration "5 minutes" is not understood: write 5m`},
	} {
		errOut := mustFail(t, push(tc.metric, tc.value)...)
		wantIn(t, "--value "+tc.value, errOut, tc.want)
	}
	errOut := mustFail(t, append([]string{"metric", "push", "--metric", "p95_latency", "--target", "cluster"}, as...)...)
	wantIn(t, "no --value", errOut, "--value are required")
	if got := pushed(); len(got) != n {
		t.Errorf("bad values reached the server: %+v", got[n:])
	}
}

// TestWorkloadStateFlag (issue 22, point 4): --state is case-insensitive,
// its help lists every state, and an unknown one is refused with the
// list.
func TestWorkloadStateFlag(t *testing.T) {
	cleanEnv(t)
	_, url := seededServer(t, contextsWorld)
	ctx := context.Background()
	admin := client.New(url, testAdmin)
	for _, name := range []string{"a", "b"} {
		if _, err := admin.Submit(ctx, "contoso", api.WorkloadSpec{Name: name, GPUs: 1000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Cancel(ctx, "contoso", "b"); err != nil {
		t.Fatal(err)
	}
	as := []string{"--server", url, "--token-file", secretFile(t, "admin.token", testAdmin)}
	names := func(state string) []string {
		out := mustRun(t, append([]string{"workload", "list", "--state", state, "-o", "json"}, as...)...)
		var ws []api.Workload
		if err := json.Unmarshal([]byte(out), &ws); err != nil {
			t.Fatalf("--state %s: %v\n%s", state, err, out)
		}
		var ns []string
		for _, w := range ws {
			ns = append(ns, w.Name)
		}
		return ns
	}
	for state, want := range map[string]string{"pending": "a", "PENDING": "a", "Pending": "a", "cancelled": "b", "CanCelled": "b"} {
		if got := names(state); len(got) != 1 || got[0] != want {
			t.Errorf("--state %s: %v, want [%s]", state, got, want)
		}
	}
	if got := names("running"); len(got) != 0 {
		t.Errorf("--state running: %v, want none", got)
	}
	errOut := mustFail(t, append([]string{"workload", "list", "--state", "done"}, as...)...)
	wantIn(t, "--state done", errOut, `workload list: --state: unknown state "done": write one of `+strings.Join(api.WorkloadStates, ", "))
	help := mustRun(t, "workload", "list", "--help")
	wantIn(t, "workload list --help", help, api.WorkloadStates...)
}

// TestWorkloadListAge (issue 22, point 4): the table has an AGE column,
// the time since submission as kubectl writes it; -o json has no such
// field.
func TestWorkloadListAge(t *testing.T) {
	cleanEnv(t)
	_, url := seededServer(t, contextsWorld)
	admin := client.New(url, testAdmin)
	if _, err := admin.Submit(context.Background(), "contoso", api.WorkloadSpec{Name: "a", GPUs: 1000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
		t.Fatal(err)
	}
	as := []string{"--server", url, "--token-file", secretFile(t, "admin.token", testAdmin)}
	out := mustRun(t, append([]string{"workload", "list"}, as...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("workload list:\n%s", out)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	if head[len(head)-1] != "AGE" || !regexp.MustCompile(`^[0-9]+s$`).MatchString(row[len(row)-1]) {
		t.Errorf("workload list: no AGE in seconds last:\n%s", out)
	}
	out = mustRun(t, append([]string{"workload", "list", "-o", "json"}, as...)...)
	var ws []map[string]any
	if err := json.Unmarshal([]byte(out), &ws); err != nil || len(ws) != 1 {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if _, ok := ws[0]["age"]; ok {
		t.Errorf("-o json grew an age field:\n%s", out)
	}
	if _, ok := ws[0]["submitted_at"]; !ok {
		t.Errorf("-o json lacks submitted_at:\n%s", out)
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2030, 1, 6, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{-3 * time.Second, "0s"}, {0, "0s"}, {45 * time.Second, "45s"}, {59*time.Second + 999*time.Millisecond, "59s"},
		{time.Minute, "1m"}, {12*time.Minute + 59*time.Second, "12m"}, {3*time.Hour + 59*time.Minute, "3h"},
		{49 * time.Hour, "2d"}, {400 * 24 * time.Hour, "1y"},
	} {
		if got := age(now.Add(-tc.ago), now); got != tc.want {
			t.Errorf("age %v ago: %q, want %q", tc.ago, got, tc.want)
		}
	}
	if got := age(time.Time{}, now); got != "-" {
		t.Errorf("age of the zero time: %q, want -", got)
	}
}

// TestElasticSubmitShow: a workload file with replicas: {min, max}
// submits an elastic workload (the YAML mapping form), which workload
// list shows with its bounds and -o json with replicas as the mapping.
func TestElasticSubmitShow(t *testing.T) {
	cleanEnv(t)
	_, url := seededServer(t, contextsWorld)
	as := []string{"--server", url, "--token-file", secretFile(t, "admin.token", testAdmin)}
	job := filepath.Join(t.TempDir(), "serve.yaml")
	os.WriteFile(job, []byte("name: serve\ntenant: contoso\nkind: inference\ngpus: 1\nreplicas: {min: 2, max: 6, step: 2}\nflavors: [H100-80G]\nregions: [eastus]\n"), 0o644)
	mustRun(t, append([]string{"workload", "submit", "-f", job}, as...)...)
	out := mustRun(t, append([]string{"workload", "list"}, as...)...)
	wantIn(t, "workload list", out, "2 (2-6)")
	out = mustRun(t, append([]string{"workload", "list", "-o", "json"}, as...)...)
	wantIn(t, "workload list -o json", out, `"replicas": {`, `"min": 2`, `"max": 6`, `"step": 2`)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: bad\ntenant: contoso\ngpus: 1\nreplicas: {min: 2, max: 5, step: 2}\nflavors: [H100-80G]\nregions: [eastus]\n"), 0o644)
	errOut := mustFail(t, append([]string{"workload", "submit", "-f", bad}, as...)...)
	wantIn(t, "bad step", errOut, "replicas.step")
}
