package workload

import (
	"testing"
	"time"
)

func TestWorkLost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &Workload{Spec: Spec{GPUs: 8000, Replicas: 2, CheckpointInterval: time.Hour},
		Running: &Assignment{StartedAt: t0}}
	// 2h30m in, checkpoints at 1h and 2h: 30 minutes lost on 16 GPUs.
	if got, want := w.WorkLost(t0.Add(150*time.Minute)), 30*60*16.0; got != want {
		t.Errorf("WorkLost = %v, want %v", got, want)
	}
	w.CheckpointInterval = 0
	if got, want := w.WorkLost(t0.Add(150*time.Minute)), 150*60*16.0; got != want {
		t.Errorf("WorkLost without checkpoints = %v, want %v", got, want)
	}
}

func TestValidate(t *testing.T) {
	s := Spec{Name: "a b", GPUs: 1500, Replicas: 0}
	got := map[string]bool{}
	for _, e := range s.Validate() {
		got[e.Field] = true
	}
	for _, f := range []string{"name", "tenant", "gpus", "replicas", "flavors", "regions"} {
		if !got[f] {
			t.Errorf("no problem reported for %s", f)
		}
	}
}

func TestEnums(t *testing.T) {
	var p Priority
	if err := p.UnmarshalYAMLScalar("critical"); err != nil || p != PriorityCritical || p.String() != "critical" {
		t.Errorf("priority = %v %v", p, err)
	}
	if err := p.UnmarshalYAMLScalar("urgent"); err == nil {
		t.Error("urgent accepted")
	}
	var k Kind
	if err := k.UnmarshalYAMLScalar("inference"); err != nil || k.String() != "inference" {
		t.Errorf("kind = %v %v", k, err)
	}
}

func TestDefaults(t *testing.T) {
	s := Spec{Priority: PrioritySpot}
	s.Defaults(false)
	if s.Priority != PriorityNormal || s.Replicas != 1 {
		t.Errorf("left out: %v, %d; want normal, 1", s.Priority, s.Replicas)
	}
	s = Spec{Priority: PrioritySpot, Replicas: 4}
	s.Defaults(true)
	if s.Priority != PrioritySpot || s.Replicas != 4 {
		t.Errorf("written: %v, %d; want spot, 4", s.Priority, s.Replicas)
	}
}

func TestPrioritySet(t *testing.T) {
	if DefaultAllowed.Has(PriorityCritical) || !DefaultAllowed.Has(PrioritySpot) || !DefaultAllowed.Has(PriorityHigh) {
		t.Errorf("DefaultAllowed = %v", DefaultAllowed)
	}
	if got := SetOf(PrioritySpot, PriorityHigh).String(); got != "high, spot" {
		t.Errorf("String = %q", got)
	}
	if SetOf(Priority(-1), Priority(9)) != 0 || PrioritySet(0).String() != "none" || AllPriorities.Has(Priority(9)) {
		t.Error("out-of-range classes must not be members")
	}
}
