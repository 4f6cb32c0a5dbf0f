package policy

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// TestRestoreResumes: an engine restored from another's saved state (a
// restart) continues exactly as the original would have: a rule in force
// with a `for` condition stays in force since its original firing without
// firing again, and reverts once when the condition clears. A fresh
// engine fires again (what a restart did before states were saved).
func TestRestoreResumes(t *testing.T) {
	const src = `
policies:
  - name: hot
    when: {metric: utilization, above: 85%, for: 10m}
    then: [{type: drain, target: pool:a}]
    cooldown: 2m
`
	hot := func(i int) values {
		if i < 35 {
			return values{clusterUtil: 0.9}
		}
		return values{clusterUtil: 0.1}
	}
	orig := mustEngine(t, src)
	full, _ := run(orig, 40, hot)

	first := mustEngine(t, src)
	before, _ := run(first, 20, hot)
	data, err := json.Marshal(first.State())
	if err != nil {
		t.Fatal(err)
	}
	var saved EngineState
	if err := json.Unmarshal(data, &saved); err != nil {
		t.Fatal(err)
	}
	resumed := mustEngine(t, src)
	resumed.Restore(saved)
	var after []Firing
	for i := 20; i < 40; i++ {
		st := resumed.Evaluate(t0.Add(time.Duration(i)*time.Minute), hot(i))
		after = append(after, st.Firings...)
		if i == 20 && (len(st.Active) != 1 || !st.Active[0].Since.Equal(t0.Add(10*time.Minute))) {
			t.Errorf("resumed actions %+v, want the drain in force since minute 10", st.Active)
		}
	}
	if got, want := events(append(before, after...)), events(full); !slices.Equal(got, want) {
		t.Errorf("with a restart at minute 20: %v, want %v as without", got, want)
	}
	fresh := mustEngine(t, src)
	var again []Firing
	for i := 20; i < 40; i++ {
		again = append(again, fresh.Evaluate(t0.Add(time.Duration(i)*time.Minute), hot(i)).Firings...)
	}
	if len(events(again)) != 2 {
		t.Errorf("a fresh engine: %v, want it to fire again then revert (what the state prevents)", events(again))
	}
}

// TestRestoreIgnoresUnknown: rules and leaves the engine does not have are
// ignored; rules the state does not name stay fresh.
func TestRestoreIgnoresUnknown(t *testing.T) {
	e := mustEngine(t, `
policies:
  - name: hot
    when: {metric: utilization, above: 85%}
    then: [{type: drain, target: pool:a}]
`)
	e.Restore(EngineState{Rules: []RuleState{{Rule: "gone", Active: true, Leaves: []LeafState{{Path: "x", Held: true}}}}})
	if st := e.Evaluate(t0, values{clusterUtil: 0.1}); len(st.Active)+len(st.Firings) != 0 {
		t.Errorf("step %+v, want nothing in force", st)
	}
}
