package server

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestNodeDrainAndDelete: draining a node evicts its work, which runs
// elsewhere where there is room and takes none there until undrained; a
// node that runs work or that a reservation holds cannot be deleted; a
// drained, empty one can.
func TestNodeDrainAndDelete(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("a", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	where := func() string {
		w, err := c.Workload(h.ctx, "contoso", "a")
		if err != nil || w.Running == nil || len(w.Running.Replicas) == 0 {
			return ""
		}
		return w.Running.Replicas[0].Node
	}
	first := where()
	if first == "" {
		t.Fatal("a is not running")
	}
	if err := h.admin.DeleteNode(h.ctx, first); apiCode(err) != api.CodeConflict {
		t.Fatalf("deleting a node with work on it: %v, want Conflict", err)
	}
	yes, no := true, false
	n, err := h.admin.UpdateNode(h.ctx, first, api.NodeUpdate{Drained: &yes})
	if err != nil || !n.Drained || !n.Down {
		t.Fatalf("drain: %+v %v", n, err)
	}
	h.s.Cycle(h.ctx) // evicts a from the drained node
	h.s.Cycle(h.ctx) // places it again
	if now := where(); now == "" || now == first {
		t.Fatalf("after draining %s, a runs on %q", first, now)
	}
	if _, err := c.Submit(h.ctx, "contoso", spec("b", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if w, _ := c.Workload(h.ctx, "contoso", "b"); w.Running != nil && w.Running.Replicas[0].Node == first {
		t.Fatalf("new work placed on drained node %s", first)
	}
	if err := h.admin.DeleteNode(h.ctx, first); err != nil {
		t.Fatalf("deleting the drained, empty node: %v", err)
	}
	if err := h.admin.DeleteNode(h.ctx, first); apiCode(err) != api.CodeNotFound {
		t.Errorf("deleting it again: %v, want NotFound", err)
	}
	if _, err := h.admin.UpdateNode(h.ctx, first, api.NodeUpdate{Drained: &no}); apiCode(err) != api.CodeNotFound {
		t.Errorf("undraining a deleted node: %v, want NotFound", err)
	}
	// A reservation's machine cannot be deleted.
	r, err := c.CreateReservation(h.ctx, "contoso", api.ReservationRequest{Name: "r", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"})
	if err != nil || len(r.Nodes) != 1 {
		t.Fatalf("reservation: %+v %v", r, err)
	}
	if err := h.admin.DeleteNode(h.ctx, r.Nodes[0]); apiCode(err) != api.CodeConflict {
		t.Errorf("deleting a reserved node: %v, want Conflict", err)
	}
	// Undrain returns a node to service; bad bodies are refused.
	other := "eus-a-n0003"
	if first == other {
		other = "eus-a-n0002"
	}
	if _, err := h.admin.UpdateNode(h.ctx, other, api.NodeUpdate{Drained: &yes}); err != nil {
		t.Fatal(err)
	}
	if n, err := h.admin.UpdateNode(h.ctx, other, api.NodeUpdate{Drained: &no}); err != nil || n.Drained || n.Down {
		t.Errorf("undrain: %+v %v", n, err)
	}
	if _, err := h.admin.UpdateNode(h.ctx, other, api.NodeUpdate{}); apiCode(err) != api.CodeInvalid {
		t.Errorf("empty update: %v, want InvalidArgument", err)
	}
}

// TestNodeCordon: a cordoned node keeps the work running on it but takes
// no new work (which goes elsewhere), and shows state cordoned; uncordoned,
// it takes work again (the same best fit that the cordon turned away).
func TestNodeCordon(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	where := func(name string) string {
		w, err := c.Workload(h.ctx, "contoso", name)
		if err != nil || w.Running == nil || len(w.Running.Replicas) == 0 {
			return ""
		}
		return w.Running.Replicas[0].Node
	}
	if _, err := c.Submit(h.ctx, "contoso", spec("a", 4, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	first := where("a")
	if first == "" {
		t.Fatal("a is not running")
	}
	yes, no := true, false
	n, err := h.admin.UpdateNode(h.ctx, first, api.NodeUpdate{Cordoned: &yes})
	if err != nil || !n.Cordoned || n.Down || n.Drained || n.State != "cordoned" {
		t.Fatalf("cordon: %+v %v", n, err)
	}
	if _, err := c.Submit(h.ctx, "contoso", spec("b", 4, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	h.s.Cycle(h.ctx)
	if now := where("a"); now != first {
		t.Fatalf("a moved from cordoned node %s to %q", first, now)
	}
	if b := where("b"); b == "" || b == first {
		t.Fatalf("b runs on %q: want a node other than cordoned %s", b, first)
	}
	if n, err := h.admin.UpdateNode(h.ctx, first, api.NodeUpdate{Cordoned: &no}); err != nil || n.Cordoned || n.State != "ready" {
		t.Fatalf("uncordon: %+v %v", n, err)
	}
	if _, err := c.Submit(h.ctx, "contoso", spec("c", 4, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if got := where("c"); got != first {
		t.Fatalf("after uncordon c runs on %q, want the best fit %s (4 GPUs free)", got, first)
	}
	// Drained wins over cordoned in the state shown.
	if n, err := h.admin.UpdateNode(h.ctx, first, api.NodeUpdate{Cordoned: &yes, Drained: &yes}); err != nil || n.State != "drained" {
		t.Fatalf("cordoned and drained: %+v %v", n, err)
	}
}
