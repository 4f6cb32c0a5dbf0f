package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Policy rule state survives restarts. After every evaluation that
// changed it, the runner saves each policy's engine state (which rules are
// in force and since when, cooldowns, the condition latches), the cap
// bases of its scale_downs and the last notification of each rule, in
// the setting settingPolicyState, in the same transaction as the firings
// and notification events it goes with. A new server restores it for each
// policy still at the revision the state was saved for, so that a rule in
// force stays in force (since its original firing) without firing or
// notifying again, and notifies its revert once when its condition
// clears. A policy applied again starts fresh, as it always has.

// settingPolicyState names the setting that holds savedPolicies.
const settingPolicyState = "policy-state"

// savedPolicies is the saved state of every policy, by name.
type savedPolicies struct {
	Policies map[string]savedPolicy `json:"policies"`
}

// savedPolicy is one policy's saved state.
type savedPolicy struct {
	// Revision is the stored policy's revision the state belongs to.
	Revision int64              `json:"revision"`
	Engine   policy.EngineState `json:"engine"`
	// CapBase holds the GPUs (milli) each scale_down's target held when it
	// came into force, by rule and action index (see effects.State).
	CapBase map[string]resource.MilliGPU `json:"cap_base,omitempty"`
	// LastNotified is each rule's last notification: its event and time.
	LastNotified map[string]savedNotice `json:"last_notified,omitempty"`
}

// savedNotice is a rule's last notification.
type savedNotice struct {
	Event string    `json:"event"`
	Time  time.Time `json:"time"`
}

// readSavedPolicies reads the saved state; none saved is an empty one.
func readSavedPolicies(tx store.ReadTx) (savedPolicies, error) {
	sp := savedPolicies{Policies: map[string]savedPolicy{}}
	st, err := store.Get[store.Setting](tx, settingPolicyState)
	if err != nil {
		return sp, nil // nothing saved yet
	}
	if err := json.Unmarshal(st.Value, &sp); err != nil {
		return savedPolicies{Policies: map[string]savedPolicy{}}, err
	}
	if sp.Policies == nil {
		sp.Policies = map[string]savedPolicy{}
	}
	return sp, nil
}

// restore puts policy name's saved state, if it was saved at revision
// rev, back into eng and the runner. Called with pr.mu held, before the
// engine's first evaluation.
func (pr *policyRunner) restore(sp savedPolicies, name string, rev int64, eng *policy.Engine) bool {
	saved, ok := sp.Policies[name]
	if !ok || saved.Revision != rev {
		return false
	}
	eng.Restore(saved.Engine)
	for k, v := range saved.CapBase {
		pr.rt.SetBase(name+"\x00"+k, v)
	}
	if len(saved.LastNotified) > 0 {
		pr.notified[name] = saved.LastNotified
	}
	return true
}

// snapshot encodes the state of every policy now, or returns nil when it
// equals the last one saved. Called with pr.mu held.
func (pr *policyRunner) snapshot() []byte {
	sp := savedPolicies{Policies: map[string]savedPolicy{}}
	for name, eng := range pr.engines {
		p := savedPolicy{Revision: pr.revs[name], Engine: eng.State(), LastNotified: pr.notified[name]}
		prefix := name + "\x00"
		for k, v := range pr.rt.Bases() {
			if rest, ok := strings.CutPrefix(k, prefix); ok {
				if p.CapBase == nil {
					p.CapBase = map[string]resource.MilliGPU{}
				}
				p.CapBase[rest] = v
			}
		}
		sp.Policies[name] = p
	}
	data, err := json.Marshal(sp) // maps encode in key order: equal states, equal bytes
	if err != nil || bytes.Equal(data, pr.saved) {
		return nil
	}
	return data
}

// noteSent records that a rule's notification was sent. Called with
// pr.mu held.
func (pr *policyRunner) noteSent(n Notification) {
	if pr.notified[n.Policy] == nil {
		pr.notified[n.Policy] = map[string]savedNotice{}
	}
	pr.notified[n.Policy][n.Rule] = savedNotice{Event: n.Event, Time: n.Time}
}

// saveState writes a snapshot in tx.
func saveState(tx store.WriteTx, data []byte) error {
	return store.Put(tx, &store.Setting{Name: settingPolicyState, Value: data}, store.Any)
}
