package workload

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
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

func TestValidateElastic(t *testing.T) {
	base := func(e *Elastic, replicas int) Spec {
		s := Spec{Name: "a", Tenant: "t", GPUs: 1000, Flavors: []fleet.ModelID{"T4"}, Regions: []string{"r"}, Elastic: e, Replicas: replicas}
		s.Defaults(true)
		return s
	}
	for _, tc := range []struct {
		e        *Elastic
		replicas int
		field    string // "" = valid
	}{
		{&Elastic{Min: 4, Max: 32}, 0, ""},
		{&Elastic{Min: 4, Max: 32, Step: 4}, 12, ""},
		{&Elastic{Min: 0, Max: 32}, 0, "replicas.min"},
		{&Elastic{Min: 4, Max: 3}, 0, "replicas.max"},
		{&Elastic{Min: 4, Max: 200_000}, 0, "replicas.max"},
		{&Elastic{Min: 4, Max: 32, Step: 5}, 0, "replicas.step"},
		{&Elastic{Min: 4, Max: 32, Step: -1}, 0, "replicas.step"},
		{&Elastic{Min: 4, Max: 32, Step: 4}, 10, "replicas"},
		{&Elastic{Min: 4, Max: 32}, 33, "replicas"},
	} {
		s := base(tc.e, tc.replicas)
		errs := s.Validate()
		if tc.field == "" {
			if len(errs) > 0 {
				t.Errorf("%+v: %v", *tc.e, errs)
			}
			if tc.replicas == 0 && s.Replicas != tc.e.Min {
				t.Errorf("%+v: replicas default %d, want min", *tc.e, s.Replicas)
			}
			continue
		}
		if len(errs) != 1 || errs[0].Field != tc.field {
			t.Errorf("%+v replicas %d: %v, want one problem with %s", *tc.e, tc.replicas, errs, tc.field)
		}
	}
	fixed := Spec{Replicas: 3}
	if fixed.IsElastic() || fixed.MinReplicas() != 3 || fixed.MaxReplicas() != 3 || fixed.ReplicaStep() != 1 {
		t.Error("a fixed workload's bounds are its replicas")
	}
}

// FuzzSpecReplicas: a spec's replicas written in YAML, as a number or as
// {min, max, step}, either decodes to a spec that Validate accepts with
// bounds that hold, or is refused with a problem naming a replicas field.
func FuzzSpecReplicas(f *testing.F) {
	for _, s := range []string{"4", "{min: 4, max: 32}", "{min: 4, max: 32, step: 4}", "{min: 0, max: 1}",
		"{min: 4, max: 32, step: 5}", "{min: 4}", "{max: 9}", "-1", "{min: 1, max: 100001}", "[1]", "{min: x}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, replicas string) {
		src := "name: a\ntenant: t\ngpus: 1\nflavors: [T4]\nregions: [r]\nreplicas: " + replicas + "\n"
		var s Spec
		if err := yamlfile.Decode("w.yaml", []byte(src), &s); err != nil {
			return
		}
		s.Defaults(true)
		errs := s.Validate()
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "replicas") {
				t.Fatalf("replicas %q: problem with %s: %s", replicas, e.Field, e.Msg)
			}
		}
		if len(errs) > 0 {
			return
		}
		lo, hi, step := s.MinReplicas(), s.MaxReplicas(), s.ReplicaStep()
		if lo < 1 || hi < lo || hi > MaxReplicasBound || step < 1 || (hi-lo)%step != 0 || s.Replicas < lo || s.Replicas > hi {
			t.Fatalf("replicas %q accepted as %d (%d–%d step %d)", replicas, s.Replicas, lo, hi, step)
		}
	})
}
