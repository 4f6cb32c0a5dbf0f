package sim

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestSpotMarketIsTheServers: the simulator's spot market and the live
// server's (internal/server/spot.go: spot.Market.Used, Advance, Evictions
// and sched.SpotInput over the workloads as the scheduler sees them, on a
// clock) compute the same prices, bit for bit, and evict the same work,
// given the same inputs at every step of a day of the contention
// scenario, including two hours in which a policy sets a price.
func TestSpotMarketIsTheServers(t *testing.T) {
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadStrategy(examples.FS, "strategies/dynamic")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: 1, Duration: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f := s.cfg.Fleet
	server := spot.New(f)
	set := map[spot.Key]float64{}
	for _, k := range server.Keys() {
		set[k] = 100 // above every max price
	}
	var want []spot.Eviction
	var running map[workload.ID]bool
	steps, evicted, moved := 0, 0, 0
	s.beforeSpot = func() {
		s.spotSet = nil
		if h := s.now.Sub(sc.Start); h >= 3*time.Hour && h < 5*time.Hour {
			s.spotSet = set
		}
		var ws []*workload.Workload
		running = map[workload.ID]bool{}
		for _, j := range s.jobs {
			if !j.done {
				ws = append(ws, j.w)
				running[j.w.Name] = j.w.Running != nil
			}
		}
		server.Advance(s.now, server.Used(f, ws), s.spotSet)
		want = server.Evictions(f, ws)
	}
	s.afterSpot = func() {
		steps++
		simQ, srvQ := s.market.Quotes(), server.Quotes()
		if got, exp := sched.SpotInput(nil, simQ), sched.SpotInput(nil, srvQ); !equalPrices(got, exp) {
			t.Fatalf("%v: simulator prices %v, server %v", s.now, got, exp)
		}
		for i, q := range simQ {
			if q.PerGPUHour != q.Catalog && !q.Firm && i < len(srvQ) {
				moved++
			}
		}
		for _, e := range want {
			if e.Workload.Running != nil {
				t.Fatalf("%v: the server evicts %s (%s); the simulator kept it", s.now, e.Workload.Name, e.Reason())
			}
		}
		lost := 0
		for _, j := range s.jobs {
			if running[j.w.Name] && j.w.Running == nil && spot.Bound(j.w) {
				lost++
			}
		}
		if lost != len(want) {
			t.Fatalf("%v: the simulator evicted %d spot workloads, the server %d", s.now, lost, len(want))
		}
		evicted += lost
	}
	s.Run()
	if steps != 24*60 || evicted == 0 || moved == 0 {
		t.Fatalf("%d steps, %d evictions, %d moved quotes: the case did not exercise the market", steps, evicted, moved)
	}
	t.Logf("%d steps, %d spot evictions, %d quotes off the catalog price", steps, evicted, moved)
}

func equalPrices(a, b []sched.SpotPrice) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
