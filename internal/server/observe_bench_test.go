package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// BenchmarkObserve times what a cycle adds for /metrics after its plan
// (metrics.observe: the GPU, pending, reservation and node gauges and the
// per-tenant gauges from usage), beside the cycle itself, at 1,000 nodes
// (8,000 GPUs), 50 tenants and 8,000 running one-GPU workloads:
//
//	go test ./internal/server -run XXX -bench Observe -benchtime 20x
func BenchmarkObserve(b *testing.B) {
	var cfg strings.Builder
	cfg.WriteString("fleet:\n  regions:\n    - name: eastus\n      zones:\n        - name: \"1\"\n          blocks:\n")
	for i := 0; i < 125; i++ {
		fmt.Fprintf(&cfg, "            - name: b%03d\n              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 8}]\n", i)
	}
	cfg.WriteString("tenants:\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&cfg, "  - name: t%02d\n    quota:\n      - {flavor: A100-80G, region: eastus, guaranteed: 80, limit: 400}\n      - {flavor: A100-80G, limit: 800}\n", i)
	}
	h := newHarness(b, cfg.String(), Options{RateLimit: -1})
	err := h.st.Update(h.ctx, func(tx store.WriteTx) error {
		for i := 0; i < 8000; i++ {
			t := fmt.Sprintf("t%02d", i%50)
			x := &store.Workload{Tenant: t, State: store.StatePending, SubmittedAt: h.s.now(), Spec: workload.Spec{
				Name: workload.ID(fmt.Sprintf("w%05d", i)), Tenant: t, GPUs: resource.GPUs(1), Replicas: 1, Priority: workload.PriorityNormal,
				Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}}}
			if err := store.Put(tx, x, store.MustNotExist); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	var w *world
	err = h.st.View(h.ctx, func(tx store.ReadTx) error {
		var err error
		w, err = loadWorldWith(tx, h.s.cat.Load(), true, nil)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	running := 0
	for _, x := range w.Workloads {
		if x.Running != nil {
			running++
		}
	}
	if running != 8000 {
		b.Fatalf("%d of 8000 workloads running", running)
	}
	in := w.input(h.s.now(), w.Tree)
	plan := sched.Schedule(in)
	b.Run("observe", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h.s.metrics.observe(w, in, plan)
		}
	})
	b.Run("cycle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h.s.Cycle(h.ctx)
		}
	})
}
