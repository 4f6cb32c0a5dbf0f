package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// TestElasticReplicaSet: an elastic workload placed at its min grows into
// idle GPUs: the agents start the new replicas, and every replica's
// ARBITER_REPLICAS_FILE says the new size (ARBITER_REPLICAS is the size
// it started with). A guaranteed claim takes growth back: the highest
// replicas are stopped (SIGTERM, as an eviction), the others keep running
// without a restart and read the smaller size from their file.
func TestElasticReplicaSet(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.startAgent("n1")
	e.startAgent("n2")
	e.waitFor("two nodes", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 2 })
	_, err := e.admin.Submit(e.ctx, "team", api.WorkloadSpec{Name: "serve", Kind: "inference", GPUs: api.GPUs(resource.GPUs(4)),
		Elastic: &api.ElasticSpec{Min: 1, Max: 4}, Flavors: []string{"A100-80G"}, Regions: []string{"local"}, GracePeriod: api.Duration(500 * time.Millisecond),
		Command: &api.Command{Argv: []string{"/bin/sh", e.script}, Env: map[string]string{"OUTDIR": e.out, "RUN_FOR": "60"}}})
	if err != nil {
		t.Fatal(err)
	}
	size := func(replica string) int {
		m := readEnv(t, filepath.Join(e.out, "serve-"+replica+".env.0"))
		b, err := os.ReadFile(m["ARBITER_REPLICAS_FILE"])
		if err != nil {
			return -1
		}
		var rs ReplicaSet
		if json.Unmarshal(b, &rs) != nil || len(rs.Hosts) != rs.Replicas {
			t.Fatalf("replica %s's replica set file: %s", replica, b)
		}
		return rs.Replicas
	}
	e.waitFor("serve to grow to 4 replicas, all started, replica 0 told", 20*time.Second, func() bool {
		w := e.workload("serve")
		if w.Running == nil || len(w.Running.Replicas) != 4 || !exists(filepath.Join(e.out, "serve-0.env.0")) {
			return false
		}
		for _, i := range []string{"1", "2", "3"} {
			if !exists(filepath.Join(e.out, "serve-"+i+".env.0")) {
				return false
			}
		}
		return size("0") == 4
	})
	m0 := readEnv(t, filepath.Join(e.out, "serve-0.env.0"))
	if m0["ARBITER_REPLICAS"] != "1" || !strings.HasSuffix(m0["ARBITER_REPLICAS_FILE"], "replica-0.json") {
		t.Errorf("replica 0 started with ARBITER_REPLICAS=%q, ARBITER_REPLICAS_FILE=%q; want 1 and its file", m0["ARBITER_REPLICAS"], m0["ARBITER_REPLICAS_FILE"])
	}
	if m := readEnv(t, filepath.Join(e.out, "serve-3.env.0")); m["ARBITER_REPLICAS"] != "4" || m["ARBITER_REPLICA"] != "3" {
		t.Errorf("replica 3 started with ARBITER_REPLICAS=%q ARBITER_REPLICA=%q, want 4 and 3", m["ARBITER_REPLICAS"], m["ARBITER_REPLICA"])
	}
	pid0, _ := os.ReadFile(filepath.Join(e.out, "serve-0.pid"))

	// prod's guarantee: one whole node.
	e.submit("claim", "high", 1, time.Second, "60")
	e.waitFor("the two highest replicas stopped and replica 0 told the set is 2", 20*time.Second, func() bool {
		return exists(filepath.Join(e.out, "serve-2.term")) && exists(filepath.Join(e.out, "serve-3.term")) && size("0") == 2
	})
	w := e.workload("serve")
	if w.Running == nil || len(w.Running.Replicas) != 2 || w.Preemptions != 0 {
		t.Fatalf("serve after the claim: %+v, want 2 replicas, never preempted", w)
	}
	if exists(filepath.Join(e.out, "serve-0.term")) || exists(filepath.Join(e.out, "serve-1.term")) {
		t.Error("a replica that stays got SIGTERM")
	}
	if pid, _ := os.ReadFile(filepath.Join(e.out, "serve-0.pid")); string(pid) != string(pid0) {
		t.Errorf("replica 0 restarted (pid %s, was %s)", pid, pid0)
	}
	e.waitFor("the claim to run", 10*time.Second, func() bool {
		c, err := e.admin.Workload(e.ctx, "prod", "claim")
		return err == nil && c.State == "Running"
	})
}
