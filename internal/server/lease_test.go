package server

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestNodeLeaseWaitsForGrace: a silent agent-run node is lost only after
// its lease (NodeLostAfter) plus the longest grace period of the replicas
// assigned to it, the time its agent's fence may need to stop them; the
// heartbeat reply grants the lease.
func TestNodeLeaseWaitsForGrace(t *testing.T) {
	const lease = 2 * time.Second
	h := newHarness(t, testConfig, Options{NodeLostAfter: lease, RateLimit: -1})
	for _, id := range []string{"n1", "n2"} {
		if _, err := h.admin.RegisterNode(h.ctx, api.NodeRegistration{ID: id, Region: "eastus", Zone: "1", Block: "eus-h", SKU: "Standard_ND96isr_H100_v5",
			Labels: map[string]string{api.LabelAgent: "true"}}); err != nil {
			t.Fatal(err)
		}
		var reply api.HeartbeatReply
		if err := h.admin.Do(h.ctx, "POST", "/v1/nodes/"+id+"/heartbeat", api.Heartbeat{}, &reply); err != nil {
			t.Fatal(err)
		}
		if time.Duration(reply.Lease) != lease {
			t.Fatalf("heartbeat reply grants a lease of %v, want %v", time.Duration(reply.Lease), lease)
		}
	}
	// n1 runs replicas with graces of 5s and 3s; n2 runs nothing.
	err := h.st.Update(h.ctx, func(tx store.WriteTx) error {
		for name, g := range map[string]time.Duration{"long": 5 * time.Second, "short": 3 * time.Second} {
			w := &store.Workload{Tenant: "contoso", Spec: workload.Spec{Name: workload.ID(name), GracePeriod: g}, State: store.StateRunning,
				Running: &workload.Assignment{Replicas: []workload.Replica{{Node: "n1", GPUs: []int{0}}}}}
			if err := store.Put(tx, w, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Both nodes last heard from at the same instant, so that the cases
	// below do not depend on how far apart their heartbeats were.
	h.s.agents.mu.Lock()
	seen := h.s.agents.lastSeen["n1"]
	h.s.agents.lastSeen["n2"] = seen
	h.s.agents.mu.Unlock()
	for _, c := range []struct {
		after time.Duration
		want  map[fleet.NodeID]time.Duration
	}{
		{lease - time.Millisecond, nil},
		{lease + time.Millisecond, map[fleet.NodeID]time.Duration{"n2": 0}},
		{lease + 5*time.Second - time.Millisecond, map[fleet.NodeID]time.Duration{"n2": 0}},
		{lease + 5*time.Second + time.Millisecond, map[fleet.NodeID]time.Duration{"n1": 5 * time.Second, "n2": 0}},
	} {
		var got map[fleet.NodeID]time.Duration
		err := h.st.View(h.ctx, func(tx store.ReadTx) (err error) {
			got, err = h.s.lostNodes(tx, seen.Add(c.after), seen)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) {
			t.Errorf("%v after the last heartbeat: lost %v, want %v", c.after, got, c.want)
			continue
		}
		for id, g := range c.want {
			if gg, ok := got[id]; !ok || gg != g {
				t.Errorf("%v after the last heartbeat: lost %v, want %v", c.after, got, c.want)
			}
		}
	}
}
