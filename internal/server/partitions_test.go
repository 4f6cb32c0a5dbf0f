package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// partitionConfig is testConfig with eus-a-n0002 and eus-a-n0003 (two of
// eastus's four A100 machines, 16 GPUs) partitioned for contoso.
const partitionConfig = testConfig + `
partitions:
  - {name: contoso-eus, tenant: contoso, nodes: [eus-a-n0002, eus-a-n0003]}
`

var partitioned = map[string]bool{"eus-a-n0002": true, "eus-a-n0003": true}

// TestPartitions shows partitions as a user of arbiter serve sees them:
// seeded from the config, kept from other tenants even when the rest of
// the fleet is full, used by their owner, never bound to a reservation,
// changed through the API with the next cycle following, and bad bodies
// refused naming the field.
func TestPartitions(t *testing.T) {
	h := newHarness(t, partitionConfig, Options{RateLimit: -1})
	ctx := h.ctx
	fab, con := h.tenant("fabrikam"), h.tenant("contoso")

	ps, err := h.admin.ListPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Name != "contoso-eus" || ps[0].Tenant != "contoso" || ps[0].Machines != 2 || ps[0].GPUs != 16 ||
		strings.Join(ps[0].Nodes, ",") != "eus-a-n0002,eus-a-n0003" {
		t.Fatalf("seeded partitions: %+v", ps)
	}

	// (c) A reservation never takes partitioned machines, the owner's
	// included: 2 of eastus's 4 A100 machines are left to bind.
	for _, tc := range []struct {
		tenant string
		cl     *client.Client
	}{{"fabrikam", fab}, {"contoso", con}} {
		_, err := tc.cl.CreateReservation(ctx, tc.tenant, api.ReservationRequest{Name: "r3", SKU: "Standard_ND96amsr_A100_v4", Capacity: 3, Region: "eastus"})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeCapacity || !strings.Contains(ae.Message, "2 available") {
			t.Fatalf("%s reserving 3 of 4 A100 machines, 2 partitioned: %v, want 409 InsufficientCapacity with 2 available", tc.tenant, err)
		}
	}
	r, err := fab.CreateReservation(ctx, "fabrikam", api.ReservationRequest{Name: "r2", SKU: "Standard_ND96amsr_A100_v4", Capacity: 2, Region: "eastus"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Nodes {
		if partitioned[n] {
			t.Fatalf("reservation bound to partitioned node %s: %v", n, r.Nodes)
		}
	}
	if err := fab.DeleteReservation(ctx, "fabrikam", "r2"); err != nil {
		t.Fatal(err)
	}

	// (a) fabrikam (limit 32 A100 in eastus) fills the two shared
	// machines; its next workload stays pending beside the idle partition.
	if _, err := fab.Submit(ctx, "fabrikam", spec("f1", 8, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := fab.Submit(ctx, "fabrikam", spec("f2", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	nodesOf := func(cl *client.Client, tenant, name, state string) []string {
		t.Helper()
		w, err := cl.Workload(ctx, tenant, name)
		if err != nil {
			t.Fatal(err)
		}
		if w.State != state {
			t.Fatalf("%s/%s is %s, want %s", tenant, name, w.State, state)
		}
		var ns []string
		if w.Running != nil {
			for _, rep := range w.Running.Replicas {
				ns = append(ns, rep.Node)
			}
		}
		return ns
	}
	for _, n := range nodesOf(fab, "fabrikam", "f1", "Running") {
		if partitioned[n] {
			t.Fatalf("fabrikam's f1 placed on contoso's partition (%s)", n)
		}
	}
	nodesOf(fab, "fabrikam", "f2", "Pending")

	// (b) contoso's work goes onto its partition; f2 still waits.
	if _, err := con.Submit(ctx, "contoso", spec("c1", 8, 2)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx)
	for _, n := range nodesOf(con, "contoso", "c1", "Running") {
		if !partitioned[n] {
			t.Fatalf("contoso's c1 on %s, want its partition", n)
		}
	}
	nodesOf(fab, "fabrikam", "f2", "Pending")
	if _, err := con.Cancel(ctx, "contoso", "c1"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(ctx) // the partition is idle, f2 still may not use it: settled
	nodesOf(fab, "fabrikam", "f2", "Pending")

	// (d) Through the API: narrowing the partition to eus-a-n0003 frees
	// eus-a-n0002 for f2 at the next cycle.
	p, err := h.admin.SetPartition(ctx, "contoso-eus", api.PartitionRequest{Tenant: "contoso", Nodes: []string{"eus-a-n0003"}})
	if err != nil || p.Machines != 1 || p.GPUs != 8 {
		t.Fatalf("set partition: %+v %v", p, err)
	}
	// A submission alike to f2 triggers the cycle: the partition change
	// must make it run the core, not answer it from the last settled one.
	if _, err := fab.Submit(ctx, "fabrikam", spec("f3", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.cycle(ctx, true)
	if ns := nodesOf(fab, "fabrikam", "f2", "Running"); len(ns) != 1 || ns[0] != "eus-a-n0002" {
		t.Fatalf("f2 after the partition shrank runs on %v, want eus-a-n0002", ns)
	}
	nodesOf(fab, "fabrikam", "f3", "Pending")
	h.s.Cycle(ctx) // settled again: f3 waits beside the partition
	if err := h.admin.DeletePartition(ctx, "contoso-eus"); err != nil {
		t.Fatal(err)
	}
	if _, err := fab.Submit(ctx, "fabrikam", spec("f4", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.cycle(ctx, true)
	if ns := nodesOf(fab, "fabrikam", "f3", "Running"); len(ns) != 1 || ns[0] != "eus-a-n0003" {
		t.Fatalf("f3 after the partition was deleted runs on %v, want eus-a-n0003", ns)
	}
	if ps, err := h.admin.ListPartitions(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("partitions after delete: %+v %v", ps, err)
	}
	if err := h.admin.DeletePartition(ctx, "contoso-eus"); apiCode(err) != api.CodeNotFound {
		t.Fatalf("deleting a deleted partition: %v, want NotFound", err)
	}

	// (e) Bad bodies name the field.
	if _, err := con.CreateReservation(ctx, "contoso", api.ReservationRequest{Name: "rh", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.SetPartition(ctx, "wus", api.PartitionRequest{Tenant: "contoso", Blocks: []string{"wus-a"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		req    api.PartitionRequest
		status int
		field  string
		msg    string
	}{
		{"unknown tenant", api.PartitionRequest{Tenant: "initech", Nodes: []string{"eus-a-n0000"}}, 400, "tenant", `unknown tenant "initech"`},
		{"no tenant", api.PartitionRequest{Nodes: []string{"eus-a-n0000"}}, 400, "tenant", "needs a tenant"},
		{"no machines", api.PartitionRequest{Tenant: "fabrikam"}, 400, "nodes", "at least one block or node"},
		{"unknown node", api.PartitionRequest{Tenant: "fabrikam", Nodes: []string{"eus-a-n0000", "eus-a-n0099"}}, 400, "nodes[1]", `unknown node "eus-a-n0099"`},
		{"unknown block", api.PartitionRequest{Tenant: "fabrikam", Blocks: []string{"nope"}}, 400, "blocks[0]", `unknown block "nope"`},
		{"named twice", api.PartitionRequest{Tenant: "fabrikam", Blocks: []string{"eus-a"}, Nodes: []string{"eus-a-n0001"}}, 400, "nodes[0]", "already named by blocks[0]"},
		{"node in two partitions", api.PartitionRequest{Tenant: "fabrikam", Nodes: []string{"wus-a-n0001"}}, 409, "nodes[0]", `already in partition "wus"`},
		{"block in two partitions", api.PartitionRequest{Tenant: "fabrikam", Blocks: []string{"wus-a"}}, 409, "blocks[0]", `already in partition "wus"`},
		{"reserved node", api.PartitionRequest{Tenant: "fabrikam", Blocks: []string{"eus-h"}}, 409, "blocks[0]", `bound to reservation "contoso/rh"`},
	} {
		_, err := h.admin.SetPartition(ctx, "bad", tc.req)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != tc.status || ae.Field != tc.field || !strings.Contains(ae.Message, tc.msg) {
			t.Errorf("%s: %v (%+v), want %d naming %s: %s", tc.name, err, ae, tc.status, tc.field, tc.msg)
		}
	}
	if _, err := h.admin.SetPartition(ctx, "bad name!", api.PartitionRequest{Tenant: "fabrikam", Nodes: []string{"eus-a-n0000"}}); apiCode(err) != api.CodeInvalid {
		t.Errorf("invalid partition name: %v, want InvalidArgument", err)
	}
	// Replacing a partition may keep its own machines.
	if p, err := h.admin.SetPartition(ctx, "wus", api.PartitionRequest{Tenant: "fabrikam", Blocks: []string{"wus-a"}}); err != nil || p.Tenant != "fabrikam" || p.Machines != 2 {
		t.Fatalf("replacing partition wus: %+v %v", p, err)
	}
	// Tenant tokens may not touch partitions.
	if _, err := fab.SetPartition(ctx, "mine", api.PartitionRequest{Tenant: "fabrikam", Nodes: []string{"eus-a-n0000"}}); apiCode(err) != api.CodeForbidden {
		t.Errorf("tenant setting a partition: %v, want Forbidden", err)
	}

	// A tenant is not deleted while a partition names it.
	if _, err := h.admin.CreateTenant(ctx, api.Tenant{Name: "solo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.SetPartition(ctx, "solo", api.PartitionRequest{Tenant: "solo", Nodes: []string{"eus-a-n0000"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.DeleteTenant(ctx, "solo"); apiCode(err) != api.CodeConflict || !strings.Contains(err.Error(), `partition "solo"`) {
		t.Fatalf("deleting a tenant with a partition: %v, want 409 naming the partition", err)
	}
	if err := h.admin.DeletePartition(ctx, "solo"); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.DeleteTenant(ctx, "solo"); err != nil {
		t.Fatal(err)
	}

	// Every change is an event.
	ev, err := h.admin.Events(ctx, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range ev.Items {
		if strings.HasPrefix(e.Type, "Partition") {
			types = append(types, e.Type)
		}
	}
	if got := strings.Join(types, " "); got != "PartitionSet PartitionDeleted PartitionSet PartitionSet PartitionSet PartitionDeleted" {
		t.Errorf("partition events: %s", got)
	}
}
