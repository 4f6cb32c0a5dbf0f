package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/server"
)

// grammarWorld is the contexts world with workload "train" of contoso
// running (placed by a cycle) and "idle" of fabrikam pending (over its
// limit).
func grammarWorld(t *testing.T) (s *server.Server, url string, admin *client.Client, as []string) {
	t.Helper()
	cleanEnv(t)
	s, _, url = seededServerWith(t, contextsWorld, server.Options{})
	ctx := context.Background()
	admin = client.New(url, testAdmin)
	for _, x := range []struct {
		tenant, name string
		replicas     int
	}{{"contoso", "train", 1}, {"fabrikam", "idle", 3}} { // idle: 24 GPUs, over fabrikam's limit of 16
		if _, err := admin.Submit(ctx, x.tenant, api.WorkloadSpec{Name: x.name, GPUs: 8000, Replicas: x.replicas, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Cycle(ctx)
	return s, url, admin, []string{"--server", url, "--token-file", secretFile(t, "admin.token", testAdmin)}
}

// TestOutputFormats (issue 22, point 4): every read command accepts -o
// table, wide, json, yaml and jsonl; json is one document (a list one
// array), yaml parses, jsonl is one JSON document a line, the table has a
// header; an unknown format is refused naming the accepted ones.
func TestOutputFormats(t *testing.T) {
	_, _, _, as := grammarWorld(t)
	node := "h1-n0000"
	reads := [][]string{
		{"workload", "list"},
		{"workload", "show", "train", "--tenant", "contoso"},
		{"workload", "why", "idle", "--tenant", "fabrikam"},
		{"reservation", "list"},
		{"usage", "list"},
		{"node", "list"},
		{"node", "show", node},
		{"tenant", "list"},
		{"tenant", "show", "contoso"},
		{"region", "list"},
		{"events"},
		{"token", "list"},
		{"partition", "list"},
		{"alert", "list"},
		{"probe", "list"},
		{"policy", "list"},
	}
	for _, args := range reads {
		name := strings.Join(args, " ")
		table := mustRun(t, append(append([]string{}, args...), as...)...)
		if first, _, _ := strings.Cut(table, "\n"); first == "" || strings.ToUpper(strings.Fields(first)[0]) != strings.Fields(first)[0] {
			t.Errorf("%s: the table's first line is no header: %q", name, first)
		}
		wide := mustRun(t, append(append([]string{}, args...), append(as, "-o", "wide")...)...)
		if len(wide) < len(table)-8 { // AGE may tick between the two
			t.Errorf("%s -o wide is shorter than the table:\n%s\n%s", name, wide, table)
		}
		js := mustRun(t, append(append([]string{}, args...), append(as, "-o", "json")...)...)
		dec := json.NewDecoder(strings.NewReader(js))
		var doc any
		if err := dec.Decode(&doc); err != nil {
			t.Errorf("%s -o json: %v\n%s", name, err, js)
		} else if err := dec.Decode(&doc); err != io.EOF {
			t.Errorf("%s -o json: more than one document (%v):\n%s", name, err, js)
		}
		y := mustRun(t, append(append([]string{}, args...), append(as, "-o", "yaml")...)...)
		var ydoc any
		if err := yaml.Unmarshal([]byte(y), &ydoc); err != nil {
			t.Errorf("%s -o yaml: %v\n%s", name, err, y)
		}
		jl := mustRun(t, append(append([]string{}, args...), append(as, "-o", "jsonl")...)...)
		for _, line := range strings.Split(strings.TrimSuffix(jl, "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("%s -o jsonl: a line is not JSON: %q", name, line)
			}
		}
		errOut := mustFail(t, append(append([]string{}, args...), append(as, "-o", "xml")...)...)
		wantIn(t, name+" -o xml", errOut, `unknown output format "xml"`, "table, wide, json, yaml, jsonl")
	}
	// Wide adds columns where a command has them.
	wantIn(t, "workload list -o wide", mustRun(t, append([]string{"workload", "list", "-o", "wide"}, as...)...), "NODES", "END REASON", "h1-n")
	wantIn(t, "node list -o wide", mustRun(t, append([]string{"node", "list", "-o", "wide"}, as...)...), "LABELS")
	wantNotIn(t, "node list", mustRun(t, append([]string{"node", "list"}, as...)...), "LABELS")
	// Events: a JSON array, and JSON lines each an event.
	jl := mustRun(t, append([]string{"events", "-o", "jsonl"}, as...)...)
	lines := strings.Split(strings.TrimSpace(jl), "\n")
	if len(lines) < 2 {
		t.Fatalf("events -o jsonl: %d line(s):\n%s", len(lines), jl)
	}
	for _, l := range lines {
		var e api.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Seq == 0 {
			t.Errorf("events -o jsonl line %q: %+v %v", l, e, err)
		}
	}
	errOut := mustFail(t, append([]string{"events", "--follow", "-o", "json"}, as...)...)
	wantIn(t, "events --follow -o json", errOut, "use -o table, wide or jsonl")
	errOut = mustFail(t, append([]string{"workload", "list", "--watch", "-o", "yaml"}, as...)...)
	wantIn(t, "workload list --watch -o yaml", errOut, "use -o table, wide or jsonl")
}

// started is a CLI command running until its context ends, its stdout
// read line by line.
type started struct {
	lines  chan string
	cancel context.CancelFunc
	done   chan error
}

// start runs the CLI with args in the background.
func start(t *testing.T, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	st := &started{lines: make(chan string, 1000), cancel: cancel, done: make(chan error, 1)}
	var errOut bytes.Buffer
	root := NewRoot(pw, &errOut)
	root.SetArgs(args)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.Close()
		st.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			st.lines <- sc.Text()
		}
		close(st.lines)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-st.done:
		case <-time.After(10 * time.Second):
			t.Errorf("arbiter %s did not end with its context", strings.Join(args, " "))
		}
	})
	return st
}

// waitFor reads lines until one satisfies ok, and returns the lines read;
// the test fails when none has within the deadline (a bound on a hang,
// not a measure of timing).
func (st *started) waitFor(t *testing.T, what string, ok func(string) bool) []string {
	t.Helper()
	var seen []string
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, more := <-st.lines:
			if !more {
				t.Fatalf("output ended before %s:\n%s", what, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if ok(l) {
				return seen
			}
		case <-deadline:
			t.Fatalf("no %s in the output:\n%s", what, strings.Join(seen, "\n"))
		}
	}
}

// TestWatch (issue 22, point 4): --watch prints the table, then again when
// the event stream reports a change (a cancel, a cordon); with -o jsonl a
// JSON document a line per change; it ends with its context.
func TestWatch(t *testing.T) {
	_, _, admin, as := grammarWorld(t)
	ctx := context.Background()
	w := start(t, append([]string{"workload", "list", "--watch", "--tenant", "contoso"}, as...)...)
	seen := w.waitFor(t, "the first table's train row", func(l string) bool { return strings.HasPrefix(l, "train ") && strings.Contains(l, "Running") })
	if _, err := admin.Cancel(ctx, "contoso", "train"); err != nil {
		t.Fatal(err)
	}
	seen = append(seen, w.waitFor(t, "a second table with train Cancelled", func(l string) bool { return strings.HasPrefix(l, "train ") && strings.Contains(l, "Cancelled") })...)
	if n := strings.Count(strings.Join(seen, "\n"), "NAME "); n != 2 {
		t.Errorf("%d table headers, want 2 (the first table, then the change):\n%s", n, strings.Join(seen, "\n"))
	}

	n := start(t, append([]string{"node", "list", "--watch", "-o", "jsonl"}, as...)...)
	first := n.waitFor(t, "the first document", func(string) bool { return true })
	var nodes []api.Node
	if err := json.Unmarshal([]byte(first[0]), &nodes); err != nil || len(nodes) != 4 {
		t.Fatalf("first jsonl document: %v %s", err, first[0])
	}
	yes := true
	if _, err := admin.UpdateNode(ctx, "h1-n0003", api.NodeUpdate{Cordoned: &yes}); err != nil {
		t.Fatal(err)
	}
	next := n.waitFor(t, "a document with h1-n0003 cordoned", func(l string) bool { return strings.Contains(l, `"state":"cordoned"`) })
	if err := json.Unmarshal([]byte(next[len(next)-1]), &nodes); err != nil {
		t.Fatalf("second jsonl document: %v", err)
	}
	for _, x := range nodes {
		if (x.ID == "h1-n0003") != (x.State == "cordoned") {
			t.Errorf("node %s state %s", x.ID, x.State)
		}
	}
}

// TestNodeCordonCLI (issue 22, point 4): node cordon keeps the running
// work where it is and sends new work elsewhere; node list's STATE tells
// ready, cordoned and drained apart; uncordon opens it again.
func TestNodeCordonCLI(t *testing.T) {
	s, _, admin, as := grammarWorld(t)
	ctx := context.Background()
	w, err := admin.Workload(ctx, "contoso", "train")
	if err != nil || w.Running == nil {
		t.Fatalf("train: %+v %v", w, err)
	}
	on := w.Running.Replicas[0].Node
	out := mustRun(t, append([]string{"node", "cordon", on}, as...)...)
	wantIn(t, "node cordon", out, "STATE", "cordoned")
	if _, err := admin.Submit(ctx, "contoso", api.WorkloadSpec{Name: "next", GPUs: 8000, Replicas: 1, Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}); err != nil {
		t.Fatal(err)
	}
	s.Cycle(ctx)
	s.Cycle(ctx)
	if w, _ := admin.Workload(ctx, "contoso", "train"); w.Running == nil || w.Running.Replicas[0].Node != on {
		t.Fatalf("train left cordoned node %s: %+v", on, w.Running)
	}
	if x, _ := admin.Workload(ctx, "contoso", "next"); x.Running == nil || x.Running.Replicas[0].Node == on {
		t.Fatalf("next: %+v, want running on a node other than %s", x.Running, on)
	}
	other := "h1-n0003"
	if other == on {
		other = "h1-n0002"
	}
	mustRun(t, append([]string{"node", "drain", other}, as...)...)
	out = mustRun(t, append([]string{"node", "list"}, as...)...)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "ID" {
			continue
		}
		want := "ready"
		switch f[0] {
		case on:
			want = "cordoned"
		case other:
			want = "drained"
		}
		if f[len(f)-1] != want {
			t.Errorf("node list: %s is %s, want %s:\n%s", f[0], f[len(f)-1], want, out)
		}
	}
	out = mustRun(t, append([]string{"node", "uncordon", on}, as...)...)
	wantIn(t, "node uncordon", out, "ready")
}

// TestEndedWorkloadCLI (issue 22, point 4): a cancelled workload shows
// when it ended, why and the node it ran on, in show and list -o wide.
func TestEndedWorkloadCLI(t *testing.T) {
	_, _, admin, as := grammarWorld(t)
	w, _ := admin.Workload(context.Background(), "contoso", "train")
	on := w.Running.Replicas[0].Node
	mustRun(t, append([]string{"workload", "cancel", "train", "--tenant", "contoso"}, as...)...)
	out := mustRun(t, append([]string{"workload", "show", "train"}, as...)...)
	wantIn(t, "workload show", out, "ENDED ", "END REASON", "cancelled by the admin", "LAST NODES", on)
	out = mustRun(t, append([]string{"workload", "list", "-o", "wide", "--state", "cancelled"}, as...)...)
	wantIn(t, "workload list -o wide", out, "END REASON", "cancelled by the admin", on)
	var got api.Workload
	if err := json.Unmarshal([]byte(mustRun(t, append([]string{"workload", "show", "train", "-o", "json"}, as...)...)), &got); err != nil || got.EndedAt.IsZero() || len(got.EndNodes) != 1 {
		t.Fatalf("workload show -o json: %+v %v", got, err)
	}
}

// TestCompletion (issue 22, point 4): `completion bash` writes the script;
// workload show, node cordon and tenant show complete names from the
// server; an unreachable server completes nothing, quietly.
func TestCompletion(t *testing.T) {
	_, _, _, as := grammarWorld(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		wantIn(t, "completion "+sh, mustRun(t, "completion", sh), "arbiter")
	}
	names := func(args ...string) []string {
		// The word being completed comes last, after the flags.
		line := append(append(append([]string{"__complete"}, args[:len(args)-1]...), as...), args[len(args)-1])
		out := mustRun(t, line...)
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "Completion ended") {
				got = append(got, l)
			}
		}
		return got
	}
	if got := names("workload", "show", ""); strings.Join(got, ",") != "idle,train" {
		t.Errorf("workload show completes %q, want idle,train", got)
	}
	if got := names("workload", "logs", "tr"); strings.Join(got, ",") != "train" {
		t.Errorf("workload logs tr completes %q, want train", got)
	}
	if got := names("node", "cordon", ""); len(got) != 4 || got[0] != "h1-n0000" {
		t.Errorf("node cordon completes %q", got)
	}
	if got := names("tenant", "show", "fab"); strings.Join(got, ",") != "fabrikam" {
		t.Errorf("tenant show fab completes %q", got)
	}
	out, errOut, code := run(t, "__complete", "workload", "show", "--server", "http://127.0.0.1:1", "--token-file", as[3], "")
	if code != 0 || strings.Contains(out, "train") {
		t.Errorf("unreachable server: exit %d, %q %q", code, out, errOut)
	}
}
