package server

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
)

// placeSequence submits fractional A100 workloads one at a time to a
// server scheduling with these options, one cycle each, and returns the
// node each was placed on.
func placeSequence(t *testing.T, o sched.Options, milli ...int) []string {
	t.Helper()
	h := newHarness(t, testConfig, Options{RateLimit: -1, Scheduling: o})
	c := h.tenant("fabrikam")
	var nodes []string
	for i, m := range milli {
		s := api.WorkloadSpec{Name: fmt.Sprintf("w%d", i), GPUs: api.GPUs(m), Replicas: 1, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}
		if _, err := c.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
		h.s.Cycle(h.ctx)
		w, err := c.Workload(h.ctx, "fabrikam", s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if w.Running == nil {
			t.Fatalf("%s (%d milli-GPUs) not placed", s.Name, m)
		}
		nodes = append(nodes, w.Running.Replicas[0].Node)
	}
	return nodes
}

// TestServerHonoursScorer: the live server places with the configured
// scorer, as the simulator and `arbiter schedule` do. Best fit packs the
// third 3-GPU workload onto the node that still has room; FGD, which
// rates fragmentation against the typical requests, opens another node.
func TestServerHonoursScorer(t *testing.T) {
	seq := []int{3000, 250, 3000}
	best := placeSequence(t, sched.Options{}, seq...)
	fgd := placeSequence(t, sched.Options{Scorer: "fgd"}, seq...)
	if want := []string{"eus-a-n0000", "eus-a-n0000", "eus-a-n0000"}; !slices.Equal(best, want) {
		t.Errorf("best fit placed on %v, want %v", best, want)
	}
	if want := []string{"eus-a-n0000", "eus-a-n0000", "eus-a-n0001"}; !slices.Equal(fgd, want) {
		t.Errorf("fgd placed on %v, want %v (the scorer was ignored if it equals best fit's %v)", fgd, want, best)
	}
	// The explicit name of the default's paper equivalent is a scorer too.
	if bf := placeSequence(t, sched.Options{Scorer: "bestfit"}, seq...); len(bf) != len(seq) {
		t.Errorf("bestfit placed %v", bf)
	}
}

// TestServerRefusesUnknownScorer: New refuses a scorer the core does not
// know, naming the known ones, instead of silently scheduling by best fit.
func TestServerRefusesUnknownScorer(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "arbiter.db"), &store.BoltOptions{MaxBatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = New(t.Context(), Options{Store: st, AdminToken: testAdmin, Logger: slog.New(slog.DiscardHandler), Scheduling: sched.Options{Scorer: "tetris"}})
	if !errors.Is(err, ErrUnknownScorer) {
		t.Fatalf("New with scorer tetris: %v, want ErrUnknownScorer", err)
	}
	for _, want := range []string{`"tetris"`, "fgd"} {
		if !containsStr(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }
