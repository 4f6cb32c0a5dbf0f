// Package workload defines what users ask Arbiter to run: the workload spec
// (kind, tenant, priority class, preemptibility, GPU request, acceptable
// flavors and regions, topology, runtime and checkpointing) and where a
// running workload sits (its assignment).
//
// A workload is replicas × GPUs-per-replica. GPUs per replica is whole GPUs
// (1000, 2000, ... milli) or a share of one GPU (1–999 milli). A gang with
// topology same-block is placed whole inside one block or not at all.
//
// Priority class and preemptibility are independent: a critical workload
// may be preemptible, a low one may not be.
package workload

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// ID names a workload.
type ID string

// Kind is what a workload is.
type Kind int

// Kinds.
const (
	KindBatch Kind = iota
	KindVM
	KindTraining
	KindInference
)

var kindNames = []string{"batch", "vm", "training", "inference"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// UnmarshalYAMLScalar parses "vm", "training", "inference" or "batch".
func (k *Kind) UnmarshalYAMLScalar(s string) error {
	for i, n := range kindNames {
		if s == n {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown kind %q: write one of vm, training, inference, batch", s)
}

// Priority is a priority class. Higher values win.
type Priority int

// Priority classes, lowest first.
const (
	PrioritySpot Priority = iota
	PriorityLow
	PriorityNormal
	PriorityHigh
	PriorityCritical
)

var priorityNames = []string{"spot", "low", "normal", "high", "critical"}

func (p Priority) String() string {
	if p >= 0 && int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// ParsePriority parses a priority class name.
func ParsePriority(s string) (Priority, error) {
	for i, n := range priorityNames {
		if s == n {
			return Priority(i), nil
		}
	}
	return 0, fmt.Errorf("unknown priority class %q: write one of critical, high, normal, low, spot", s)
}

// UnmarshalYAMLScalar parses a priority class name.
func (p *Priority) UnmarshalYAMLScalar(s string) error {
	v, err := ParsePriority(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Topology constrains where replicas go.
type Topology int

// Topologies.
const (
	TopologyAny       Topology = iota // replicas anywhere in the region
	TopologySameBlock                 // all replicas in one block (a gang)
)

func (t Topology) String() string {
	if t == TopologySameBlock {
		return "same-block"
	}
	return "any"
}

// UnmarshalYAMLScalar parses "any" or "same-block".
func (t *Topology) UnmarshalYAMLScalar(s string) error {
	switch s {
	case "any", "":
		*t = TopologyAny
	case "same-block":
		*t = TopologySameBlock
	default:
		return fmt.Errorf("unknown topology %q: write any or same-block", s)
	}
	return nil
}

// Spec is a workload as submitted.
type Spec struct {
	Name        ID       `yaml:"name"`
	Kind        Kind     `yaml:"kind"`
	Tenant      string   `yaml:"tenant"`
	Priority    Priority `yaml:"priority"`
	Preemptible bool     `yaml:"preemptible"`
	// GPUs per replica: whole GPUs, or 1–999 milli as a share of one GPU.
	GPUs resource.MilliGPU `yaml:"gpus"`
	// Replicas is how many replicas run: a number, or for an elastic
	// workload (written replicas: {min: 4, max: 32, step: 4}) its current
	// size, Elastic.Min while it is pending (see Elastic).
	Replicas int `yaml:"replicas,or=Elastic"`
	// Elastic, when set, bounds an elastic workload's replicas (the
	// mapping form of replicas).
	Elastic *Elastic `yaml:"-"`
	// CPU and memory per replica; zero means "no constraint".
	CPU    resource.MilliCPU `yaml:"cpu_milli"`
	Memory resource.MiB      `yaml:"memory_mib"`
	// Acceptable GPU models and regions, most preferred first.
	Flavors []fleet.ModelID `yaml:"flavors"`
	Regions []string        `yaml:"regions"`
	// Pools, when set, are the node pools (the nodes' "pool" label) the
	// workload may run in; empty: any node of its flavors and regions.
	Pools    []string `yaml:"pools"`
	Topology Topology `yaml:"topology"`
	// ExpectedRuntime is how long the workload runs when never interrupted.
	ExpectedRuntime    time.Duration     `yaml:"expected_runtime"`
	CheckpointInterval time.Duration     `yaml:"checkpoint_interval"`
	GracePeriod        time.Duration     `yaml:"grace_period"`
	Reservation        string            `yaml:"reservation"`
	MaxPrice           float64           `yaml:"max_price"` // spot: USD per GPU-hour
	Labels             map[string]string `yaml:"labels"`
}

// Elastic bounds an elastic workload: it starts with Min replicas (the
// core places it as a workload of Min replicas), grows into idle capacity
// Step replicas at a time up to Max, and on reclaim or a higher-priority
// claim gives the growth back, highest replicas first, down to Min, before
// any other workload is preempted. Growth beyond Min is borrowing, but
// for what its tenant's guarantee still covers after the tenant's other
// work: that is protected from other tenants (see sched's README).
type Elastic struct {
	Min int `yaml:"min"`
	Max int `yaml:"max"`
	// Step is how many replicas it grows or shrinks by at a time (a gang
	// that grows in whole groups); 0 means 1.
	Step int `yaml:"step"`
}

// MaxReplicasBound is the most replicas a workload may ask for.
const MaxReplicasBound = 100_000

// IsElastic reports whether the workload's replica count may change.
func (s *Spec) IsElastic() bool { return s.Elastic != nil }

// MinReplicas is the size an elastic workload starts with and shrinks to
// (Replicas for a fixed one).
func (s *Spec) MinReplicas() int {
	if s.Elastic != nil {
		return s.Elastic.Min
	}
	return s.Replicas
}

// MaxReplicas is the most replicas the workload may grow to (Replicas for
// a fixed one).
func (s *Spec) MaxReplicas() int {
	if s.Elastic != nil {
		return s.Elastic.Max
	}
	return s.Replicas
}

// ReplicaStep is how many replicas an elastic workload grows or shrinks
// by at a time (1 when Step is left out).
func (s *Spec) ReplicaStep() int {
	if s.Elastic != nil && s.Elastic.Step > 0 {
		return s.Elastic.Step
	}
	return 1
}

// The defaults of a spec's optional fields: one set for every way a spec
// comes in (the API's api.WorkloadSpec.ToWorkload and config files, see
// Defaults). Kind batch and topology any are the zero values.
const (
	DefaultPriority = PriorityNormal
	DefaultReplicas = 1
)

// Defaults fills what the writer of a spec left out: the priority class
// (normal) unless prioritySet — the zero class is spot, so only the
// decoder can tell an absent class from spot — and replicas (1) when 0;
// an elastic workload's replicas are its min, and its step 1, when left out.
func (s *Spec) Defaults(prioritySet bool) {
	if !prioritySet {
		s.Priority = DefaultPriority
	}
	if e := s.Elastic; e != nil {
		if e.Step == 0 {
			e.Step = 1
		}
		if s.Replicas == 0 {
			s.Replicas = e.Min
		}
	}
	if s.Replicas == 0 {
		s.Replicas = DefaultReplicas
	}
}

// Validate checks the spec on its own (not against a fleet) and returns a
// list of (field, message) problems.
func (s *Spec) Validate() []FieldError {
	var out []FieldError
	add := func(field, format string, args ...any) {
		out = append(out, FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if s.Name == "" {
		add("name", "a workload needs a name")
	} else if strings.ContainsAny(string(s.Name), " \t\n/") {
		add("name", "name %q may not contain spaces or slashes", s.Name)
	}
	if s.Tenant == "" {
		add("tenant", "a workload needs a tenant")
	}
	switch {
	case s.GPUs <= 0:
		add("gpus", "ask for at least 1 milli-GPU (write e.g. 1, 8, 0.5 or 250m)")
	case s.GPUs >= resource.PerGPU && !s.GPUs.Whole():
		add("gpus", "%v GPUs: more than one GPU must be a whole number", s.GPUs)
	case s.GPUs > resource.GPUs(64):
		add("gpus", "%v GPUs per replica is more than any machine has; use replicas", s.GPUs)
	}
	if e := s.Elastic; e != nil {
		step := max(e.Step, 1)
		switch {
		case e.Min < 1 || e.Min > MaxReplicasBound:
			add("replicas.min", "min must be between 1 and %d, got %d", MaxReplicasBound, e.Min)
		case e.Max < e.Min || e.Max > MaxReplicasBound:
			add("replicas.max", "max must be between min (%d) and %d, got %d", e.Min, MaxReplicasBound, e.Max)
		case e.Step < 0 || e.Step > e.Max:
			add("replicas.step", "step must be between 1 and max (%d), got %d", e.Max, e.Step)
		case (e.Max-e.Min)%step != 0:
			add("replicas.step", "step %d must divide max − min (%d − %d = %d): the workload grows in whole steps", step, e.Max, e.Min, e.Max-e.Min)
		case s.Replicas < e.Min || s.Replicas > e.Max || (s.Replicas-e.Min)%step != 0:
			add("replicas", "an elastic workload runs min (%d) plus whole steps of %d up to max (%d) replicas, got %d", e.Min, step, e.Max, s.Replicas)
		}
	} else if s.Replicas < 1 || s.Replicas > MaxReplicasBound {
		add("replicas", "replicas must be between 1 and %d, got %d", MaxReplicasBound, s.Replicas)
	}
	if len(s.Flavors) == 0 {
		add("flavors", "list at least one acceptable GPU model")
	}
	if len(s.Regions) == 0 {
		add("regions", "list at least one acceptable region")
	}
	for i, p := range s.Pools {
		if p == "" || slices.Contains(s.Pools[:i], p) {
			add("pools", "pool names must be non-empty and listed once, got %q", s.Pools)
			break
		}
	}
	if s.CPU < 0 || s.Memory < 0 {
		add("cpu_milli", "CPU and memory must not be negative")
	}
	if s.MaxPrice < 0 {
		add("max_price", "max_price must not be negative")
	}
	return out
}

// FieldError is a problem with one field of a spec.
type FieldError struct {
	Field string
	Msg   string
}

// TotalGPUs returns replicas × GPUs per replica.
func (s *Spec) TotalGPUs() resource.MilliGPU { return s.GPUs.Mul(s.Replicas) }

// Gang reports whether all replicas must go to one block.
func (s *Spec) Gang() bool { return s.Topology == TopologySameBlock }

// Replica is where one replica runs.
type Replica struct {
	Node fleet.NodeID `yaml:"node"`
	// GPUs are the device indices on the node. For a share of one GPU,
	// one index and Milli < 1000.
	GPUs  []int             `yaml:"gpus"`
	Milli resource.MilliGPU `yaml:"milli"` // per GPU
	// Since is when the replica started, for one an elastic workload grew
	// by after its run started; zero: with the run (Assignment.StartedAt).
	Since time.Time `yaml:"since" json:",omitzero"`
}

// HasStart reports whether some replica of the run started at t.
func (a *Assignment) HasStart(t time.Time) bool {
	if a.StartedAt.Equal(t) {
		return true
	}
	for _, r := range a.Replicas {
		if r.Since.Equal(t) {
			return true
		}
	}
	return false
}

// ReplicaStart is when replica i of the run started (Replica.Since, or
// the run's StartedAt).
func (a *Assignment) ReplicaStart(i int) time.Time {
	if i >= 0 && i < len(a.Replicas) && !a.Replicas[i].Since.IsZero() {
		return a.Replicas[i].Since
	}
	return a.StartedAt
}

// Assignment is where a running workload sits.
type Assignment struct {
	Flavor   fleet.ModelID `yaml:"flavor"`
	Region   string        `yaml:"region"`
	Replicas []Replica     `yaml:"replicas"`
	// OnReservation is set when the workload runs on its own reservation's
	// capacity (it then does not count against the tenant's quota).
	OnReservation bool `yaml:"on_reservation"`
	// Within is set when the workload was placed within its tenant's
	// guarantee; among a tenant's work of one priority, such work counts
	// first toward the guarantee (see sched's classifyBorrowers).
	Within    bool      `yaml:"within"`
	StartedAt time.Time `yaml:"started_at"`
	// LastCheckpoint is when the workload last saved progress; zero means
	// StartedAt.
	LastCheckpoint time.Time `yaml:"last_checkpoint"`
}

// Workload is a spec plus its state.
type Workload struct {
	Spec        `yaml:",inline"`
	SubmittedAt time.Time `yaml:"submitted_at"`
	// Running is nil for a pending workload.
	Running *Assignment `yaml:"running"`
}

// WorkLost returns the GPU-seconds a preemption at now would throw away:
// the time since the last checkpoint (the whole run when the workload has no
// checkpoint interval) times its GPUs.
func (w *Workload) WorkLost(now time.Time) float64 {
	if w.Running == nil {
		return 0
	}
	since := w.Running.StartedAt
	if w.CheckpointInterval > 0 {
		last := w.Running.LastCheckpoint
		if last.Before(since) {
			last = since
		}
		// Checkpoints happen every interval after start.
		if el := now.Sub(since); el > 0 {
			k := el / w.CheckpointInterval
			if cp := since.Add(k * w.CheckpointInterval); cp.After(last) {
				last = cp
			}
		}
		since = last
	}
	d := now.Sub(since)
	if d < 0 {
		d = 0
	}
	return d.Seconds() * float64(w.TotalGPUs()) / resource.PerGPU
}
