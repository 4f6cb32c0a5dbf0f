package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Error codes, one per kind of failure; the HTTP status follows the code.
const (
	CodeInvalid         = "InvalidArgument"      // 400
	CodeUnauthenticated = "Unauthenticated"      // 401
	CodeForbidden       = "Forbidden"            // 403
	CodeNotFound        = "NotFound"             // 404
	CodeMethod          = "MethodNotAllowed"     // 405
	CodeConflict        = "Conflict"             // 409: exists, or changed meanwhile
	CodeCapacity        = "InsufficientCapacity" // 409: a reservation cannot be met
	CodeQuotaExceeded   = "QuotaExceeded"        // 409: a reservation would exceed a quota limit
	CodeLimitExceeded   = "LimitExceeded"        // 409: a count limit (Field: limits.NAME)
	CodeGone            = "Gone"                 // 410: events pruned
	CodeTooLarge        = "PayloadTooLarge"      // 413
	CodeMediaType       = "UnsupportedMediaType" // 415
	CodeRateLimited     = "TooManyRequests"      // 429
	CodeInternal        = "Internal"             // 500
	CodeUnavailable     = "Unavailable"          // 503
	CodeNotLeader       = "NotLeader"            // 307: a follower sends the request to the leader
	CodeNoLeader        = "NoLeader"             // 503: no replica leads yet
)

// LeaderHeader names the leader's URL on a follower's answers.
const LeaderHeader = "X-Arbiter-Leader"

// ClusterInfo is GET /v1/cluster: the replicas sharing the store and the
// one that leads. A server without a cluster (one process on bbolt)
// answers one replica, the leader, with empty URLs.
type ClusterInfo struct {
	// Self is the URL of the replica that answered.
	Self string `json:"self"`
	// Leader is the leader's URL ("" while none is known).
	Leader   string           `json:"leader"`
	Replicas []ClusterReplica `json:"replicas"`
}

// ClusterReplica is one arbiter serve process of a cluster.
type ClusterReplica struct {
	URL    string `json:"url"`
	Leader bool   `json:"leader"`
}

// Error is the body of every error answer.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Status is the HTTP status (set by the client, not sent).
	Status int `json:"-"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// GPUs is a GPU amount on the wire: a JSON number (8, 0.5) or a string
// ("8", "0.5", "500m"). It is sent as a number.
type GPUs resource.MilliGPU

// MarshalJSON writes the amount as a number of GPUs.
func (g GPUs) MarshalJSON() ([]byte, error) {
	return []byte(resource.MilliGPU(g).String()), nil
}

// MaxGPUs bounds every GPU amount on the wire (10 million GPUs).
const MaxGPUs = GPUs(10_000_000 * resource.PerGPU)

// UnmarshalJSON accepts a number or a string, strictly: digits with an
// optional fraction ("8", "0.5") or milli-GPU ("500m"); no sign, spaces,
// exponent or hex. Its errors are *json.UnmarshalTypeError, so that the
// decoder names the field.
func (g *GPUs) UnmarshalJSON(b []byte) error {
	s := string(b)
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	if !gpuSyntax(s) {
		return valueError[GPUs](fmt.Sprintf("invalid GPU amount %q: write whole GPUs (8), a fraction (0.5) or milli-GPU (500m)", s))
	}
	if err := g.UnmarshalYAMLScalar(s); err != nil {
		return valueError[GPUs](err.Error())
	}
	if *g > MaxGPUs {
		return valueError[GPUs](fmt.Sprintf("GPU amount %s is more than %v", s, MaxGPUs))
	}
	return nil
}

// gpuSyntax accepts digits with an optional fraction, or digits and "m".
func gpuSyntax(s string) bool {
	digits := func(t string) bool {
		if t == "" || len(t) > 18 {
			return false
		}
		for _, c := range t {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	if m, ok := strings.CutSuffix(s, "m"); ok {
		return digits(m)
	}
	whole, frac, ok := strings.Cut(s, ".")
	return digits(whole) && (!ok || digits(frac))
}

// ValueError is the message of a wire value's own parser (GPU amounts,
// durations), carried as a *json.UnmarshalTypeError whose Value is the
// message, so that the JSON decoder adds the field path.
func valueError[T any](msg string) error {
	return &json.UnmarshalTypeError{Value: msg, Type: reflect.TypeFor[T]()}
}

// IsValueError reports whether a decoding error came from valueError
// (its Value is then the whole message).
func IsValueError(e *json.UnmarshalTypeError) bool {
	return e.Type == reflect.TypeFor[GPUs]() || e.Type == reflect.TypeFor[Duration]()
}

// UnmarshalYAMLScalar parses "8", "0.5" or "500m".
func (g *GPUs) UnmarshalYAMLScalar(s string) error {
	v, err := resource.ParseGPUs(s)
	if err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "resource: "))
	}
	*g = GPUs(v)
	return nil
}

// Duration is a duration on the wire: "90s", "5m", "400h", "7d".
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return valueError[Duration]("a duration is a string such as \"90s\", \"5m\" or \"2h\"")
	}
	if err := d.UnmarshalYAMLScalar(s); err != nil {
		return valueError[Duration](err.Error())
	}
	return nil
}

// UnmarshalYAMLScalar parses "90s", "5m", "2h" or "7d".
func (d *Duration) UnmarshalYAMLScalar(s string) error {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err == nil && n >= 0 && n < 1e5 {
			*d = Duration(time.Duration(n * 24 * float64(time.Hour)))
			return nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("invalid duration %q: write e.g. 90s, 5m, 2h or 7d", s)
	}
	*d = Duration(v)
	return nil
}

// WorkloadSpec is a workload as submitted. Omitted fields take defaults:
// kind batch, priority normal, replicas 1, topology any. The YAML form
// (`arbiter workload submit -f job.yaml`) uses the same names.
type WorkloadSpec struct {
	Name        string `json:"name" yaml:"name"`
	Tenant      string `json:"tenant,omitempty" yaml:"tenant"`
	Kind        string `json:"kind,omitempty" yaml:"kind"`
	Priority    string `json:"priority,omitempty" yaml:"priority"`
	Preemptible bool   `json:"preemptible,omitempty" yaml:"preemptible"`
	GPUs        GPUs   `json:"gpus" yaml:"gpus"`
	// Replicas is a number, or in the mapping form {min, max, step} the
	// bounds of an elastic workload (Elastic; Replicas is then its current
	// size, min until it runs).
	Replicas           int               `json:"replicas,omitempty" yaml:"replicas,or=Elastic"`
	Elastic            *ElasticSpec      `json:"-" yaml:"-"`
	CPUMilli           int64             `json:"cpu_milli,omitempty" yaml:"cpu_milli"`
	MemoryMiB          int64             `json:"memory_mib,omitempty" yaml:"memory_mib"`
	Flavors            []string          `json:"flavors" yaml:"flavors"`
	Regions            []string          `json:"regions" yaml:"regions"`
	Pools              []string          `json:"pools,omitempty" yaml:"pools"` // node pools ("pool" label) it may use; none: any
	Topology           string            `json:"topology,omitempty" yaml:"topology"`
	ExpectedRuntime    Duration          `json:"expected_runtime,omitempty" yaml:"expected_runtime"`
	CheckpointInterval Duration          `json:"checkpoint_interval,omitempty" yaml:"checkpoint_interval"`
	GracePeriod        Duration          `json:"grace_period,omitempty" yaml:"grace_period"`
	Reservation        string            `json:"reservation,omitempty" yaml:"reservation"`
	MaxPrice           float64           `json:"max_price,omitempty" yaml:"max_price"`
	Labels             map[string]string `json:"labels,omitempty" yaml:"labels"`
	// MIG is the MIG profile of each replica's one GPU instance
	// ("3g.40gb"); gpus is then left out (docs/workloads.md).
	MIG string `json:"mig,omitempty" yaml:"mig"`
	// GPUMemory is the memory each GPU must have ("20GiB").
	GPUMemory string `json:"gpu_memory,omitempty" yaml:"gpu_memory"`
	// Command is what the node agents run for each replica (optional).
	Command *Command `json:"command,omitempty" yaml:"command"`
}

// ElasticSpec is the mapping form of replicas: an elastic workload's
// bounds (see workload.Elastic).
type ElasticSpec struct {
	Min  int `json:"min" yaml:"min"`
	Max  int `json:"max" yaml:"max"`
	Step int `json:"step,omitempty" yaml:"step"`
}

// UnmarshalJSON reads replicas as a number or as {min, max, step}, and
// refuses unknown fields (as the server's decoder does).
func (s *WorkloadSpec) UnmarshalJSON(b []byte) error {
	type plain WorkloadSpec
	var aux struct {
		*plain
		Replicas json.RawMessage `json:"replicas,omitempty"`
		Current  int             `json:"current_replicas,omitempty"`
	}
	aux.plain = (*plain)(s)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return fieldError(err, "")
	}
	return s.setReplicas(aux.Replicas, aux.Current)
}

// fieldError names a type error's field as the request wrote it: without
// the decoding helper's embedded struct, under prefix.
func fieldError(err error, prefix string) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		c := *typ
		c.Field = prefix + strings.TrimPrefix(c.Field, "plain.")
		return &c
	}
	return err
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(r []byte) string {
	switch r[0] {
	case '"':
		return "string"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case '{':
		return "object"
	}
	return "number"
}

// setReplicas sets Replicas and Elastic from the replicas field as
// written (a number, or {min, max, step}) and current_replicas.
func (s *WorkloadSpec) setReplicas(raw json.RawMessage, current int) error {
	s.Replicas, s.Elastic = current, nil
	r := bytes.TrimSpace(raw)
	switch {
	case len(r) == 0 || string(r) == "null":
	case r[0] == '{':
		var e ElasticSpec
		d := json.NewDecoder(bytes.NewReader(r))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			if err = fieldError(err, "replicas."); errors.As(err, new(*json.UnmarshalTypeError)) {
				return err
			}
			return fmt.Errorf("replicas: want a number or {min, max, step}: %v", err)
		}
		s.Elastic = &e
	default:
		if current != 0 {
			return fmt.Errorf("current_replicas: only an elastic workload (replicas: {min, max}) has one")
		}
		if err := json.Unmarshal(r, &s.Replicas); err != nil {
			return &json.UnmarshalTypeError{Value: jsonKind(r), Type: reflect.TypeFor[int](), Field: "replicas"}
		}
	}
	return nil
}

// replicasOut is the replicas field as written (a number, or an elastic
// workload's bounds) and current_replicas (an elastic workload's size).
func (s *WorkloadSpec) replicasOut() (any, int) {
	if s.Elastic != nil {
		return s.Elastic, s.Replicas
	}
	if s.Replicas != 0 {
		return s.Replicas, 0
	}
	return nil, 0
}

// MarshalJSON writes replicas as a number, or for an elastic workload as
// {min, max, step} with its current size in current_replicas.
func (s WorkloadSpec) MarshalJSON() ([]byte, error) {
	type plain WorkloadSpec
	aux := struct {
		plain
		Replicas any `json:"replicas,omitempty"`
		Current  int `json:"current_replicas,omitempty"`
	}{plain: plain(s)}
	aux.Replicas, aux.Current = s.replicasOut()
	return json.Marshal(aux)
}

// Bounds of a workload's fields.
const (
	MaxCPUMilli  = 1_000_000               // 1000 cores per replica
	MaxMemoryMiB = 64 << 20                // 64 TiB per replica
	MaxRuntime   = Duration(8760e9 * 3600) // a year
)

// FieldError is one problem with a field.
type FieldError struct {
	Field string
	Msg   string
}

// ToWorkload converts and validates the spec (on its own, not against a
// fleet). It returns every problem.
func (s WorkloadSpec) ToWorkload() (workload.Spec, []FieldError) {
	var errs []FieldError
	add := func(f, format string, args ...any) {
		errs = append(errs, FieldError{f, fmt.Sprintf(format, args...)})
	}
	out := workload.Spec{
		Name: workload.ID(s.Name), Tenant: s.Tenant, Preemptible: s.Preemptible,
		GPUs: resource.MilliGPU(s.GPUs), Replicas: s.Replicas,
		CPU: resource.MilliCPU(s.CPUMilli), Memory: resource.MiB(s.MemoryMiB),
		Regions: s.Regions, Pools: s.Pools, ExpectedRuntime: time.Duration(s.ExpectedRuntime),
		CheckpointInterval: time.Duration(s.CheckpointInterval), GracePeriod: time.Duration(s.GracePeriod),
		Reservation: s.Reservation, MaxPrice: s.MaxPrice, Labels: s.Labels, MIG: s.MIG,
	}
	if s.GPUMemory != "" {
		if len(s.GPUMemory) > 32 {
			add("gpu_memory", "invalid GPU memory (longer than 32 characters): write e.g. 20GiB")
		} else if m, err := resource.ParseGPUMemory(s.GPUMemory); err != nil {
			add("gpu_memory", "%v", err)
		} else {
			out.GPUMemory = resource.GPUMemory(m)
		}
	}
	if e := s.Elastic; e != nil {
		// A submission starts at min whatever current size it names:
		// growth is the core's to give, as borrowing.
		out.Elastic, out.Replicas = &workload.Elastic{Min: e.Min, Max: e.Max, Step: e.Step}, 0
	}
	for _, f := range s.Flavors {
		out.Flavors = append(out.Flavors, fleet.ModelID(f))
	}
	out.Defaults(s.Priority != "") // after the flavors: a MIG share is read from them
	if s.Kind != "" {
		if err := out.Kind.UnmarshalYAMLScalar(s.Kind); err != nil {
			add("kind", "%v", err)
		}
	}
	if s.Priority != "" {
		p, err := workload.ParsePriority(s.Priority)
		if err != nil {
			add("priority", "%v", err)
		}
		out.Priority = p
	}
	if err := out.Topology.UnmarshalYAMLScalar(s.Topology); err != nil {
		add("topology", "%v", err)
	}
	if len(s.Name) > 128 {
		add("name", "name is longer than 128 characters")
	}
	listBound := func(field string, xs []string, n int) {
		if len(xs) > n {
			add(field, "at most %d %s, got %d", n, field, len(xs))
			return
		}
		for i, x := range xs {
			if x == "" || len(x) > 63 {
				add(fmt.Sprintf("%s[%d]", field, i), "names have 1-63 characters, got %d", len(x))
				return
			}
		}
	}
	listBound("flavors", s.Flavors, 32)
	listBound("regions", s.Regions, 32)
	listBound("pools", s.Pools, 32)
	if len(s.Labels) > 64 {
		add("labels", "at most 64 labels, got %d", len(s.Labels))
	}
	if len(s.Reservation) > 63 {
		add("reservation", "a reservation name has at most 63 characters")
	}
	switch {
	case s.CPUMilli < 0 || s.CPUMilli > MaxCPUMilli:
		add("cpu_milli", "cpu_milli must be between 0 and %d (%d cores), got %d", MaxCPUMilli, MaxCPUMilli/1000, s.CPUMilli)
	case s.MemoryMiB < 0 || s.MemoryMiB > MaxMemoryMiB:
		add("memory_mib", "memory_mib must be between 0 and %d (64 TiB), got %d", MaxMemoryMiB, s.MemoryMiB)
	}
	if math.IsNaN(s.MaxPrice) || math.IsInf(s.MaxPrice, 0) || s.MaxPrice < 0 || s.MaxPrice > 1e6 {
		add("max_price", "max_price must be a number between 0 and 1000000")
	}
	if s.ExpectedRuntime > MaxRuntime {
		add("expected_runtime", "expected_runtime is more than %v", time.Duration(MaxRuntime))
	}
	if s.CheckpointInterval > MaxRuntime {
		add("checkpoint_interval", "checkpoint_interval is more than %v", time.Duration(MaxRuntime))
	}
	for _, fe := range out.Validate() {
		switch fe.Field {
		case "tenant": // the server fills it from the token or path
		case "cpu_milli", "max_price": // checked above, each naming its own field
		default:
			add(fe.Field, "%s", fe.Msg)
		}
	}
	return out, errs
}

// SpecFrom converts an internal spec to its wire form.
func SpecFrom(s workload.Spec) WorkloadSpec {
	out := WorkloadSpec{
		Name: string(s.Name), Tenant: s.Tenant, Kind: s.Kind.String(), Priority: s.Priority.String(),
		Preemptible: s.Preemptible, GPUs: GPUs(s.GPUs), Replicas: s.Replicas,
		CPUMilli: int64(s.CPU), MemoryMiB: int64(s.Memory), Regions: s.Regions, Pools: s.Pools,
		Topology: s.Topology.String(), ExpectedRuntime: Duration(s.ExpectedRuntime),
		CheckpointInterval: Duration(s.CheckpointInterval), GracePeriod: Duration(s.GracePeriod),
		Reservation: s.Reservation, MaxPrice: s.MaxPrice, Labels: s.Labels, MIG: s.MIG,
	}
	if s.GPUMemory > 0 {
		out.GPUMemory = s.GPUMemory.String()
	}
	if e := s.Elastic; e != nil {
		out.Elastic = &ElasticSpec{Min: e.Min, Max: e.Max, Step: e.Step}
	}
	for _, f := range s.Flavors {
		out.Flavors = append(out.Flavors, string(f))
	}
	return out
}

// Replica is where one replica runs.
type Replica struct {
	Node  string `json:"node"`
	GPUs  []int  `json:"gpus"`
	Milli int64  `json:"milli"`
	// MIG is the replica's MIG instance on GPUs[0] (profile and first
	// memory slice), absent for whole GPUs and shares.
	MIG *workload.MIGInstance `json:"mig,omitempty"`
	// IdleGPUs are those of GPUs that its node's agent read under 5% busy
	// (NVML) for the last 5 minutes, as the server's last policy tick
	// counted them: GPUs allocated but not used (workload show only).
	IdleGPUs []int `json:"idle_gpus,omitempty"`
}

// Assignment is where a running workload sits.
type Assignment struct {
	Flavor        string    `json:"flavor"`
	Region        string    `json:"region"`
	OnReservation bool      `json:"on_reservation,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	Replicas      []Replica `json:"replicas"`
}

// Workload is a workload with its state.
type Workload struct {
	WorkloadSpec
	State          string      `json:"state"` // one of WorkloadStates (state.go)
	SubmittedAt    time.Time   `json:"submitted_at"`
	Running        *Assignment `json:"running,omitempty"`
	Preemptions    int         `json:"preemptions,omitempty"`
	LastPreemption string      `json:"last_preemption,omitempty"`
	Revision       int64       `json:"revision"`
	// EffectivePriority, EffectiveRegions and EffectivePools are what the
	// scheduler uses where a policy action in force changed the spec's
	// (empty where none did); Effects says which policy set each, and
	// since when.
	EffectivePriority string   `json:"effective_priority,omitempty"`
	EffectiveRegions  []string `json:"effective_regions,omitempty"`
	EffectivePools    []string `json:"effective_pools,omitempty"`
	Effects           []Effect `json:"effects,omitempty"`
	// EndedAt, EndNodes, ExitCodes and EndReason are set on a workload
	// that ended (Succeeded, Failed, Cancelled): when, the nodes its last
	// run ran on (replica by replica), the exit codes its replicas'
	// agents reported for that run, and why it ended.
	EndedAt   time.Time     `json:"ended_at,omitzero"`
	EndNodes  []string      `json:"end_nodes,omitempty"`
	ExitCodes []ReplicaExit `json:"exit_codes,omitempty"`
	EndReason string        `json:"end_reason,omitempty"`
}

// MarshalJSON writes the workload with its spec's replicas as
// WorkloadSpec.MarshalJSON does (the spec's methods would otherwise
// stand for the whole workload, being promoted).
func (w Workload) MarshalJSON() ([]byte, error) {
	type plain Workload
	aux := struct {
		plain
		// Fields that shadow the spec's promoted methods, so that the
		// encoder reads this struct's fields.
		MarshalJSON   struct{} `json:"-"`
		UnmarshalJSON struct{} `json:"-"`
		Replicas      any      `json:"replicas,omitempty"`
		Current       int      `json:"current_replicas,omitempty"`
	}{plain: plain(w)}
	aux.Replicas, aux.Current = w.replicasOut()
	return json.Marshal(aux)
}

// UnmarshalJSON reads what MarshalJSON writes (unknown fields are
// ignored: this is an answer, not a request).
func (w *Workload) UnmarshalJSON(b []byte) error {
	type plain Workload
	var aux struct {
		*plain
		MarshalJSON   struct{}        `json:"-"`
		UnmarshalJSON struct{}        `json:"-"`
		Replicas      json.RawMessage `json:"replicas,omitempty"`
		Current       int             `json:"current_replicas,omitempty"`
	}
	aux.plain = (*plain)(w)
	if err := json.Unmarshal(b, &aux); err != nil {
		return fieldError(err, "")
	}
	return w.setReplicas(aux.Replicas, aux.Current)
}

// ReplicaExit is the exit code an agent reported for a replica.
type ReplicaExit struct {
	Replica int `json:"replica"`
	Code    int `json:"code"`
}

// Effect kinds: what of a workload a policy action in force changes.
const (
	EffectPriority    = "priority"     // set_priority, reallocate: the priority class
	EffectRegions     = "regions"      // migrate to a region: the regions it may run in
	EffectPools       = "pools"        // migrate to a pool: the pools it may run in
	EffectCap         = "cap"          // scale_down, set_limit on its class, service or labels
	EffectTenantLimit = "tenant_limit" // scale_down, set_limit on its tenant
	EffectDrain       = "drain"        // drain of a pool or region it runs in
	EffectSpotPrice   = "spot_price"   // set_spot_price where it may run (spot work)
)

// Effect is one policy action in force on a workload: which of its
// values it sets (Kind, one of the Effect constants) to what, by which
// policy and rule, since when.
type Effect struct {
	Kind   string    `json:"kind"`
	Value  string    `json:"value"`
	Policy string    `json:"policy"`
	Rule   string    `json:"rule"`
	Since  time.Time `json:"since"`
	// Held is set on a cap that holds the workload back (it is pending
	// with code PolicyHeld) or evicts it.
	Held bool `json:"held,omitempty"`
}

// String says it in a line: "priority high, set by ops (rule busy)
// since 10:42" (the time in UTC; the day too when it is not today's).
func (e Effect) String() string { return e.Format(time.Now(), time.UTC) }

// Format is String with a given now and time zone.
func (e Effect) Format(now time.Time, loc *time.Location) string {
	since := e.Since.In(loc)
	layout := "15:04"
	if y, m, d := since.Date(); y != now.In(loc).Year() || m != now.In(loc).Month() || d != now.In(loc).Day() {
		layout = "2006-01-02 15:04"
	}
	if loc == time.UTC {
		layout += " UTC"
	}
	held := ""
	if e.Held {
		held = " (holding this workload)"
	}
	return fmt.Sprintf("%s %s%s, set by %s (rule %s) since %s", e.Kind, e.Value, held, e.Policy, e.Rule, since.Format(layout))
}

// Why is the scheduler's answer to "why is my workload not running?".
type Why struct {
	Workload string `json:"workload"`
	State    string `json:"state"`
	// Code is a sched.ReasonCode for pending workloads ("" otherwise).
	Code    string   `json:"code,omitempty"`
	Reason  string   `json:"reason"`
	Details []string `json:"details,omitempty"`
	// Blockers are the structured reasons Reason is rendered from, one
	// per flavor and region tried (sched.Blocker: code, flavor, region,
	// tenant, requested, used, reserved, limit, free, prices, ...), for
	// tools that should not parse the text.
	Blockers json.RawMessage `json:"blockers,omitempty"`
	// PlanRevision is the store revision the last cycle looked at.
	PlanRevision int64 `json:"plan_revision"`
	// Replicas, MinReplicas and MaxReplicas are a running elastic
	// workload's size and bounds, NotLarger why the last cycle did not
	// grow it (absent for fixed workloads).
	Replicas    int    `json:"replicas,omitempty"`
	MinReplicas int    `json:"min_replicas,omitempty"`
	MaxReplicas int    `json:"max_replicas,omitempty"`
	NotLarger   string `json:"not_larger,omitempty"`
	// Effects are the policy actions in force on the workload (see
	// Workload.Effects).
	Effects []Effect `json:"effects,omitempty"`
	// PlannedStart is when a pending workload that does not fit now is
	// planned to start, from the expected ends of running work (RFC 3339,
	// to the second; absent when it has no plan); the plan holds the
	// capacity for it.
	// PlannedBlock is the block a gang is planned in; PlannedFlavor,
	// PlannedRegion and PlannedNodes say where.
	PlannedStart  time.Time `json:"planned_start,omitzero"`
	PlannedBlock  string    `json:"planned_block,omitempty"`
	PlannedFlavor string    `json:"planned_flavor,omitempty"`
	PlannedRegion string    `json:"planned_region,omitempty"`
	PlannedNodes  int       `json:"planned_nodes,omitempty"`
	// PlannedAfter names the running workloads whose ends the planned
	// start waits for, the last to end first, out of PlannedAfterCount in
	// all: a tenant's token sees only its own tenant's names (the others
	// are counted), the admin all. PlannedEvicts counts the workloads the
	// start would evict.
	PlannedAfter      []string `json:"planned_after,omitempty"`
	PlannedAfterCount int      `json:"planned_after_count,omitempty"`
	PlannedEvicts     int      `json:"planned_evicts,omitempty"`
	// Starving is set when the workload, a gang, has waited Waited, longer
	// than its class's bound MaxWait: a block is drained for it.
	Starving bool     `json:"starving,omitempty"`
	Waited   Duration `json:"waited,omitempty"`
	MaxWait  Duration `json:"max_wait,omitempty"`
	// Overrun is how long a running workload has run past its expected
	// runtime (ExpectedRuntime: declared, or its class's default from the
	// server's planning); such work loses backfill protection.
	Overrun         Duration `json:"overrun,omitempty"`
	ExpectedRuntime Duration `json:"expected_runtime,omitempty"`
}

// Quota is a tenant's quota entry for one flavor, optionally one region.
type Quota struct {
	Flavor     string  `json:"flavor" yaml:"flavor"`
	Region     string  `json:"region,omitempty" yaml:"region"`
	Guaranteed GPUs    `json:"guaranteed,omitempty" yaml:"guaranteed"`
	Limit      *GPUs   `json:"limit,omitempty" yaml:"limit"`
	Lendable   *GPUs   `json:"lendable,omitempty" yaml:"lendable"`
	Weight     float64 `json:"weight,omitempty" yaml:"weight"`
	Priority   int     `json:"priority,omitempty" yaml:"priority"`
}

// Tenant is a node of the tenant tree. AllowedPriorities are the priority
// classes its workloads may ask for (names, e.g. ["high", "normal"]);
// left out on create it is every class but critical, and GET always
// shows the tenant's own list. An ancestor's explicit list caps its whole
// subtree: a tenant may use what its list and every ancestor's list allow.
type Tenant struct {
	Name              string   `json:"name"`
	Parent            string   `json:"parent,omitempty"`
	Quotas            []Quota  `json:"quotas,omitempty"`
	AllowedPriorities []string `json:"allowed_priorities,omitempty"`
	Revision          int64    `json:"revision,omitempty"`
	// FairShare is set by `GET /v1/tenants/{tenant}` when the server runs
	// with fair share over time (options.fair_share).
	FairShare *FairShare `json:"fair_share,omitempty"`
}

// FairShare is a tenant's place in fair sharing over time.
type FairShare struct {
	HalfLife string           `json:"half_life"` // e.g. "168h"
	AsOf     time.Time        `json:"as_of"`     // when the decayed usage was last advanced
	Entries  []FairShareEntry `json:"entries"`
}

// FairShareEntry is one quota entry's fair-share state (see
// tenancy.FairShare for the definitions).
type FairShareEntry struct {
	Flavor string `json:"flavor"`
	Region string `json:"region,omitempty"`
	// Share is guarantee × weight over the siblings' sum for the same key.
	Share float64 `json:"share"`
	// DecayedGPUHours is the decayed usage.
	DecayedGPUHours float64 `json:"decayed_gpu_hours"`
	// Usage is the decayed usage over the siblings' sum.
	Usage float64 `json:"usage"`
	// Factor is 2^(-usage/share): 1 unused, 0.5 at its share.
	Factor float64 `json:"factor"`
}

// AllowedPriorities replaces a tenant's allowed priority classes.
type AllowedPriorities struct {
	AllowedPriorities []string `json:"allowed_priorities"`
}

// QuotaList replaces a tenant's quotas.
type QuotaList struct {
	Quotas []Quota `json:"quotas"`
}

// TokenRequest asks for a new token of the tenant or node in the path.
// ExpiresIn or ExpiresAt (at most one) bound its life; none: no expiry.
type TokenRequest struct {
	Name      string    `json:"name"`
	ExpiresIn Duration  `json:"expires_in,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// TokenCreate asks for a new token (POST /v1/tokens): Role is admin,
// tenant (Tenant required), node (Node required) or metrics (may only
// scrape /metrics).
type TokenCreate struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Tenant    string    `json:"tenant,omitempty"`
	Node      string    `json:"node,omitempty"`
	ExpiresIn Duration  `json:"expires_in,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// Token describes a token. Secret is only ever returned at creation and
// rotation; only its hash is stored.
type Token struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Role       string    `json:"role"`
	Tenant     string    `json:"tenant,omitempty"`
	Node       string    `json:"node,omitempty"`
	CreatedAt  time.Time `json:"created_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
	Secret     string    `json:"secret,omitempty"`
}

// WhoAmI says who a token is.
type WhoAmI struct {
	Admin bool `json:"admin"`
	// Role is admin, tenant, node or metrics; TokenID the token's ID.
	Role    string `json:"role,omitempty"`
	TokenID string `json:"token_id,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	Node    string `json:"node,omitempty"`
}

// Region is a region of the fleet.
type Region struct {
	Name  string   `json:"name"`
	Zones []string `json:"zones"`
	Nodes int      `json:"nodes"`
	GPUs  int      `json:"gpus"`
}

// SKU is a machine size of the catalog.
type SKU struct {
	Name        string `json:"name"`
	Model       string `json:"model"`
	GPUs        int    `json:"gpus"`
	VCPUs       int    `json:"vcpus"`
	MemoryGiB   int    `json:"memory_gib"`
	QuotaFamily string `json:"quota_family"`
}

// Node is a registered machine with its allocation.
type Node struct {
	ID          string `json:"id"`
	Region      string `json:"region"`
	Zone        string `json:"zone,omitempty"`
	Block       string `json:"block"`
	SKU         string `json:"sku"`
	Model       string `json:"model"`
	GPUs        int    `json:"gpus"`
	Allocated   GPUs   `json:"allocated_gpus"`
	Reservation string `json:"reservation,omitempty"`
	Down        bool   `json:"down,omitempty"`
	// Drained: taken out of service by an operator (PATCH drained).
	Drained bool `json:"drained,omitempty"`
	// Cordoned: closed to new work by an operator (PATCH cordoned); the
	// work running there stays.
	Cordoned bool              `json:"cordoned,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// State is one of NodeStates: ready, cordoned (no new work, running
	// work stays), drained (out of service: work evicted, none taken),
	// lost (its agent stopped heartbeating), down (registered down).
	State string `json:"state,omitempty"`
}

// NodeStates are the values of Node.State, as /metrics' arbiter_nodes
// state label counts them.
var NodeStates = []string{"ready", "cordoned", "drained", "lost", "down"}

// NodeUpdate changes a node (admin): drain or undrain it, cordon or
// uncordon it, replace its labels. Absent fields stay as they are.
type NodeUpdate struct {
	Drained  *bool              `json:"drained,omitempty"`
	Cordoned *bool              `json:"cordoned,omitempty"`
	Labels   *map[string]string `json:"labels,omitempty"`
}

// NodeRegistration registers a machine (the agent API; admin here).
type NodeRegistration struct {
	ID     string            `json:"id"`
	Region string            `json:"region"`
	Zone   string            `json:"zone,omitempty"`
	Block  string            `json:"block"`
	SKU    string            `json:"sku"`
	Labels map[string]string `json:"labels,omitempty"`
	Down   bool              `json:"down,omitempty"`
}

// ReservationRequest creates a capacity reservation.
type ReservationRequest struct {
	Name     string    `json:"name"`
	Tenant   string    `json:"tenant,omitempty"`
	Region   string    `json:"region"`
	Zone     string    `json:"zone,omitempty"`
	SKU      string    `json:"sku"`
	Capacity int       `json:"capacity"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
}

// Resize changes a reservation's capacity.
type Resize struct {
	Capacity int `json:"capacity"`
}

// Reservation is a capacity reservation with its utilization.
type Reservation struct {
	Name     string    `json:"name"`
	Tenant   string    `json:"tenant"`
	Region   string    `json:"region"`
	Zone     string    `json:"zone,omitempty"`
	SKU      string    `json:"sku"`
	Capacity int       `json:"capacity"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	// State is Scheduled (before Start: no machines until the window is
	// near, then machines lent only to work that will be gone by Start),
	// Active (in the window) or Expired (after End).
	State string   `json:"state"`
	Nodes []string `json:"nodes"`
	// ReservedGPUs is capacity × GPUs per machine; AllocatedGPUs what the
	// owner's workloads use of it; BorrowedGPUs what preemptible work of
	// others runs on it while idle (evicted when the owner claims it).
	ReservedGPUs  GPUs  `json:"reserved_gpus"`
	AllocatedGPUs GPUs  `json:"allocated_gpus"`
	BorrowedGPUs  GPUs  `json:"borrowed_gpus"`
	Revision      int64 `json:"revision"`
}

// Usage is one quota family of a tenant in a region: its current value
// and limit, in GPUs. Limit is nil when unlimited. CurrentValue is what
// counts against the limit: running work outside reservations plus
// Reserved, the capacity of the active reservations charged to the entry
// (the tenant's and its descendants'), whether or not work runs on them.
type Usage struct {
	Name         string   `json:"name"`
	Tenant       string   `json:"tenant"`
	Region       string   `json:"region"`
	Flavor       string   `json:"flavor"`
	CurrentValue float64  `json:"currentValue"`
	Reserved     float64  `json:"reserved"`
	Limit        *float64 `json:"limit"`
	Guaranteed   float64  `json:"guaranteed"`
	Unit         string   `json:"unit"`
	// Parent is the tenant's parent: a parent's entries count its whole
	// subtree (a guarantee there is for the subtree).
	Parent string `json:"parent,omitempty"`
	// Borrowed is the running work charged here beyond the guarantee;
	// Idle the guarantee no running work here uses (others may borrow
	// it, up to what the entry lends).
	Borrowed float64 `json:"borrowed"`
	Idle     float64 `json:"idle"`
	// Lent is the part of Idle that others' work occupies: what no free
	// GPU open to the tenant could serve if the subtree claimed all of
	// its guarantee now (the rest would be reclaimed).
	Lent float64 `json:"lent"`
}

// PolicyApply applies a policy file (its YAML text).
type PolicyApply struct {
	Name   string `json:"name"`
	File   string `json:"file,omitempty"`
	Source string `json:"source"`
}

// Policy is an applied policy.
type Policy struct {
	Name      string    `json:"name"`
	File      string    `json:"file"`
	Format    string    `json:"format"`
	Rules     []string  `json:"rules"`
	AppliedAt time.Time `json:"applied_at"`
	Revision  int64     `json:"revision"`
}

// Firing is one state change of a policy rule.
type Firing struct {
	Seq    int64     `json:"seq"`
	Policy string    `json:"policy"`
	Rule   string    `json:"rule"`
	Event  string    `json:"event"`
	Time   time.Time `json:"time"`
	DryRun bool      `json:"dry_run,omitempty"`
	Text   string    `json:"text"`
}

// Event is one change of the state.
type Event struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Object  string    `json:"object"`
	Tenant  string    `json:"tenant,omitempty"`
	Message string    `json:"message,omitempty"`
}

// Events is a page of the event stream; pass Next as ?after= to continue.
type Events struct {
	Items []Event `json:"items"`
	Next  int64   `json:"next"`
}

// List is the envelope of every list answer: one page. Continue, when
// set, is the opaque token of the next page (pass it as ?continue=).
type List[T any] struct {
	Items    []T    `json:"items"`
	Continue string `json:"continue,omitempty"`
}
