package sched

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Blocker is why a workload could not be placed at one flavor and region,
// as values (in the manner of kube-scheduler's InsufficientResource): the
// resource, what was requested, what was free, the limit, and which tenant
// or block stopped it. The core decides with Blockers and never formats
// text; String renders one at the edge (Schedule renders every pending
// workload's unless Options.TerseReasons; the API and CLI show the text).
type Blocker struct {
	Code   ReasonCode    `json:"code"`
	Flavor fleet.ModelID `json:"flavor,omitempty"`
	Region string        `json:"region,omitempty"`
	// Problem says what is invalid (Code Invalid).
	Problem Problem `json:"problem,omitempty"`
	// Tenant is the tenant at its limit (QuotaLimit), the borrower
	// (LendingLimit) or the unknown tenant (Invalid).
	Tenant string `json:"tenant,omitempty"`
	// AllRegions is set when the limit at hand spans all regions.
	AllRegions bool `json:"all_regions,omitempty"`
	// MIG is the workload's MIG profile when the flavor has no such
	// profile (NoFlavor, NoMIGMode false), when no node of the flavor
	// and region is in MIG mode (NoFlavor, NoMIGMode), or when no MIG
	// slice fits (NoCapacity, NoBlock). ModelMemoryGiB is the flavor's
	// memory per GPU when it is less than the workload's GPUMemory
	// (NoFlavor). These and GPUMemory sit in the padding after the
	// flags: pending decisions keep thousands of Blockers.
	NoMIGMode      bool    `json:"no_mig_mode,omitempty"`
	MIG            MIGName `json:"mig,omitempty"`
	ModelMemoryGiB int32   `json:"model_memory_gib,omitempty"`
	// Requested is the GPUs the claim asks (QuotaLimit, NoCapacity,
	// NoBlock) or would borrow (LendingLimit).
	Requested resource.MilliGPU `json:"requested,omitempty"`
	// Used is the tenant's use counted against the limit, Reserved
	// included (QuotaLimit).
	Used     resource.MilliGPU `json:"used,omitempty"`
	Reserved resource.MilliGPU `json:"reserved,omitempty"`
	// Limit is the quota limit (QuotaLimit) or what is lendable
	// (LendingLimit).
	Limit resource.MilliGPU `json:"limit,omitempty"`
	// Free is the free capacity in reach (NoCapacity) or free before the
	// claim (LendingLimit); Protected is the idle guarantee of others.
	Free      resource.MilliGPU `json:"free,omitempty"`
	Protected resource.MilliGPU `json:"protected,omitempty"`
	// Replicas × PerReplica is the shape asked (NoCapacity, NoBlock).
	Replicas   int               `json:"replicas,omitempty"`
	PerReplica resource.MilliGPU `json:"per_replica,omitempty"`
	// Pools is the workload's pool constraint, if any.
	Pools []string `json:"pools,omitempty"`
	// Preempted is set when preemption was tried and could not free enough.
	Preempted bool `json:"preempted,omitempty"`
	// Firm: a policy set Price (work is admitted up to it, not below
	// spot.AdmitFraction of it).
	Firm bool `json:"firm,omitempty"`
	// GPUMemory is the workload's gpu_memory in MiB (NoFlavor).
	GPUMemory int32 `json:"gpu_memory_mib,omitempty"`
	// Price and MaxPrice are the spot price and the workload's bound
	// (SpotPrice), in $/GPU-hour.
	Price    float64 `json:"price,omitempty"`
	MaxPrice float64 `json:"max_price,omitempty"`
	// Waiting is how many of Tenant's pending workloads wait behind its
	// first Bound shapes (shapes of alike work: alike in all the core
	// reads), the most of one tenant's a cycle decides (Deferred). These
	// sit where Firm's padding was: pending decisions keep thousands of
	// Blockers.
	Waiting int32 `json:"waiting,omitempty"`
	Bound   int32 `json:"bound,omitempty"`
	// Reservation is the workload's own reservation when it could not
	// hold the claim (it is full, its nodes down, or no room in its pools).
	Reservation *ReservationUse `json:"reservation,omitempty"`
	// Held is the idle capacity of upcoming reservations (bound, before
	// their window) in the flavor and region that the workload may not use:
	// it is expected to run past the window's start and is not preemptible
	// within the honour window (NoCapacity). The reservation is not named:
	// it may be another tenant's.
	Held *UpcomingHold `json:"held,omitempty"`
	// Planned is the free capacity in reach held for planned starts
	// (Options.Planning) that the workload may not use: it is expected to
	// run past the earliest of them, Start, and the planned workload could
	// not evict it then (NoCapacity, NoBlock). The planned workloads are not
	// named: they may be other tenants'.
	Planned *PlanHold `json:"planned,omitempty"`
	// Hold is the policy cap holding the workload back (PolicyHeld);
	// Limit is then the cap, Used what the capped work already holds.
	Hold *PolicyHold `json:"hold,omitempty"`
}

// UpcomingHold is idle capacity held for reservation windows that open
// soon: Free GPUs, the earliest window opening at Start.
type UpcomingHold struct {
	Free  resource.MilliGPU `json:"free"`
	Start time.Time         `json:"start"`
}

// PlanHold is free capacity held for planned starts: Free GPUs, the
// earliest planned start at Start.
type PlanHold struct {
	Free  resource.MilliGPU `json:"free"`
	Start time.Time         `json:"start"`
}

// PolicyHold names the policy action whose cap holds a workload back: the
// action at Index in rule Rule of policy Policy, capping Target (a class,
// service or selector, as the policy names it).
type PolicyHold struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Index  int    `json:"index"`
	Target string `json:"target"`
}

// ReservationUse is a reservation's state as a Blocker reports it.
type ReservationUse struct {
	Name     string            `json:"name"`
	Used     resource.MilliGPU `json:"used"`
	Capacity resource.MilliGPU `json:"capacity"`
	// Down of the reservation's Nodes nodes are down.
	Down  int `json:"down,omitempty"`
	Nodes int `json:"nodes"`
}

// Problem says what makes a pending workload invalid.
type Problem string

// Problems of a workload the core can never place.
const (
	ProblemUnknownTenant Problem = "UnknownTenant" // its tenant is not in the tree
	ProblemNoGPUs        Problem = "NoGPUs"        // it asks for no GPUs
	ProblemNoCandidate   Problem = "NoCandidate"   // it accepts no flavor or region
)

// String renders the blocker as the text the API, the CLI and the
// scenario tests show.
func (b Blocker) String() string {
	msg := b.text()
	if r := b.Reservation; r != nil {
		pre := fmt.Sprintf("reservation %s full %v/%v", r.Name, r.Used, r.Capacity)
		if r.Down > 0 {
			pre += fmt.Sprintf(" (%d of its %d nodes down)", r.Down, r.Nodes)
		}
		if len(b.Pools) > 0 {
			pre += fmt.Sprintf(" or no room in pools %v", b.Pools)
		}
		msg = pre + "; " + msg
	}
	return msg
}

// text is the blocker's own text, without its reservation's.
func (b Blocker) text() string {
	switch b.Code {
	case ReasonDeferred:
		return fmt.Sprintf("not decided this cycle: a cycle decides tenant %q's pending work in order up to its first %d shapes of alike work (shapes_per_tenant); %d of its workloads wait behind them", b.Tenant, b.Bound, b.Waiting)
	case ReasonInvalid:
		switch b.Problem {
		case ProblemUnknownTenant:
			return fmt.Sprintf("unknown tenant %q", b.Tenant)
		case ProblemNoGPUs:
			return "asks for no GPUs"
		case ProblemNoCandidate:
			return "no acceptable flavor or region"
		}
	case ReasonNoFlavor:
		switch {
		case b.MIG != 0 && b.NoMIGMode:
			return fmt.Sprintf("no %s in %s is in MIG mode (node label mig: enabled) for MIG profile %s", b.Flavor, b.Region, b.MIG)
		case b.MIG != 0:
			return fmt.Sprintf("%s has no MIG profile %s", b.Flavor, b.MIG)
		case b.GPUMemory > 0 && b.ModelMemoryGiB > 0:
			return fmt.Sprintf("%s has %dGiB per GPU, less than gpu_memory %v", b.Flavor, b.ModelMemoryGiB, resource.GPUMemory(b.GPUMemory))
		case b.GPUMemory > 0:
			return fmt.Sprintf("%s is not a known GPU model: its memory cannot meet gpu_memory %v", b.Flavor, resource.GPUMemory(b.GPUMemory))
		}
		return fmt.Sprintf("no %s in %s", b.Flavor, b.Region)
	case ReasonSpotPrice:
		if b.Price > b.MaxPrice || b.Firm {
			return fmt.Sprintf("spot price of %s in %s is $%.2f/GPU-h, above max price $%.2f", b.Flavor, b.Region, b.Price, b.MaxPrice)
		}
		return fmt.Sprintf("spot price of %s in %s is $%.2f/GPU-h, not below %.0f%% of max price $%.2f (spot work starts only below $%.2f/GPU-h)",
			b.Flavor, b.Region, b.Price, 100*spot.AdmitFraction, b.MaxPrice, b.MaxPrice*spot.AdmitFraction)
	case ReasonQuotaLimit:
		region := b.Region
		if b.AllRegions {
			region = "all regions"
		}
		msg := fmt.Sprintf("tenant %s at limit %v/%v %s in %s (asks %v)", b.Tenant, b.Used, b.Limit, b.Flavor, region, b.Requested)
		if b.Reserved > 0 {
			msg += fmt.Sprintf("; %v of it reserved", b.Reserved)
		}
		return msg
	case ReasonPolicyHeld:
		if b.Hold != nil {
			return fmt.Sprintf("held: %s capped at %v GPUs by policy %s, rule %s", b.Hold.Target, b.Limit, b.Hold.Policy, b.Hold.Rule)
		}
	case ReasonLendingLimit:
		return fmt.Sprintf("tenant %s would borrow %v %s in %s but only %v is lendable (%v free, %v guaranteed to others)",
			b.Tenant, b.Requested, b.Flavor, b.Region, b.Limit, b.Free, b.Protected)
	case ReasonNoBlock, ReasonNoCapacity:
		why := ""
		if b.Preempted {
			why = ", and preemption cannot free enough"
		}
		where := b.Region
		if len(b.Pools) > 0 {
			where = fmt.Sprintf("%s pools %v", b.Region, b.Pools)
		}
		var msg string
		switch {
		case b.MIG != 0 && b.Code == ReasonNoBlock:
			msg = fmt.Sprintf("no block in %s where %d MIG slices %s of %s fit%s", where, b.Replicas, b.MIG, b.Flavor, why)
		case b.MIG != 0:
			msg = fmt.Sprintf("no MIG slice %s fits on the MIG-mode %s in %s for %d replica%s (%v free in reach, in slices too fragmented or too small)%s",
				b.MIG, b.Flavor, where, b.Replicas, plural(b.Replicas), b.Free, why)
		case b.Code == ReasonNoBlock:
			msg = fmt.Sprintf("no block in %s with %v free %s (%d × %v)%s", where, b.Requested, b.Flavor, b.Replicas, b.PerReplica, why)
		default:
			msg = fmt.Sprintf("no room for %d × %v %s in %s (%v free in reach)%s", b.Replicas, b.PerReplica, b.Flavor, where, b.Free, why)
		}
		if h := b.Held; h != nil {
			msg += fmt.Sprintf("; %v idle %s held for a reservation from %s, lent only to work expected to end by then or preemptible",
				h.Free, b.Flavor, h.Start.UTC().Format(time.RFC3339))
		}
		if h := b.Planned; h != nil {
			msg += fmt.Sprintf("; %v free %s held for planned starts from %s, lent only to work expected to end by then or that the planned work may preempt",
				h.Free, b.Flavor, h.Start.UTC().Format(time.RFC3339))
		}
		return msg
	}
	return string(b.Code)
}

// Render sets the pending workload's Reason (its first blocker's text) and
// Details (one line per flavor and region tried, when it tried several)
// from its Blockers. A Pending without Blockers (one a caller made, such as
// PolicyHeld) keeps its text.
// A planned start (Planned) is added to Reason, names and all: a caller
// showing it to a tenant renders the plan itself (PlannedStart.Text).
func (p *Pending) Render() {
	if len(p.Blockers) == 0 {
		return
	}
	p.Reason = p.Blockers[0].String()
	p.Details = nil
	if len(p.Blockers) > 1 {
		p.Details = make([]string, len(p.Blockers))
		for i, b := range p.Blockers {
			p.Details[i] = string(b.Flavor) + "/" + b.Region + ": " + b.String()
		}
	}
	p.addPlan()
}

// addPlan appends the planned start to Reason.
func (p *Pending) addPlan() {
	if p.Planned != nil {
		p.Reason += "; " + p.Planned.Text(nil)
	}
}

// Text renders the planned start: "planned to start at T in REGION block
// B when train-a and 3 others end". show, when set, says which ending
// workloads may be named (a tenant sees only its own); the others are
// counted.
func (p *PlannedStart) Text(show func(workload.ID) bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "planned to start at %s in %s", p.Start.UTC().Format(time.RFC3339), p.Region)
	if p.Block != "" {
		fmt.Fprintf(&b, " block %s", p.Block)
	} else {
		fmt.Fprintf(&b, " on %d node%s", p.Nodes, plural(p.Nodes))
	}
	var names []string
	for _, id := range p.Ending {
		if show == nil || show(id) {
			names = append(names, string(id))
		}
	}
	switch others := p.EndingCount - len(names); {
	case p.EndingCount == 0:
	case len(names) == 0 && others == 1:
		b.WriteString(" when 1 running workload ends")
	case len(names) == 0:
		fmt.Fprintf(&b, " when %d running workloads end", others)
	case others == 0 && len(names) == 1:
		fmt.Fprintf(&b, " when %s ends", names[0])
	case others == 0:
		fmt.Fprintf(&b, " when %s and %s end", strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
	default:
		fmt.Fprintf(&b, " when %s and %d other%s end", strings.Join(names, ", "), others, plural(others))
	}
	if p.Evicts > 0 {
		fmt.Fprintf(&b, ", evicting %d workload%s it may preempt", p.Evicts, plural(p.Evicts))
	}
	if p.Starving {
		fmt.Fprintf(&b, " (waited %s, over its class's bound of %s: the block is drained for it)", ShortDuration(p.Waited), ShortDuration(p.MaxWait))
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ShortDuration renders d to the minute (under a minute, to the second):
// 40h, 1h30m, 45m, 20s; the plans' and the server's messages use it.
func ShortDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	d = d.Round(time.Minute)
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// render renders every pending decision of the plan. Alike workloads share
// their decision's Blockers (see repeated), so each is rendered once.
func (p *Plan) render() {
	type text struct {
		reason  string
		details []string
	}
	done := map[*Blocker]text{}
	do := func(x *Pending) {
		if len(x.Blockers) == 0 {
			return
		}
		if d, ok := done[&x.Blockers[0]]; ok {
			x.Reason, x.Details = d.reason, d.details
			x.addPlan()
			return
		}
		planned := x.Planned
		x.Planned = nil
		x.Render()
		done[&x.Blockers[0]] = text{x.Reason, x.Details}
		x.Planned = planned
		x.addPlan()
	}
	for i := range p.Pending {
		do(&p.Pending[i])
	}
	for i := range p.Classes {
		do(&p.Classes[i].Pending)
	}
}

// MIGName is a MIG profile's name in one byte: mig.NameIndex plus one,
// 0 for none. Its JSON is the name.
type MIGName uint8

func migName(profile string) MIGName { return MIGName(mig.NameIndex(profile) + 1) }

func (n MIGName) String() string {
	if n == 0 {
		return ""
	}
	return mig.NameAt(int(n) - 1)
}

// MarshalJSON writes the name.
func (n MIGName) MarshalJSON() ([]byte, error) { return json.Marshal(n.String()) }

// UnmarshalJSON reads a name ("" or null: none).
func (n *MIGName) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*n = 0
	if s == "" {
		return nil
	}
	if mig.NameIndex(s) < 0 {
		return fmt.Errorf("sched: unknown MIG profile %q", s)
	}
	*n = migName(s)
	return nil
}
