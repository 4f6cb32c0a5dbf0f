package server

import (
	"github.com/arbiterhq/arbiter/internal/policy"
)

// policyAction is an action in force with the policy that holds it.
type policyAction struct {
	Policy string
	policy.ActiveAction
}

// inForceNow returns every action in force, by policy name then rule and
// action order (the order the actions apply in: later ones win), with
// the rule and the time it came into force. It is the one place the
// effects shown on workloads read the policy state from.
func (pr *policyRunner) inForceNow() []policyAction {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []policyAction
	for _, n := range sortedKeys(pr.active) {
		for _, a := range pr.active[n] {
			out = append(out, policyAction{Policy: n, ActiveAction: a})
		}
	}
	return out
}
