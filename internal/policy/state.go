package policy

import "time"

// EngineState is what an engine remembers between evaluations, for a
// caller that must carry it across a restart (the server saves it with
// the firings): each rule's state machine and its conditions' latches.
// It is plain data (JSON-encodable); Restore puts it back.
type EngineState struct {
	Rules []RuleState `json:"rules"`
}

// RuleState is one rule's state: whether its actions are in force and
// since when, its last change (for the cooldown), whether it is clearing
// (and since when), whether max_duration ended it, and the latches of its
// condition's leaves (metric and expression conditions) by path.
type RuleState struct {
	Rule       string      `json:"rule"`
	Active     bool        `json:"active,omitempty"`
	FiredAt    time.Time   `json:"fired_at,omitzero"`
	Changed    bool        `json:"changed,omitempty"`
	ChangedAt  time.Time   `json:"changed_at,omitzero"`
	Clearing   bool        `json:"clearing,omitempty"`
	ClearSince time.Time   `json:"clear_since,omitzero"`
	Expired    bool        `json:"expired,omitempty"`
	Leaves     []LeafState `json:"leaves,omitempty"`
}

// LeafState is one condition leaf's latch: held since Since.
type LeafState struct {
	Path  string    `json:"path"`
	Held  bool      `json:"held,omitempty"`
	Since time.Time `json:"since,omitzero"`
}

// State returns the engine's state, rules in order.
func (e *Engine) State() EngineState {
	var st EngineState
	for _, rs := range e.rules {
		r := RuleState{Rule: rs.rule.Name, Active: rs.active, FiredAt: rs.firedAt, Changed: rs.changed, ChangedAt: rs.changedAt,
			Clearing: rs.clearing, ClearSince: rs.clearSince, Expired: rs.expired}
		eachLeaf(rs.root, func(n *node) {
			r.Leaves = append(r.Leaves, LeafState{Path: n.c.Path, Held: n.held, Since: n.since})
		})
		st.Rules = append(st.Rules, r)
	}
	return st
}

// Restore puts back a state State returned, so that a restarted caller
// resumes where the last one stopped: a rule in force stays in force
// (since its original firing) and does not fire again; it reverts, once,
// when its condition clears. Rules and leaves are matched by name and
// path; those the engine does not have are ignored, those the state does
// not name keep their fresh state. Call it before the first Evaluate.
func (e *Engine) Restore(st EngineState) {
	byName := make(map[string]*RuleState, len(st.Rules))
	for i := range st.Rules {
		byName[st.Rules[i].Rule] = &st.Rules[i]
	}
	for _, rs := range e.rules {
		r, ok := byName[rs.rule.Name]
		if !ok {
			continue
		}
		rs.active, rs.firedAt, rs.changed, rs.changedAt = r.Active, r.FiredAt, r.Changed, r.ChangedAt
		rs.clearing, rs.clearSince, rs.expired = r.Clearing, r.ClearSince, r.Expired
		leaves := make(map[string]LeafState, len(r.Leaves))
		for _, l := range r.Leaves {
			leaves[l.Path] = l
		}
		eachLeaf(rs.root, func(n *node) {
			if l, ok := leaves[n.c.Path]; ok {
				n.held, n.since = l.Held, l.Since
			}
		})
	}
}

// eachLeaf calls fn for every metric and expression condition under n,
// depth first.
func eachLeaf(n *node, fn func(*node)) {
	if len(n.kids) == 0 {
		if n.c.Kind == CondMetric || n.c.Kind == CondExpr {
			fn(n)
		}
		return
	}
	for _, k := range n.kids {
		eachLeaf(k, fn)
	}
}
