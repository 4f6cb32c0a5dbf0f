package sim

import (
	"os"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/examples"
)

// TestOpenBScenario replays a few days of the Alibaba trace under best fit
// and FGD: pods arrive and leave at their recorded times on the trace's own
// machines, and the books balance.
func TestOpenBScenario(t *testing.T) {
	if _, err := os.Stat("../../../shared/traces/alibaba-gpu-v2023/openb_pod_list_default.csv"); err != nil {
		t.Skip("trace not present:", err)
	}
	data, err := os.ReadFile("../../examples/scenarios/openb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ParseScenario("openb.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	sc.Trace.Dir = "../../" + sc.Trace.Dir // the example is written for the repository root
	for _, name := range sc.Strategies {
		st, err := LoadStrategy(examples.FS, "strategies/"+name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(sc, st, Options{Seed: 1, Duration: 25 * 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		r := s.Run()
		if s.GPUs() != 6212 {
			t.Errorf("%s: fleet has %d GPUs, the trace 6212", name, s.GPUs())
		}
		if r.JobsSubmitted < 1000 || r.AllocatedGPUHours <= 0 {
			t.Errorf("%s: %d pods submitted, %.0f GPU-hours allocated", name, r.JobsSubmitted, r.AllocatedGPUHours)
		}
		if got := r.AllocatedGPUHours + r.IdleGPUHours; got < r.CapacityGPUHours*0.999999 || got > r.CapacityGPUHours*1.000001 {
			t.Errorf("%s: allocated + idle = %.1f, capacity = %.1f", name, got, r.CapacityGPUHours)
		}
		if r.JobsEnded+r.JobsActiveAtEnd != r.JobsSubmitted {
			t.Errorf("%s: %d submitted, %d ended, %d active", name, r.JobsSubmitted, r.JobsEnded, r.JobsActiveAtEnd)
		}
		t.Logf("%s: %d pods, utilization %.2f%%, fragmentation %.2f%%, preemptions %d", name, r.JobsSubmitted, 100*r.GPUUtilization, 100*r.Fragmentation, r.Preemptions)
	}
}
