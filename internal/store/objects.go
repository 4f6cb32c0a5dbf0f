package store

import (
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Tenant is a node of the tenant tree with its quota entries.
type Tenant struct {
	Meta   Meta    `json:"meta"`
	Name   string  `json:"name"`
	Parent string  `json:"parent,omitempty"`
	Quotas []Quota `json:"quotas,omitempty"`
	// AllowedPriorities are the priority classes the tenant may submit;
	// nil: the default (see tenancy.AllowedSet).
	AllowedPriorities []workload.Priority `json:"allowed_priorities,omitempty"`
}

// Quota is one flavor entry of a tenant (see tenancy.QuotaSpec).
type Quota struct {
	Flavor     fleet.ModelID      `json:"flavor"`
	Region     string             `json:"region,omitempty"`
	Guaranteed resource.MilliGPU  `json:"guaranteed"`
	Limit      *resource.MilliGPU `json:"limit,omitempty"`
	Lendable   *resource.MilliGPU `json:"lendable,omitempty"`
	Weight     float64            `json:"weight,omitempty"`
	Priority   int                `json:"priority,omitempty"`
}

func (o *Tenant) Kind() Kind  { return KindTenant }
func (o *Tenant) Key() string { return o.Name }
func (o *Tenant) meta() *Meta { return &o.Meta }

// Node is one registered machine.
type Node struct {
	Meta   Meta              `json:"meta"`
	ID     fleet.NodeID      `json:"id"`
	Seq    int64             `json:"seq"` // registration order; the fleet follows it
	Region string            `json:"region"`
	Zone   string            `json:"zone,omitempty"`
	Block  fleet.BlockID     `json:"block"`
	SKU    fleet.SKUName     `json:"sku"`
	Labels map[string]string `json:"labels,omitempty"`
	// Down nodes are unavailable; the scheduler evicts their work.
	Down bool `json:"down,omitempty"`
	// Lost is set when the node went down because its agent stopped
	// heartbeating; the agent's return brings it back up.
	Lost bool `json:"lost,omitempty"`
	// Drained is set by an operator: the node is out of service (its work
	// is evicted, it takes none) until undrained, whatever its agent does.
	Drained bool `json:"drained,omitempty"`
	// Cordoned is set by an operator: the node takes no new work, but the
	// work running there stays, until uncordoned.
	Cordoned bool `json:"cordoned,omitempty"`
}

func (o *Node) Kind() Kind  { return KindNode }
func (o *Node) Key() string { return string(o.ID) }
func (o *Node) meta() *Meta { return &o.Meta }

// Reservation is a capacity reservation owned by a tenant, bound to nodes.
type Reservation struct {
	Meta   Meta           `json:"meta"`
	Tenant string         `json:"tenant"`
	Name   string         `json:"name"`
	Region string         `json:"region"`
	Zone   string         `json:"zone,omitempty"`
	SKU    fleet.SKUName  `json:"sku"`
	Count  int            `json:"count"`
	Start  time.Time      `json:"start,omitzero"`
	End    time.Time      `json:"end,omitzero"`
	Nodes  []fleet.NodeID `json:"nodes"`
}

func (o *Reservation) Kind() Kind  { return KindReservation }
func (o *Reservation) Key() string { return ReservationKey(o.Tenant, o.Name) }
func (o *Reservation) meta() *Meta { return &o.Meta }

// ReservationKey is the key of a tenant's reservation.
func ReservationKey(tenant, name string) string { return scoped(tenant, name) }

// Partition is a set of machines only one tenant's subtree may use (see
// tenancy.Partition): its blocks (every node registered in them, now or
// later) and its nodes.
type Partition struct {
	Meta   Meta            `json:"meta"`
	Name   string          `json:"name"`
	Tenant string          `json:"tenant"`
	Blocks []fleet.BlockID `json:"blocks,omitempty"`
	Nodes  []fleet.NodeID  `json:"nodes,omitempty"`
}

func (o *Partition) Kind() Kind  { return KindPartition }
func (o *Partition) Key() string { return o.Name }
func (o *Partition) meta() *Meta { return &o.Meta }

// State is where a workload is in its life.
type State string

// Workload states.
const (
	StatePending   State = "Pending"
	StateRunning   State = "Running"
	StateCancelled State = "Cancelled"
	// Succeeded and Failed: the command of every replica exited (all with
	// 0), or one exited with another code. Only agent-run workloads end so.
	StateSucceeded State = "Succeeded"
	StateFailed    State = "Failed"
)

// Command is what node agents run for each replica of a workload.
type Command struct {
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env,omitempty"`
	Dir  string            `json:"dir,omitempty"`
}

// Exit is one replica's exit in one run (the run started at StartedAt).
type Exit struct {
	Replica   int       `json:"replica"`
	Code      int       `json:"code"`
	StartedAt time.Time `json:"started_at"`
}

// End marks x ended in state st at now, for reason: it keeps the nodes
// of the run it leaves (Running is cleared) and the time.
func (x *Workload) End(st State, now time.Time, reason string) {
	if a := x.Running; a != nil {
		x.EndNodes = x.EndNodes[:0]
		for _, r := range a.Replicas {
			x.EndNodes = append(x.EndNodes, r.Node)
		}
	}
	x.State, x.Running, x.EndedAt, x.EndReason = st, nil, now, reason
}

// Live reports whether the scheduler sees the workload.
func (s State) Live() bool { return s == StatePending || s == StateRunning }

// Workload is a submitted workload and its state. Spec.Name is the
// tenant-local name; the scheduler sees the workload as Key().
type Workload struct {
	Meta        Meta                 `json:"meta"`
	Tenant      string               `json:"tenant"`
	Spec        workload.Spec        `json:"spec"`
	State       State                `json:"state"`
	SubmittedAt time.Time            `json:"submitted_at"`
	Running     *workload.Assignment `json:"running,omitempty"`
	Preemptions int                  `json:"preemptions,omitempty"`
	// LastPreemption says why the workload was last evicted.
	LastPreemption string    `json:"last_preemption,omitempty"`
	EndedAt        time.Time `json:"ended_at,omitzero"`
	// EndNodes are the nodes its last run ran on, replica by replica, and
	// EndReason says why it ended (set when it ends: succeeded, failed or
	// cancelled); the last run's exit codes stay in Exits.
	EndNodes  []fleet.NodeID `json:"end_nodes,omitempty"`
	EndReason string         `json:"end_reason,omitempty"`
	// Command is run by the node agents (nil: nothing to run).
	Command *Command `json:"command,omitempty"`
	// Exits are the replicas' exits of the current run, as agents report.
	Exits []Exit `json:"exits,omitempty"`
	// LastStop says how the agents last stopped it (SIGTERM or SIGKILL).
	LastStop string `json:"last_stop,omitempty"`
	// Started are the replica processes agents reported started and have
	// not yet reported gone (exited or stopped), of any run: those of
	// the current run tell it has started, those of earlier runs that an
	// agent still holds their GPUs, and which node may report on them.
	Started []Start `json:"started,omitempty"`
}

// Start is one replica process an agent reported started: which replica
// of which run (StartedAt), on which node and GPUs.
type Start struct {
	Replica   int          `json:"replica"`
	StartedAt time.Time    `json:"started_at"`
	Node      fleet.NodeID `json:"node"`
	GPUs      []int        `json:"gpus,omitempty"`
	// Gone: the agent reported it exited or stopped.
	Gone bool `json:"gone,omitempty"`
}

func (o *Workload) Kind() Kind  { return KindWorkload }
func (o *Workload) Key() string { return WorkloadKey(o.Tenant, string(o.Spec.Name)) }
func (o *Workload) meta() *Meta { return &o.Meta }

// WorkloadKey is the key of a tenant's workload, and its ID in plans.
func WorkloadKey(tenant, name string) string { return scoped(tenant, name) }

// Policy is an applied policy file.
type Policy struct {
	Meta      Meta      `json:"meta"`
	Name      string    `json:"name"`
	File      string    `json:"file"`
	Source    string    `json:"source"` // the YAML as applied
	AppliedAt time.Time `json:"applied_at"`
}

func (o *Policy) Kind() Kind  { return KindPolicy }
func (o *Policy) Key() string { return o.Name }
func (o *Policy) meta() *Meta { return &o.Meta }

// Firing is one entry of a policy's firing log, keyed by revision.
type Firing struct {
	Meta   Meta      `json:"meta"`
	Seq    int64     `json:"seq"`
	Policy string    `json:"policy"`
	Rule   string    `json:"rule"`
	Event  string    `json:"event"`
	Time   time.Time `json:"time"`
	DryRun bool      `json:"dry_run,omitempty"`
	Text   string    `json:"text"`
}

func (o *Firing) Kind() Kind  { return KindFiring }
func (o *Firing) Key() string { return RevKey(o.Seq) }
func (o *Firing) meta() *Meta { return &o.Meta }

// Token roles: what a token may do.
const (
	RoleAdmin   = "admin"   // everything
	RoleTenant  = "tenant"  // one tenant's objects
	RoleNode    = "node"    // one node's agent: register and heartbeat it
	RoleMetrics = "metrics" // scrape /metrics
)

// Token is an API bearer token, stored by the hex SHA-256 of its secret
// (the secret itself is never stored). ID is its public name: list,
// revoke and rotate address it, and it stays the same across rotations.
type Token struct {
	Meta Meta   `json:"meta"`
	Hash string `json:"hash"`
	ID   string `json:"id,omitempty"`
	// Role is admin, tenant, node or metrics; tokens written before roles
	// existed have none (see RoleOf).
	Role string `json:"role,omitempty"`
	// Tenant is the tenant a tenant token acts for.
	Tenant string `json:"tenant,omitempty"`
	// Node, for an agent's token, is the one node it may register and
	// heartbeat (and nothing else).
	Node      string    `json:"node,omitempty"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt, when set, is when the token stops working.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// LastUsedAt is when the token last authenticated a request, as last
	// flushed from memory (at most once a minute).
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

// RoleOf returns the token's role, deriving it for tokens stored before
// roles existed: a tenant or node token by its scope, else admin.
func (o *Token) RoleOf() string {
	switch {
	case o.Role != "":
		return o.Role
	case o.Tenant != "":
		return RoleTenant
	case o.Node != "":
		return RoleNode
	}
	return RoleAdmin
}

func (o *Token) Kind() Kind  { return KindToken }
func (o *Token) Key() string { return o.Hash }
func (o *Token) meta() *Meta { return &o.Meta }

// Event is one entry of the change log that clients watch, keyed by Seq.
type Event struct {
	Meta   Meta      `json:"meta"`
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Type   EventKind `json:"type"`   // e.g. EventWorkloadSubmitted, EventWorkloadPlaced
	Object string    `json:"object"` // kind/key
	// Tenant is the tenant the event concerns; "" for admin-only events.
	Tenant  string `json:"tenant,omitempty"`
	Message string `json:"message,omitempty"`
	// ObjectRevision is the object's revision after the change, when the
	// writer recorded it (0 otherwise).
	ObjectRevision int64 `json:"object_revision,omitempty"`
}

func (o *Event) Kind() Kind  { return KindEvent }
func (o *Event) Key() string { return RevKey(o.Seq) }
func (o *Event) meta() *Meta { return &o.Meta }

// Setting is a named JSON value of the server (the catalog overrides).
type Setting struct {
	Meta  Meta   `json:"meta"`
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

func (o *Setting) Kind() Kind  { return KindSetting }
func (o *Setting) Key() string { return o.Name }
func (o *Setting) meta() *Meta { return &o.Meta }

// AppendEvent writes an event with the next sequence number (the
// revision its write takes).
func AppendEvent(tx WriteTx, e *Event) error {
	e.Seq = tx.Revision() + 1
	return Put(tx, e, MustNotExist)
}

// AppendFiring writes a firing with the next sequence number.
func AppendFiring(tx WriteTx, f *Firing) error {
	f.Seq = tx.Revision() + 1
	return Put(tx, f, MustNotExist)
}
