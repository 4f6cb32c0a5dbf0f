package serving

import (
	"fmt"
	"time"
)

// Region names a cloud region ("eastus", ...), as the fleet does.
type Region string

// The regions of the built-in RTT table.
const (
	EastUS      Region = "eastus"
	WestUS2     Region = "westus2"
	CentralUS   Region = "centralus"
	NorthEurope Region = "northeurope"
)

// RTTTable holds network round-trip times from users in one region to a
// serving region. It is a value built once; lookups do not allocate.
type RTTTable struct {
	regions []Region
	rtt     [][]time.Duration
}

// NewRTTTable builds a table for the given regions, all zero: fill it with
// Set.
func NewRTTTable(regions ...Region) *RTTTable {
	t := &RTTTable{regions: append([]Region(nil), regions...)}
	t.rtt = make([][]time.Duration, len(regions))
	for i := range t.rtt {
		t.rtt[i] = make([]time.Duration, len(regions))
	}
	return t
}

func (t *RTTTable) index(r Region) int {
	for i, x := range t.regions {
		if x == r {
			return i
		}
	}
	return -1
}

// Set records the round trip from users in from to a service in to (and
// the same the other way).
func (t *RTTTable) Set(from, to Region, d time.Duration) error {
	i, j := t.index(from), t.index(to)
	if i < 0 || j < 0 || d < 0 {
		return fmt.Errorf("serving: rtt: unknown region %q or %q, or negative time %v", from, to, d)
	}
	t.rtt[i][j], t.rtt[j][i] = d, d
	return nil
}

// RTT is the round trip from users in from to a service in to.
func (t *RTTTable) RTT(from, to Region) (time.Duration, bool) {
	i, j := t.index(from), t.index(to)
	if i < 0 || j < 0 {
		return 0, false
	}
	return t.rtt[i][j], true
}

// Regions lists the table's regions in the order given.
func (t *RTTTable) Regions() []Region { return append([]Region(nil), t.regions...) }

// UserAccessRTT is the assumed round trip from a user to the nearest Azure
// edge in their own region (last mile plus metro), added to every entry.
const UserAccessRTT = 20 * time.Millisecond

// DefaultRTT is the built-in table: UserAccessRTT within a region, and
// UserAccessRTT plus the inter-region round trip across regions. The
// inter-region figures are rounded monthly averages of the kind Microsoft
// publishes in "Azure network round-trip latency statistics" (ThousandEyes
// probes between regions; learn.microsoft.com/azure/networking/azure-network-latency),
// as remembered, not fetched: eastus–westus2 67 ms, eastus–centralus 25 ms,
// eastus–northeurope 72 ms, westus2–centralus 40 ms, westus2–northeurope
// 135 ms, centralus–northeurope 97 ms. Override with Set for measured
// values.
func DefaultRTT() *RTTTable {
	t := NewRTTTable(EastUS, WestUS2, CentralUS, NorthEurope)
	inter := []struct {
		a, b Region
		ms   int
	}{
		{EastUS, WestUS2, 67}, {EastUS, CentralUS, 25}, {EastUS, NorthEurope, 72},
		{WestUS2, CentralUS, 40}, {WestUS2, NorthEurope, 135}, {CentralUS, NorthEurope, 97},
	}
	for _, r := range t.regions {
		_ = t.Set(r, r, UserAccessRTT)
	}
	for _, x := range inter {
		_ = t.Set(x.a, x.b, UserAccessRTT+time.Duration(x.ms)*time.Millisecond)
	}
	return t
}

// RoutingMethod is how a router picks serving regions, after Azure Traffic
// Manager's methods.
type RoutingMethod int

const (
	// Performance sends each user region to the healthy endpoint with the
	// lowest round trip (ties: the earlier endpoint).
	Performance RoutingMethod = iota
	// Priority sends everyone to the healthy endpoint with the lowest
	// Priority value (ties: the earlier endpoint).
	Priority
	// Weighted splits every user region's traffic over the healthy
	// endpoints in proportion to their weights.
	Weighted
)

func (m RoutingMethod) String() string {
	switch m {
	case Performance:
		return "performance"
	case Priority:
		return "priority"
	case Weighted:
		return "weighted"
	}
	return fmt.Sprintf("RoutingMethod(%d)", int(m))
}

// Endpoint is a deployment of the service behind the router.
type Endpoint struct {
	Region   Region
	Priority int     // Priority routing: lower first
	Weight   float64 // Weighted routing: share of traffic, > 0
	Healthy  bool    // from health probes (see Probe)
}

// Router splits user demand over endpoints. Unhealthy endpoints get no
// traffic (failover); when none is healthy, the router behaves as if all
// were (Traffic Manager's fail-open rule), so traffic is never dropped by
// routing alone.
type Router struct {
	Method    RoutingMethod
	Endpoints []Endpoint
	RTT       *RTTTable
}

// Demand is the traffic of users in one region.
type Demand struct {
	From Region
	Rate Rate
}

// Flow is traffic from users in one region to one endpoint.
type Flow struct {
	From, To Region
	Endpoint int // index into Router.Endpoints
	Rate     Rate
	RTT      time.Duration
}

// Route splits demand into flows, in the order of demands, then endpoints.
// It fails when a region is missing from the RTT table or a weighted
// endpoint has no positive weight.
func (r *Router) Route(demand []Demand) ([]Flow, error) {
	if len(r.Endpoints) == 0 {
		return nil, fmt.Errorf("serving: router: no endpoints")
	}
	if r.RTT == nil {
		return nil, fmt.Errorf("serving: router: no RTT table")
	}
	anyHealthy := false
	for _, e := range r.Endpoints {
		anyHealthy = anyHealthy || e.Healthy
	}
	usable := func(e Endpoint) bool { return e.Healthy || !anyHealthy }
	var flows []Flow
	for _, dm := range demand {
		rtts := make([]time.Duration, len(r.Endpoints))
		for i, e := range r.Endpoints {
			d, ok := r.RTT.RTT(dm.From, e.Region)
			if !ok {
				return nil, fmt.Errorf("serving: router: no RTT from %q to %q", dm.From, e.Region)
			}
			rtts[i] = d
		}
		pick := -1
		switch r.Method {
		case Performance:
			for i, e := range r.Endpoints {
				if usable(e) && (pick < 0 || rtts[i] < rtts[pick]) {
					pick = i
				}
			}
		case Priority:
			for i, e := range r.Endpoints {
				if usable(e) && (pick < 0 || e.Priority < r.Endpoints[pick].Priority) {
					pick = i
				}
			}
		case Weighted:
			var sum float64
			for _, e := range r.Endpoints {
				if !(e.Weight > 0) {
					return nil, fmt.Errorf("serving: router: endpoint %q has weight %v", e.Region, e.Weight)
				}
				if usable(e) {
					sum += e.Weight
				}
			}
			for i, e := range r.Endpoints {
				if usable(e) {
					flows = append(flows, Flow{From: dm.From, To: e.Region, Endpoint: i, Rate: Rate(float64(dm.Rate) * e.Weight / sum), RTT: rtts[i]})
				}
			}
			continue
		default:
			return nil, fmt.Errorf("serving: router: unknown method %v", r.Method)
		}
		flows = append(flows, Flow{From: dm.From, To: r.Endpoints[pick].Region, Endpoint: pick, Rate: dm.Rate, RTT: rtts[pick]})
	}
	return flows, nil
}

// EndpointRates sums the flows' rates per endpoint.
func (r *Router) EndpointRates(flows []Flow) []Rate {
	out := make([]Rate, len(r.Endpoints))
	for _, f := range flows {
		out[f.Endpoint] += f.Rate
	}
	return out
}

// Probe is a health probe's verdict on an endpoint after a step: healthy
// when it has replicas and at least half of its requests would answer
// within timeout (a probe is a request like the others; Traffic Manager
// waits 10 s by default).
func Probe(replicas int, res *StepResult, timeout time.Duration) bool {
	return replicas > 0 && res.Response.Within(timeout) >= 0.5
}

// UserLatency mixes the flows' response times, each shifted by its round
// trip, weighted by rate: what users see. results[i] is endpoint i's step.
// It returns the parts, for MixQuantile and MixExceed.
func UserLatency(flows []Flow, results []StepResult) []Part {
	parts := make([]Part, 0, len(flows))
	for _, f := range flows {
		parts = append(parts, Part{Weight: float64(f.Rate), Shift: f.RTT, Resp: &results[f.Endpoint].Response})
	}
	return parts
}
