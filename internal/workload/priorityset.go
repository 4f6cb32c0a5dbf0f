package workload

import "strings"

// PrioritySet is a set of priority classes.
type PrioritySet uint8

// SetOf returns the set of the given classes (unknown values are left out).
func SetOf(ps ...Priority) PrioritySet {
	var s PrioritySet
	for _, p := range ps {
		if p >= 0 && int(p) < len(priorityNames) {
			s |= 1 << uint(p)
		}
	}
	return s
}

// AllPriorities holds every class.
var AllPriorities = SetOf(PrioritySpot, PriorityLow, PriorityNormal, PriorityHigh, PriorityCritical)

// DefaultAllowed is what a tenant may use when its configuration says
// nothing: every class but critical.
var DefaultAllowed = AllPriorities &^ SetOf(PriorityCritical)

// Has reports whether p is in the set.
func (s PrioritySet) Has(p Priority) bool { return p >= 0 && p < 8 && s&(1<<uint(p)) != 0 }

// Classes lists the set's classes, highest first.
func (s PrioritySet) Classes() []Priority {
	var out []Priority
	for p := PriorityCritical; p >= PrioritySpot; p-- {
		if s.Has(p) {
			out = append(out, p)
		}
	}
	return out
}

// Names lists the set's class names, highest first.
func (s PrioritySet) Names() []string {
	out := []string{}
	for _, p := range s.Classes() {
		out = append(out, p.String())
	}
	return out
}

func (s PrioritySet) String() string {
	if s == 0 {
		return "none"
	}
	return strings.Join(s.Names(), ", ")
}
