package sim

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
)

func runShort(t testing.TB, strategy string, days int, seed uint64) *StrategyResult {
	t.Helper()
	sc, err := LoadScenario("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadStrategy(examples.FS, "strategies/"+strategy)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sc, st, Options{Seed: seed, Duration: time.Duration(days) * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s.Run()
}

func TestConservationAndEnds(t *testing.T) {
	for _, name := range []string{"static", "dynamic", "hybrid"} {
		r := runShort(t, name, 2, 1)
		// Allocated GPU-hours come from each run's start and end; idle
		// GPU-hours from per-step free capacity: two independent books.
		if got := r.AllocatedGPUHours + r.IdleGPUHours; math.Abs(got-r.CapacityGPUHours) > 1e-6*r.CapacityGPUHours {
			t.Errorf("%s: allocated %.2f + idle %.2f = %.2f GPU-h, capacity × time = %.2f", name, r.AllocatedGPUHours, r.IdleGPUHours, got, r.CapacityGPUHours)
		}
		if r.JobsEnded+r.JobsActiveAtEnd != r.JobsSubmitted {
			t.Errorf("%s: %d submitted, %d ended + %d active", name, r.JobsSubmitted, r.JobsEnded, r.JobsActiveAtEnd)
		}
		b, _ := json.MarshalIndent(r, "", " ")
		t.Logf("%s", b)
	}
}

func TestDeterministic(t *testing.T) {
	a, _ := json.Marshal(runShort(t, "hybrid", 1, 7))
	b, _ := json.Marshal(runShort(t, "hybrid", 1, 7))
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed, different results:\n%s\n%s", a, b)
	}
}
