package sched

import (
	"encoding/json"
	"fmt"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Plan is what one scheduling cycle decided. Lists are in decision order,
// which is deterministic for a given Input.
//
// An applier must evict the Preemptions before starting the Placements that
// follow them (a placement with AfterPreemption waits for its victims to
// exit, after their grace period).
type Plan struct {
	Placements  []Placement  `json:"placements"`
	Preemptions []Preemption `json:"preemptions"`
	Pending     []Pending    `json:"pending"`
	Overflow    []Overflow   `json:"overflow"`
	// Resizes change running elastic workloads' sizes (growth into idle
	// capacity, shrinks that give growth back); at most one per workload,
	// and none for a workload the plan preempts. An applier removes a
	// shrink's replicas before starting the placements that follow with
	// AfterPreemption, as it does for Preemptions.
	Resizes []Resize `json:"resizes,omitempty"`
	// Capped lists the running elastic workloads below their max that did
	// not grow, with why (workload why shows it).
	Capped []Capped `json:"capped,omitempty"`
	// Classes is set when the plan places and evicts nothing: one pending
	// decision per class of alike workloads (see Alike), ordered by the
	// example's name. The state is then settled: a cycle over the same
	// state (same fleet, tenants, reservations and their activity, running
	// work) with the same pending work plus workloads Alike to an example
	// places nothing either, leaves every old workload pending as before,
	// and leaves each new one pending with its class's decision. A caller
	// may so answer such a cycle without running it (the server does, while
	// submissions pour into a full fleet). Empty when a scorer draws random
	// numbers.
	Classes []Class `json:"-"`
	// History is the decayed usage as of Input.Now, for the next cycle's
	// Input.History; nil unless Options.FairShare is on.
	History *tenancy.History `json:"fair_share_history,omitempty"`

	// shielded is set when the cycle was decided again with shielded
	// victims (see Schedule); tests read it.
	shielded bool
}

// Class is a pending decision and the workload it was made for.
type Class struct {
	Example *workload.Workload
	Pending Pending
}

// Placement puts one replica of a workload on a node.
type Placement struct {
	Workload workload.ID   `json:"workload"`
	Replica  int           `json:"replica"`
	Node     fleet.NodeID  `json:"node"`
	GPUs     []int         `json:"gpus"`
	Milli    int64         `json:"milli"` // per GPU
	Flavor   fleet.ModelID `json:"flavor"`
	Region   string        `json:"region"`
	// OnReservation is set when the replica uses its own reservation.
	OnReservation bool `json:"on_reservation,omitempty"`
	// AfterPreemption is set when victims must exit first.
	AfterPreemption bool `json:"after_preemption,omitempty"`
	// Within is set when the workload fits in its tenant's guarantee.
	Within bool `json:"within,omitempty"`
	// MIG is the replica's MIG instance on GPUs[0] (a workload with a
	// MIG profile), zero otherwise. It is packed into the padding after
	// the flags: a plan holds one Placement per replica placed.
	MIG PlacedMIG `json:"mig,omitzero"`
}

// PlacedMIG is a placement's MIG instance, packed in two bytes: its
// profile (mig.NameIndex, plus one; 0: none) and its first memory slice.
// Its JSON is workload.MIGInstance's, {"profile": ..., "start": ...}.
type PlacedMIG struct {
	name, start uint8
}

// placedMIG packs an instance of profile at start.
func placedMIG(profile string, start int) PlacedMIG {
	return PlacedMIG{name: uint8(mig.NameIndex(profile) + 1), start: uint8(start)}
}

// IsZero reports whether there is no instance.
func (m PlacedMIG) IsZero() bool { return m.name == 0 }

// Instance is the instance, nil when there is none.
func (m PlacedMIG) Instance() *workload.MIGInstance {
	if m.name == 0 {
		return nil
	}
	return &workload.MIGInstance{Profile: mig.NameAt(int(m.name) - 1), Start: int(m.start)}
}

// MarshalJSON writes the instance as workload.MIGInstance.
func (m PlacedMIG) MarshalJSON() ([]byte, error) { return json.Marshal(m.Instance()) }

// UnmarshalJSON reads a workload.MIGInstance (null: none).
func (m *PlacedMIG) UnmarshalJSON(b []byte) error {
	var in *workload.MIGInstance
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*m = PlacedMIG{}
	if in == nil {
		return nil
	}
	if mig.NameIndex(in.Profile) < 0 || in.Start < 0 || in.Start >= mig.Slots {
		return fmt.Errorf("sched: unknown MIG instance %s at %d", in.Profile, in.Start)
	}
	*m = placedMIG(in.Profile, in.Start)
	return nil
}

// Preemption evicts a running workload (all its replicas).
type Preemption struct {
	Workload workload.ID `json:"workload"`
	By       workload.ID `json:"by"` // the claimant; empty for a failed node
	Reason   string      `json:"reason"`
	// Notice is true for spot work, which gets a 30 s notice.
	Notice      bool    `json:"notice,omitempty"`
	GracePeriod float64 `json:"grace_period_s"`
	WorkLost    float64 `json:"work_lost_gpu_s"`
}

// Resize changes a running elastic workload's replica count (see
// workload.Elastic). A shrink (To < From) removes its highest replicas,
// To..From-1; a growth (To > From) adds replicas From..To-1, placed at Add
// (Replica From, From+1, ...). Sizes move in whole steps.
type Resize struct {
	Workload workload.ID `json:"workload"`
	From     int         `json:"from"`
	To       int         `json:"to"`
	// By is the claimant a shrink makes room for; empty for growth, a
	// failed node or a quota limit.
	By     workload.ID `json:"by,omitempty"`
	Reason string      `json:"reason"`
	Add    []Placement `json:"add,omitempty"`
}

// Shrink reports whether the resize removes replicas.
func (r Resize) Shrink() bool { return r.To < r.From }

// Capped is a running elastic workload below its max replicas that this
// cycle did not grow, and why not.
type Capped struct {
	Workload workload.ID `json:"workload"`
	Replicas int         `json:"replicas"`
	Min      int         `json:"min"`
	Max      int         `json:"max"`
	Reason   string      `json:"reason"`
}

// Pending is a workload left waiting, with why.
type Pending struct {
	Workload workload.ID `json:"workload"`
	Reason   string      `json:"reason"`
	// Code classifies the first (most preferred) option's blocker.
	Code ReasonCode `json:"code"`
	// Details has one reason per acceptable flavor and region tried.
	Details []string `json:"details,omitempty"`
	// Blockers are the structured reasons, one per acceptable flavor and
	// region tried (one for an invalid workload); Reason and Details are
	// their rendering (see Render). Alike pending workloads share them:
	// read only.
	Blockers []Blocker `json:"blockers,omitempty"`
	// Planned is the workload's planned start (Options.Planning), nil
	// when it has none.
	Planned *PlannedStart `json:"planned,omitempty"`
}

// Overflow records a workload placed away from its first choice.
type Overflow struct {
	Workload workload.ID `json:"workload"`
	From     string      `json:"from"`
	To       string      `json:"to"`
}

// ReasonCode classifies why a workload is pending.
type ReasonCode string

// Reason codes, from the most to the least actionable.
const (
	ReasonQuotaLimit      ReasonCode = "QuotaLimit"      // a tenant in the path is at its limit
	ReasonLendingLimit    ReasonCode = "LendingLimit"    // borrowing would use others' protected guarantee
	ReasonReservationFull ReasonCode = "ReservationFull" // the named reservation is used up
	ReasonNoCapacity      ReasonCode = "NoCapacity"      // no node has room, preemption could not help
	ReasonNoBlock         ReasonCode = "NoBlock"         // no block can hold the gang
	ReasonNoFlavor        ReasonCode = "NoFlavor"        // the fleet has none of the acceptable flavors/regions
	ReasonSpotPrice       ReasonCode = "SpotPrice"       // the spot price is above the workload's max price
	ReasonInvalid         ReasonCode = "Invalid"         // the spec can never run here
	ReasonDeferred        ReasonCode = "Deferred"        // not decided this cycle: its tenant has more pending than Options.TenantBound
	// ReasonPolicyHeld is not the core's: callers that hold work back
	// before scheduling (the server's policy caps on a class) report it.
	ReasonPolicyHeld ReasonCode = "PolicyHeld"
)

func gpuString(m resource.MilliGPU) string { return m.String() }
