package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/probe/probetest"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// BenchmarkLoopDeadProbes measures a scheduling cycle and a policy tick
// while 0 or 1,000 probed endpoints all time out: every endpoint accepts
// the connection and never answers, each probe asks once a second with a
// 1 s timeout, and the leader's probe loop runs (at most
// probe.DefaultConcurrency attempts in flight). The loop must not slow
// down.
//
//	go test ./internal/server -run XXX -bench LoopDeadProbes -benchtime 200x
func BenchmarkLoopDeadProbes(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("probes=%d", n), func(b *testing.B) {
			h := newHarness(b, testConfig, Options{RateLimit: -1})
			c := h.tenant("contoso")
			for i := range 40 {
				s := spec(fmt.Sprintf("w%02d", i), 1, 1, "eastus")
				s.GPUs = api.GPUs(resource.GPUs(1 + i%4))
				if _, err := c.Submit(h.ctx, "contoso", s); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: operatorsSLA}); err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				url := probetest.DeadEndpoint(b)
				var src strings.Builder
				src.WriteString("probes:\n")
				for i := range n {
					fmt.Fprintf(&src, "  - {name: p%04d, url: '%s/p%04d', interval: 1s, timeout: 1s}\n", i, url, i)
				}
				if _, err := h.admin.ApplyProbes(h.ctx, api.ProbesApply{Source: src.String()}); err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(h.ctx)
				done := make(chan struct{})
				go func() { h.s.probeLoop(ctx); close(done) }()
				defer func() { cancel(); <-done }()
				// The first second's attempts are in flight before timing starts.
				for h.s.probes.run.RunDue(ctx) > 0 || len(h.s.probes.run.Statuses()) == 0 {
				}
			}
			h.s.Cycle(h.ctx)
			b.Run("cycle", func(b *testing.B) {
				for b.Loop() {
					h.s.Cycle(h.ctx)
				}
			})
			b.Run("policy-tick", func(b *testing.B) {
				for b.Loop() {
					h.s.TickPolicies(h.ctx)
				}
			})
		})
	}
}
