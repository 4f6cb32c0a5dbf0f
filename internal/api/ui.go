package api

import "time"

// UIFleet is the fleet as the dashboard draws it (GET /v1/ui/fleet):
// every node of every block, each GPU with who holds it and how. A
// tenant token sees its own GPUs by name and every other holder as -2.
type UIFleet struct {
	// Tenants names the holders GPUs refer to by index (a tenant token:
	// only itself).
	Tenants []string   `json:"tenants"`
	Regions []UIRegion `json:"regions"`
	// GPUs and Nodes count the fleet.
	GPUs  int `json:"gpus"`
	Nodes int `json:"nodes"`
	// Revision is the store revision the view shows: follow the event
	// stream after it (GET /v1/events?after=).
	Revision int64 `json:"revision"`
}

// UIRegion is a region's zones.
type UIRegion struct {
	Name  string   `json:"name"`
	Zones []UIZone `json:"zones"`
}

// UIZone is a zone's blocks.
type UIZone struct {
	Name   string    `json:"name"`
	Blocks []UIBlock `json:"blocks"`
}

// UIBlock is a block's nodes.
type UIBlock struct {
	Name  string   `json:"name"`
	Nodes []UINode `json:"nodes"`
}

// GPU use kinds of UINode.Kind.
const (
	UIFree       = 0 // nobody holds it
	UIGuaranteed = 1 // held within its tenant's guarantee
	UIBorrowed   = 2 // held beyond the guarantee (borrowed, reclaimable)
	UIOwnResv    = 3 // held by the reservation's owner on its reservation
	UILentResv   = 4 // an idle reservation's GPU lent to other work
)

// UINode is one node: its state and each GPU's holder (index into
// UIFleet.Tenants; -1 free; -2 another tenant than the caller), use kind
// (UIFree..UILentResv) and the share held in milli-GPUs (1000 whole; less
// when GPUs are shared).
type UINode struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	// State is ready, cordoned, drained, lost or down (as node list).
	State string `json:"state"`
	// Reserved is "own" (a reservation of the caller's, or any for the
	// admin), "other" (another tenant's) or "".
	Reserved    string `json:"reserved,omitempty"`
	Reservation string `json:"reservation,omitempty"` // its name, when the caller may see it
	Holder      []int  `json:"holder"`
	Kind        []int  `json:"kind"`
	Milli       []int  `json:"milli"`
}

// UIQueue is the pending work with why it waits (GET /v1/ui/queue).
type UIQueue struct {
	Items        []UIPending `json:"items"`
	PlanRevision int64       `json:"plan_revision"`
}

// UIPending is one pending workload.
type UIPending struct {
	Tenant       string    `json:"tenant"`
	Name         string    `json:"name"`
	Priority     string    `json:"priority"`
	GPUs         GPUs      `json:"gpus"`
	Replicas     int       `json:"replicas"`
	SubmittedAt  time.Time `json:"submitted_at"`
	Code         string    `json:"code,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	PlannedStart time.Time `json:"planned_start,omitzero"`
}

// UISeries is what the dashboard charts (GET /v1/ui/series): one point
// a minute over the last hours. The admin sees the fleet's
// utilization, busy utilization and pending GPUs and each probed or
// pushed service's p95 latency; a tenant its own GPUs in use and
// pending.
type UISeries struct {
	Times  []time.Time `json:"times"`
	Series []UISerie   `json:"series"`
}

// UISerie is one named series of UISeries.Times' length (NaN-free: a
// missing value is null).
type UISerie struct {
	Name   string     `json:"name"`
	Unit   string     `json:"unit"`
	Values []*float64 `json:"values"`
}
