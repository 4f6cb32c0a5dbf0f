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
	"github.com/arbiterhq/arbiter/internal/mig"
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
	Name        ID       `yaml:"name" json:"Name,omitzero"`
	Kind        Kind     `yaml:"kind" json:"Kind,omitzero"`
	Tenant      string   `yaml:"tenant" json:"Tenant,omitzero"`
	Priority    Priority `yaml:"priority" json:"Priority,omitzero"`
	Preemptible bool     `yaml:"preemptible" json:"Preemptible,omitzero"`
	// GPUs per replica: whole GPUs, or 1–999 milli as a share of one GPU.
	GPUs resource.MilliGPU `yaml:"gpus" json:"GPUs,omitzero"`
	// Replicas is how many replicas run: a number, or for an elastic
	// workload (written replicas: {min: 4, max: 32, step: 4}) its current
	// size, Elastic.Min while it is pending (see Elastic).
	Replicas int `yaml:"replicas,or=Elastic" json:"Replicas,omitzero"`
	// Elastic, when set, bounds an elastic workload's replicas (the
	// mapping form of replicas).
	Elastic *Elastic `yaml:"-" json:"Elastic,omitzero"`
	// CPU and memory per replica; zero means "no constraint".
	CPU    resource.MilliCPU `yaml:"cpu_milli" json:"CPU,omitzero"`
	Memory resource.MiB      `yaml:"memory_mib" json:"Memory,omitzero"`
	// Acceptable GPU models and regions, most preferred first.
	Flavors []fleet.ModelID `yaml:"flavors" json:"Flavors,omitzero"`
	Regions []string        `yaml:"regions" json:"Regions,omitzero"`
	// Pools, when set, are the node pools (the nodes' "pool" label) the
	// workload may run in; empty: any node of its flavors and regions.
	Pools    []string `yaml:"pools" json:"Pools,omitzero"`
	Topology Topology `yaml:"topology" json:"Topology,omitzero"`
	// ExpectedRuntime is how long the workload runs when never interrupted.
	ExpectedRuntime    time.Duration     `yaml:"expected_runtime" json:"ExpectedRuntime,omitzero"`
	CheckpointInterval time.Duration     `yaml:"checkpoint_interval" json:"CheckpointInterval,omitzero"`
	GracePeriod        time.Duration     `yaml:"grace_period" json:"GracePeriod,omitzero"`
	Reservation        string            `yaml:"reservation" json:"Reservation,omitzero"`
	MaxPrice           float64           `yaml:"max_price" json:"MaxPrice,omitzero"` // spot: USD per GPU-hour
	Labels             map[string]string `yaml:"labels" json:"Labels,omitzero"`
	// MIG, when set, is the MIG profile ("3g.40gb") of the one GPU
	// instance each replica gets, on a GPU in MIG mode of a flavor that
	// has the profile (internal/mig). GPUs is then the profile's share of
	// a GPU, its memory slices out of 8 (Defaults fills it): what the
	// replica counts against quota.
	MIG string `yaml:"mig" json:"MIG,omitzero"`
	// GPUMemory, when set, is the GPU memory each of a replica's GPUs
	// must have: only flavors whose model has at least that much are
	// used (a share of a GPU is not memory-isolated: the model's whole
	// memory counts). Not with MIG, whose profile fixes the memory; with
	// neither GPUs nor MIG, Defaults turns it into the smallest MIG
	// profile with that much (memoryProfile) and clears it.
	GPUMemory resource.GPUMemory `yaml:"gpu_memory" json:"GPUMemory,omitzero"`
}

// maxMIGName bounds a MIG profile name as checked (the longest is 8).
const maxMIGName = 32

// MIGShare is the share of a GPU one instance of the spec's MIG profile
// is on flavor m (0 when m has no such profile).
func (s *Spec) MIGShare(m fleet.ModelID) resource.MilliGPU {
	g, ok := mig.For(string(m))
	if !ok {
		return 0
	}
	i := g.Index(s.MIG)
	if i < 0 {
		return 0
	}
	return resource.MilliGPU(g.Profiles[i].Share())
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
	if s.MIG == "" && s.GPUs == 0 && s.GPUMemory > 0 {
		// gpu_memory alone: the smallest MIG instance with that much,
		// when every flavor names the same one (else Validate says why).
		if p, problem := s.memoryProfile(); problem == "" {
			s.MIG, s.GPUMemory = p, 0
		}
	}
	if s.MIG != "" && s.GPUs == 0 {
		// The share on the first flavor with the profile (Validate
		// checks that the flavors agree).
		for _, m := range s.Flavors {
			if sh := s.MIGShare(m); sh > 0 {
				s.GPUs = sh
				break
			}
		}
		if s.GPUs == 0 {
			if sh, _, ok := mig.Lookup(s.MIG); ok {
				s.GPUs = resource.MilliGPU(sh)
			}
		}
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
	case s.GPUs <= 0 && s.MIG == "" && s.GPUMemory > 0 && len(s.Flavors) > 0:
		_, problem := s.memoryProfile()
		add("gpu_memory", "gpu_memory without gpus or mig asks for the smallest MIG instance with %v, but %s", s.GPUMemory, problem)
	case s.GPUs <= 0 && s.MIG == "": // with mig, mig says what is wrong
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
	out = append(out, s.validateMIG()...)
	if s.GPUMemory < 0 || resource.MiB(s.GPUMemory) > resource.MaxGPUMemory {
		add("gpu_memory", "gpu_memory must be between 1MiB and 1TiB")
	}
	return out
}

// memoryProfile is the MIG profile a spec with gpu_memory and neither gpus
// nor mig asks for: on each flavor the smallest with at least that much
// memory (mig.GPU.Smallest). It is "" with a problem (a clause for an
// error message) when a flavor has no MIG or no profile with that much,
// or the flavors' profiles differ in name or share.
func (s *Spec) memoryProfile() (profile, problem string) {
	if len(s.Flavors) == 0 {
		return "", "no flavors are listed"
	}
	var first fleet.ModelID
	for _, m := range s.Flavors {
		g, ok := mig.For(string(m))
		if !ok {
			return "", fmt.Sprintf("%s has no MIG (MIG models: %s): for whole GPUs or a share add gpus", m, strings.Join(mig.Models(), ", "))
		}
		i := g.Smallest(int64(s.GPUMemory))
		if i < 0 {
			largest := g.Profiles[len(g.Profiles)-1]
			return "", fmt.Sprintf("no MIG profile of %s has that much (the largest is %s)", m, largest.Name)
		}
		switch name := g.Profiles[i].Name; {
		case profile == "":
			profile, first = name, m
		case name != profile || (&Spec{MIG: name}).MIGShare(m) != (&Spec{MIG: profile}).MIGShare(first):
			return "", fmt.Sprintf("that is %s on %s and %s on %s: list flavors where it is the same profile, or name one with mig", profile, first, name, m)
		}
	}
	return profile, ""
}

// validateMIG checks mig against gpus, gpu_memory and the flavors: every
// flavor has the profile, with one share of a GPU.
func (s *Spec) validateMIG() []FieldError {
	if s.MIG == "" {
		return nil
	}
	var out []FieldError
	add := func(field, format string, args ...any) {
		out = append(out, FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if len(s.MIG) > maxMIGName {
		add("mig", "unknown MIG profile (longer than %d characters): write one of %s", maxMIGName, strings.Join(mig.Names(), ", "))
		return out
	}
	if err := mig.ParseProfile(s.MIG); err != nil {
		add("mig", "%v", err)
		return out
	}
	if s.GPUMemory != 0 {
		add("gpu_memory", "leave gpu_memory out with mig: the profile %s fixes the memory", s.MIG)
	}
	var share resource.MilliGPU
	var first fleet.ModelID
	for i, m := range s.Flavors {
		f := fmt.Sprintf("flavors[%d]", i)
		g, ok := mig.For(string(m))
		switch {
		case !ok:
			add(f, "%s has no MIG (MIG models: %s)", m, strings.Join(mig.Models(), ", "))
		case g.Index(s.MIG) < 0:
			var names []string
			for _, p := range g.Profiles {
				names = append(names, p.Name)
			}
			add(f, "%s has no MIG profile %s (its profiles: %s)", m, s.MIG, strings.Join(names, ", "))
		case share == 0:
			share, first = s.MIGShare(m), m
		case s.MIGShare(m) != share:
			add(f, "MIG profile %s is %v GPU on %s but %v on %s: list flavors where it is the same share", s.MIG, share, first, s.MIGShare(m), m)
		}
	}
	if share > 0 && s.GPUs != share {
		add("gpus", "with mig a replica gets one %s instance, %v GPU on %s: leave gpus out", s.MIG, share, first)
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
	// MIG is the replica's MIG instance on GPUs[0], nil for a replica
	// on whole GPUs or a share of one.
	MIG *MIGInstance `yaml:"mig"`
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

// MIGInstance is one GPU instance of a MIG-mode GPU: its profile and its
// first memory slice (mig.GPU's Starts), which name it on the GPU.
type MIGInstance struct {
	Profile string `yaml:"profile" json:"profile"`
	Start   int    `yaml:"start" json:"start"`
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
