package sched

import (
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Input is everything one scheduling cycle looks at. Schedule does not
// modify it.
type Input struct {
	Now          time.Time
	Seed         uint64
	Fleet        *fleet.Fleet
	Tenants      *tenancy.Tree
	Partitions   []tenancy.Partition
	Reservations []tenancy.Reservation // bound: Nodes set (see tenancy.Bind)
	// Workloads holds running (Running != nil) and pending workloads.
	Workloads []*workload.Workload
	// Down lists nodes that are unavailable; work on them is evicted.
	Down []fleet.NodeID
	// Cordoned lists nodes that take no new work: nothing is placed on
	// them, but the work running there stays (unlike Down).
	Cordoned []fleet.NodeID
	// SpotPrices are the current spot prices; a spot workload with a max
	// price is not placed where the price is above its admission bound
	// (see spot.AdmitBound).
	SpotPrices []SpotPrice
	// Evict names running workloads to evict this cycle whatever else
	// happens, with the reason to give (the server's policy caps on a class
	// of work use it). Names of workloads not running are ignored.
	Evict   map[workload.ID]string
	Options Options
	// History is the decayed usage of the quota entries as of the last
	// cycle (the previous Plan.History); read only with
	// Options.FairShare. Nil starts from nothing.
	History *tenancy.History
	// Cache, when set, memoises across cycles what depends on the fleet
	// alone and where running work sits (see Cache, and its contract on
	// Assignments). It never changes the Plan.
	Cache *Cache
}

// SpotPrice is the spot price of one GPU model in one region.
type SpotPrice struct {
	Model      fleet.ModelID
	Region     string
	PerGPUHour float64 // USD
	// Firm is true for a price a policy set: spot work is placed while
	// its max price is at least the price, without the market's headroom.
	Firm bool
}

// SpotInput appends the scheduler's view of the market's quotes to dst:
// the one conversion the simulator and the server share.
func SpotInput(dst []SpotPrice, qs []spot.Quote) []SpotPrice {
	for _, q := range qs {
		dst = append(dst, SpotPrice{Model: q.Model, Region: q.Region, PerGPUHour: q.PerGPUHour, Firm: q.Firm})
	}
	return dst
}

// Options tune one cycle.
type Options struct {
	// Scorer names the node scorer (see ScorerNames); "" is Arbiter's
	// index-accelerated best fit. Named scorers rate every feasible node of a
	// pool for single replicas; gangs are placed by best fit in any case.
	Scorer string
	// DisablePreemption leaves workloads pending rather than evicting others.
	DisablePreemption bool
	// OverflowBeforePreempt tries every acceptable flavor and region
	// without preemption before preempting anywhere.
	OverflowBeforePreempt bool
	// HonourWindow, when set, is how soon a reservation's owner gets its
	// idle capacity back: it is lent only to work that leaves within the
	// window once evicted (ExitTime). Zero lends it to any preemptible
	// work.
	HonourWindow time.Duration
	// TerseReasons leaves Pending.Reason and Details empty (Code and the
	// structured Blockers are still set; Pending.Render renders them
	// later): for callers such as the simulator that decide thousands of
	// pending workloads per cycle and read no messages.
	TerseReasons bool
	// Planning plans starts for the highest-ordered pending workloads that
	// do not fit now and holds capacity for them (backfill); the zero
	// value plans nothing. See Planning.
	Planning Planning
	// FairShare, when its half-life is set, orders tenants at the same
	// priority by decayed usage over guarantee × weight instead of by
	// current usage (see tenancy.Decay), and the plan carries the history
	// forward (Plan.History).
	FairShare FairShare
	// TenantBound, when positive, is the most shapes of one tenant's
	// pending work a cycle decides. A shape is a class of alike work
	// (alike in all the core reads: GPUs, replicas, priority, flavors,
	// regions, pools…, see Alike), decided once per cycle by the repeat
	// memo, so a tenant's cost to a cycle follows its shapes. Each
	// tenant's pending work is decided in scheduling order up to the first
	// workload of a shape past its first TenantBound; that workload and the
	// tenant's later ones are left pending with ReasonDeferred, undecided,
	// in the manner of Slurm's bf_max_job_user. A tenant's mix of thousands
	// of shapes then costs a cycle no more than TenantBound shapes; its own
	// later work waits for the work ahead of it. The plan is the plan of the input without the deferred
	// workloads, plus their Pending entries (property tenant-bound). Zero
	// or negative decides all pending work; the runtimes (server,
	// simulator, `arbiter schedule`, kube mode) default to
	// DefaultTenantBound.
	TenantBound int

	// noRepeat turns off the repeat memo (see repeatKey) so that tests
	// can check it never changes a plan.
	noRepeat bool
	// noBlockFit turns off the gangs' kept fits per block (blockFit), for
	// the same check.
	noBlockFit bool
	// noSearchMemo turns off the victim searches' memos of what is out of
	// reach (reachMemo), for the same check.
	noSearchMemo bool
	// splitPools splits pools by PoolLabel as if some workload named
	// pools (poolConstrained), so that the tenant bound's test can compare
	// a plan with a deferred pool-naming workload to its cut input's.
	splitPools bool
}

// DefaultTenantBound is the Options.TenantBound the server, the simulator,
// `arbiter schedule` and kube mode run with unless configured otherwise
// (options.shapes_per_tenant).
const DefaultTenantBound = 1000

// FairShare configures fair share over time.
type FairShare struct {
	// HalfLife is how long until an hour of use counts half; zero turns
	// fair share over time off (tenants are ordered by current usage).
	HalfLife time.Duration
}

// candidate is one acceptable (flavor, region) of a workload.
type candidate struct {
	model  fleet.ModelID
	region string
}

func (c candidate) String() string { return string(c.model) + "/" + c.region }

// candidates lists a workload's acceptable options, most preferred first:
// regions in order, and in each region the flavors in order.
func candidates(w *workload.Workload) []candidate {
	return appendCandidates(make([]candidate, 0, len(w.Regions)*len(w.Flavors)), w)
}

func appendCandidates(out []candidate, w *workload.Workload) []candidate {
	for _, r := range w.Regions {
		for _, m := range w.Flavors {
			out = append(out, candidate{m, r})
		}
	}
	return out
}

// SpotNotice is how long spot work is warned before it is evicted.
const SpotNotice = 30 * time.Second

// DefaultHonourWindow is the honour window the simulator's scenarios and
// the server use unless told otherwise: a reservation's owner gets its
// capacity within 5 minutes of asking.
const DefaultHonourWindow = 5 * time.Minute

// ExitTime is how long w takes to leave its GPUs once evicted: its grace
// period, and at least SpotNotice for spot work.
func ExitTime(w *workload.Workload) time.Duration {
	if w.Priority == workload.PrioritySpot {
		return max(w.GracePeriod, SpotNotice)
	}
	return w.GracePeriod
}
