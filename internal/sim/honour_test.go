package sim

import (
	"strings"
	"testing"
	"time"
)

// TestHonourWindowIsTheScenarios: the scenario declares the reservations'
// honour window (5 minutes unless set); a negative one is refused naming
// the field; a strategy cannot set it (it is the promise, not a knob).
func TestHonourWindowIsTheScenarios(t *testing.T) {
	base := "name: x\nduration: 1h\n"
	sc, err := ParseScenario("s.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if sc.HonourWindow != 5*time.Minute {
		t.Errorf("default window %v, want 5m", sc.HonourWindow)
	}
	if sc, err = ParseScenario("s.yaml", []byte(base+"reservation_honour_window: 2m\n")); err != nil || sc.HonourWindow != 2*time.Minute {
		t.Errorf("window 2m: %v, %v", sc, err)
	}
	if _, err := ParseScenario("s.yaml", []byte(base+"reservation_honour_window: -1m\n")); err == nil || !strings.Contains(err.Error(), "reservation_honour_window") {
		t.Errorf("negative window: %v", err)
	}
	_, err = ParseStrategy("st.yaml", []byte("name: s\noptions:\n  reservation_honour_window: 1h\n"))
	if err == nil || !strings.Contains(err.Error(), "st.yaml:3") || !strings.Contains(err.Error(), "options.reservation_honour_window") {
		t.Errorf("strategy setting the window: %v", err)
	}
}

// queuedClaim: the reservation r (one 8-GPU node) runs claim a for an
// hour; claim b comes while a runs (no room: not a promise) and waits.
// A cycle at 59 min (other work arriving) puts the next one at 1h04, so
// that when a ends (1h01) and claim c comes (1h02), b still waits for r:
// the core serves b first, oldest first, and c waits an hour. c found r
// empty, but not free for it: b was owed it first.
const queuedClaim = `name: queued-claim
duration: 3h
cycle: 5m
fleet:
  regions:
    - name: eastus
      zones:
        - name: z1
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
tenants:
  - name: fabrikam
  - name: other
    quota: [{flavor: H100-80G, region: eastus, guaranteed: 8}]
reservations:
  - {name: r, owner: fabrikam, region: eastus, sku: Standard_ND96isr_H100_v5, count: 1}
generators:
  - {name: a, tenant: fabrikam, reservation: r, flavors: [H100-80G], regions: [eastus], count: 1, at: 0s,
     sizes: [{gpus: 8, replicas: 1, weight: 1}], runtime_min: 1h, runtime_max: 1h}
  - {name: b, tenant: fabrikam, reservation: r, flavors: [H100-80G], regions: [eastus], count: 1, at: 10m,
     sizes: [{gpus: 8, replicas: 1, weight: 1}], runtime_min: 1h, runtime_max: 1h}
  - {name: c, tenant: fabrikam, reservation: r, flavors: [H100-80G], regions: [eastus], count: 1, at: 62m,
     sizes: [{gpus: 8, replicas: 1, weight: 1}], runtime_min: 1h, runtime_max: 1h}
  - {name: d, tenant: other, flavors: [H100-80G], regions: [eastus], count: 1, at: 59m,
     sizes: [{gpus: 8, replicas: 1, weight: 1}], runtime_min: 10h, runtime_max: 10h}
`

// TestClaimBehindAQueuedClaimIsNoPromise: a claim counts toward the honour
// rate only when the reservation has room for it after what runs on it
// and the owner's earlier claims still waiting for it (the core serves
// those first). Counting only running work (and earlier claims that were
// themselves promises) made c a promise broken: 1 of 2 honoured.
func TestClaimBehindAQueuedClaimIsNoPromise(t *testing.T) {
	s, sc := scenarioSim(t, "queued-claim.yaml", queuedClaim)
	placed := map[string]time.Duration{}
	s.afterStep = func() {
		for _, j := range s.jobs {
			if j.w.Running != nil && j.w.Running.OnReservation {
				if g := sc.Generators[j.gen].Name; placed[g] == 0 {
					placed[g] = s.now.Sub(sc.Start) + time.Nanosecond // a placed at 0 counts
				}
			}
		}
	}
	r := s.Run()
	// The premise: b is placed when a ends, c an hour later.
	if placed["b"] < time.Hour || placed["c"] < 2*time.Hour {
		t.Fatalf("placements on r %v: the scenario no longer builds the case", placed)
	}
	if got := r.Reservations; got.Claims != 1 || got.Honoured != 1 {
		t.Errorf("claims %d honoured %d, want 1 of 1 (a; b and c came without room)", got.Claims, got.Honoured)
	}
}
