package serving

import (
	"testing"
	"time"
)

func TestDefaultRTT(t *testing.T) {
	rt := DefaultRTT()
	tests := []struct {
		from, to Region
		want     time.Duration
	}{
		{EastUS, EastUS, 20 * time.Millisecond},
		{EastUS, WestUS2, 87 * time.Millisecond},
		{WestUS2, EastUS, 87 * time.Millisecond},
		{WestUS2, NorthEurope, 155 * time.Millisecond},
		{CentralUS, EastUS, 45 * time.Millisecond},
	}
	for _, tc := range tests {
		if got, ok := rt.RTT(tc.from, tc.to); !ok || got != tc.want {
			t.Errorf("RTT(%s, %s) = %v, %v; want %v", tc.from, tc.to, got, ok, tc.want)
		}
	}
	if _, ok := rt.RTT(EastUS, "mars"); ok {
		t.Error("unknown region found")
	}
	if err := rt.Set(EastUS, "mars", time.Second); err == nil {
		t.Error("Set accepted an unknown region")
	}
}

func TestRoute(t *testing.T) {
	eps := func(healthy ...bool) []Endpoint {
		return []Endpoint{
			{Region: EastUS, Priority: 1, Weight: 3, Healthy: healthy[0]},
			{Region: WestUS2, Priority: 2, Weight: 1, Healthy: healthy[1]},
			{Region: NorthEurope, Priority: 3, Weight: 1, Healthy: healthy[2]},
		}
	}
	demand := []Demand{{EastUS, 100}, {WestUS2, 60}, {NorthEurope, 40}}
	type flow struct {
		from, to Region
		rate     Rate
	}
	tests := []struct {
		name    string
		method  RoutingMethod
		healthy []bool
		want    []flow
	}{
		{"performance: each to its own region", Performance, []bool{true, true, true},
			[]flow{{EastUS, EastUS, 100}, {WestUS2, WestUS2, 60}, {NorthEurope, NorthEurope, 40}}},
		{"performance: eastus down fails over to the nearest healthy", Performance, []bool{false, true, true},
			[]flow{{EastUS, WestUS2, 100}, {WestUS2, WestUS2, 60}, {NorthEurope, NorthEurope, 40}}}, // 67 ms < 72 ms
		{"priority: all to the first", Priority, []bool{true, true, true},
			[]flow{{EastUS, EastUS, 100}, {WestUS2, EastUS, 60}, {NorthEurope, EastUS, 40}}},
		{"priority: failover to the second", Priority, []bool{false, true, true},
			[]flow{{EastUS, WestUS2, 100}, {WestUS2, WestUS2, 60}, {NorthEurope, WestUS2, 40}}},
		{"priority: none healthy fails open", Priority, []bool{false, false, false},
			[]flow{{EastUS, EastUS, 100}, {WestUS2, EastUS, 60}, {NorthEurope, EastUS, 40}}},
		{"weighted: 3:1 over the healthy ones", Weighted, []bool{true, true, false},
			[]flow{{EastUS, EastUS, 75}, {EastUS, WestUS2, 25}, {WestUS2, EastUS, 45}, {WestUS2, WestUS2, 15}, {NorthEurope, EastUS, 30}, {NorthEurope, WestUS2, 10}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Router{Method: tc.method, Endpoints: eps(tc.healthy...), RTT: DefaultRTT()}
			flows, err := r.Route(demand)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]flow, len(flows))
			for i, f := range flows {
				got[i] = flow{f.From, f.To, f.Rate}
				if want, _ := r.RTT.RTT(f.From, f.To); f.RTT != want || r.Endpoints[f.Endpoint].Region != f.To {
					t.Errorf("flow %+v: wrong RTT or endpoint", f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
			var sum Rate
			for _, x := range r.EndpointRates(flows) {
				sum += x
			}
			if sum != 200 {
				t.Errorf("endpoint rates sum to %v, want 200", sum)
			}
		})
	}
	if _, err := (&Router{Method: Performance, Endpoints: eps(true, true, true), RTT: DefaultRTT()}).Route([]Demand{{"mars", 1}}); err == nil {
		t.Error("unknown user region accepted")
	}
}

// TestUserLatency runs two regions behind a performance router for one
// step: eastus healthy, westus2 with too few replicas. Users in westus2
// then see westus2's queue plus their short round trip; after the probe
// marks westus2 unhealthy they fail over to eastus and see its latency
// plus the cross-country round trip.
func TestUserLatency(t *testing.T) {
	d, err := ProfileDist(h100(t), codeSizes(t))
	if err != nil {
		t.Fatal(err)
	}
	r := Router{Method: Performance, RTT: DefaultRTT(), Endpoints: []Endpoint{
		{Region: EastUS, Healthy: true}, {Region: WestUS2, Healthy: true}}}
	replicas := []int{40, 3}
	demand := []Demand{{EastUS, 200}, {WestUS2, 60}}
	step := func() ([]Flow, []StepResult) {
		flows, err := r.Route(demand)
		if err != nil {
			t.Fatal(err)
		}
		rates := r.EndpointRates(flows)
		res := make([]StepResult, len(rates))
		for i, rate := range rates {
			res[i] = d.Step(StepInput{Rate: rate, Replicas: replicas[i], Step: time.Minute, MaxWait: 30 * time.Second})
		}
		return flows, res
	}
	flows, res := step()
	parts := UserLatency(flows, res)
	west := MixQuantile(parts[1:], 0.99)
	if west < 25*time.Second { // overloaded: waits near the 30 s cap
		t.Fatalf("westus2 users' p99 %v with 3 replicas at 60/s", west)
	}
	r.Endpoints[1].Healthy = Probe(replicas[1], &res[1], 10*time.Second)
	if r.Endpoints[1].Healthy {
		t.Fatal("probe passed an overloaded endpoint")
	}
	flows, res = step()
	parts = UserLatency(flows, res)
	if len(flows) != 2 || flows[1].To != EastUS {
		t.Fatalf("no failover: %+v", flows)
	}
	west = MixQuantile(parts[1:], 0.99)
	want := res[0].P99 + 87*time.Millisecond
	if d := west - want; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("westus2 users' p99 after failover %v, want eastus p99 + 87 ms = %v", west, want)
	}
	all := MixQuantile(parts, 0.99)
	if all < res[0].P99 || all > west {
		t.Errorf("all users' p99 %v outside [%v, %v]", all, res[0].P99, west)
	}
	if att := 1 - MixExceed(parts, 6*time.Second); att < 0.99 {
		t.Errorf("SLO attainment %.4f after failover", att)
	}
}
