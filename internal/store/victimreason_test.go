package store

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/sched"
)

// TestVictimReason: the victim's tenant is told the core's reason with a
// claimant of another tenant not named; its own tenant's claimant, a
// failed node (no claimant) and tenants' names are kept.
func TestVictimReason(t *testing.T) {
	const why = "ran past its expected runtime; the planned start of beta/big needs its GPUs"
	for _, tt := range []struct {
		name, tenant string
		p            sched.Preemption
		want         string
	}{
		{"other tenant's claimant", "alpha", sched.Preemption{By: "beta/big", Reason: why},
			"ran past its expected runtime; the planned start of a workload of another tenant needs its GPUs"},
		{"own claimant", "beta", sched.Preemption{By: "beta/big", Reason: why}, why},
		{"tenant named as a prefix", "bet", sched.Preemption{By: "beta/big", Reason: why},
			"ran past its expected runtime; the planned start of a workload of another tenant needs its GPUs"},
		{"no claimant", "alpha", sched.Preemption{Reason: "node n1 is down"}, "node n1 is down"},
		{"tenants' names kept", "alpha", sched.Preemption{By: "beta/big", Reason: "tenant beta reclaims its guarantee of A100-80G in eastus from borrower alpha"},
			"tenant beta reclaims its guarantee of A100-80G in eastus from borrower alpha"},
	} {
		if got := victimReason(tt.p, tt.tenant); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
