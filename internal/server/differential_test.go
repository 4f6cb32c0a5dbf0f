package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/sim"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The differential test: one scripted scenario (fleet, tenants, arrivals,
// metric samples, a policy file using every action) runs through the
// simulator and through a real in-process server (real store, controlled
// clock), and every step's firings, placements and evictions must be the
// same. The policy runtime (internal/policy/effects) is what makes them
// so; a change to either side alone fails here.

const diffFleet = `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
            - name: eus-h
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2, labels: {pool: h100s}}]
    - name: westus2
      zones:
        - name: "1"
          blocks:
            - name: wus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2, labels: {pool: spare}}]
tenants:
  - name: contoso
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 32}
      - {flavor: A100-80G, region: westus2, limit: 16}
      - {flavor: H100-80G, region: eastus, limit: 8}
  - name: fabrikam
    quota:
      - {flavor: A100-80G, region: eastus, limit: 32}
      - {flavor: A100-80G, region: westus2, limit: 16}
      - {flavor: H100-80G, region: eastus, limit: 16}
`

// diffPolicy uses every action, on tenants, classes, services, selectors,
// pools, regions and flavors.
const diffPolicy = `policies:
  - name: busy
    when: {metric: utilization, of: cluster, above: 50%}
    then:
      - {type: scale_down, target: class:dev, min_capacity: 50%}
      - {type: migrate, target: class:batch, destination: low_priority_pool}
      - {type: set_priority, target: selector:team=ml, priority: high}
    cooldown: 1m
  - name: queued
    when: {metric: pending_gpus, of: cluster, above: 8}
    then:
      - {type: migrate, target: tenant:fabrikam, destination: region:westus2}
      - {type: set_limit, target: selector:class=scratch, limit: 4}
      - {type: scale_down, target: tenant:contoso, min_capacity: 50%}
    cooldown: 1m
  - name: chat_slow
    when: {metric: p95_latency, of: service:chat, above: 150ms}
    then:
      - type: reallocate
        resources: [service:chat, tenant:contoso, flavor:H100-80G]
        priority: high
        guarantee: 16
      - {type: notify, channel: oncall, message: chat is slow}
    cooldown: 1m
  - name: evacuate
    when: {metric: queue_wait, of: cluster, above: 60s}
    then:
      - {type: drain, target: pool:h100s}
      - {type: set_spot_price, target: region:westus2, price: $200}
      - {type: set_limit, target: tenant:fabrikam, limit: 8}
      - {type: migrate, target: selector:class=scratch, destination: pool:spare}
    cooldown: 1m
`

// arrival is one scripted submission.
type arrival struct {
	at                 time.Duration
	name, tenant, kind string
	priority           workload.Priority
	preemptible        bool
	gpus, replicas     int
	flavor             string
	regions            []string
	maxPrice           float64
	labels             map[string]string
	// maxReplicas and step make it elastic: replicas is then its min.
	maxReplicas, step int
	// mig is the MIG profile of each replica (gpus is then left out).
	mig string
}

// diffScript is one scripted scenario: the fleet and tenants, the
// arrivals, the policy file (none when empty) and the pushed metrics.
type diffScript struct {
	fleet    string
	arrivals []arrival
	policy   string
	samples  func() []sim.MetricSample
	minutes  int
}

// mainScript uses every policy action.
var mainScript = diffScript{fleet: diffFleet, arrivals: diffArrivals, policy: diffPolicy, samples: diffSamples, minutes: diffMinutes}

var diffArrivals = []arrival{
	{at: 0, name: "train", tenant: "contoso", kind: "training", priority: workload.PriorityNormal, gpus: 8, replicas: 2, flavor: "A100-80G", regions: []string{"eastus", "westus2"}, labels: map[string]string{"team": "ml"}},
	{at: 0, name: "dev", tenant: "contoso", kind: "vm", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 0, name: "dev", tenant: "contoso", kind: "vm", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: time.Minute, name: "batch", tenant: "fabrikam", kind: "batch", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: time.Minute, name: "batch", tenant: "fabrikam", kind: "batch", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 0, name: "chat", tenant: "contoso", kind: "inference", priority: workload.PriorityNormal, gpus: 8, replicas: 1, flavor: "H100-80G", regions: []string{"eastus"}, labels: map[string]string{"service": "chat"}},
	{at: 3 * time.Minute, name: "spot", tenant: "fabrikam", kind: "batch", priority: workload.PrioritySpot, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"westus2"}, maxPrice: 100},
	{at: 4 * time.Minute, name: "scratch", tenant: "fabrikam", kind: "batch", priority: workload.PriorityLow, preemptible: true, gpus: 4, replicas: 1, flavor: "A100-80G", regions: []string{"eastus", "westus2"}},
	{at: 4 * time.Minute, name: "scratch", tenant: "fabrikam", kind: "batch", priority: workload.PriorityLow, preemptible: true, gpus: 4, replicas: 1, flavor: "A100-80G", regions: []string{"eastus", "westus2"}},
	{at: 12 * time.Minute, name: "train2", tenant: "contoso", kind: "training", priority: workload.PriorityNormal, gpus: 8, replicas: 2, flavor: "A100-80G", regions: []string{"eastus", "westus2"}},
	{at: 13 * time.Minute, name: "hpc", tenant: "fabrikam", kind: "training", priority: workload.PriorityNormal, gpus: 8, replicas: 1, flavor: "H100-80G", regions: []string{"eastus"}, labels: map[string]string{"team": "ml"}},
	{at: 26 * time.Minute, name: "spot2", tenant: "fabrikam", kind: "batch", priority: workload.PrioritySpot, preemptible: true, gpus: 4, replicas: 1, flavor: "A100-80G", regions: []string{"westus2"}, maxPrice: 100},
	{at: 30 * time.Minute, name: "scratch", tenant: "fabrikam", kind: "batch", priority: workload.PriorityLow, preemptible: true, gpus: 4, replicas: 1, flavor: "A100-80G", regions: []string{"eastus", "westus2"}},
}

// While evacuate is in force (minutes 24–37) the policy's spot price in
// westus2 ($200) is above spot2's max price: it waits on both sides and is
// placed when the rule reverts. Running spot work is not evicted on a
// policy price on either side today; when the live spot market evicts it,
// the simulator must too (sim.go, spotPrices), or this test fails.

// diffSamples are the pushed metrics: chat is slow from minute 8 to 18;
// the queue waits long from minute 22 to 34.
func diffSamples() []sim.MetricSample {
	var out []sim.MetricSample
	for m := 0; m < diffMinutes; m++ {
		lat := 0.05
		if m >= 8 && m < 18 {
			lat = 0.3
		}
		wait := 5.0
		if m >= 22 && m < 34 {
			wait = 120
		}
		at := time.Duration(m) * time.Minute
		out = append(out,
			sim.MetricSample{At: at, Metric: policy.MetricP95Latency, Target: policy.Target{Kind: policy.TargetService, Name: "chat"}, Value: lat},
			sim.MetricSample{At: at, Metric: policy.MetricQueueWait, Target: policy.Cluster, Value: wait})
	}
	return out
}

const diffMinutes = 45

var diffStart = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// diffStep is what one step did, on either side.
type diffStep struct {
	Firings []string            // rule event, in order
	Notes   []string            // the notifications sent, as the event log writes them
	Running map[string][]string // workload → its replicas (node, GPUs, MIG instance)
	Evicted []string            // running at the previous step, not now
}

func (d diffStep) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "firings %v; notes %q; evicted %v; running:", d.Firings, d.Notes, d.Evicted)
	for _, k := range slices.Sorted(maps.Keys(d.Running)) {
		fmt.Fprintf(&b, " %s@%v", k, d.Running[k])
	}
	return b.String()
}

// replicaString is one replica as both sides compare it: its node, its
// GPUs and its MIG instance.
func replicaString(node string, gpus []int, m *workload.MIGInstance) string {
	out := fmt.Sprintf("%s%v", node, gpus)
	if m != nil {
		out += fmt.Sprintf("/%s@%d", m.Profile, m.Start)
	}
	return out
}

// evictions fills d.Evicted from the previous step's running set.
func (d *diffStep) evictions(prev map[string][]string) {
	for _, k := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := d.Running[k]; !ok {
			d.Evicted = append(d.Evicted, k)
		}
	}
}

// diffHalfLife is the fair-share half-life of the run with fair share
// over time (short, so that the decayed usage moves within the script).
const diffHalfLife = 20 * time.Minute

// diffOptions is the strategy's options: fair share over time or none.
func diffOptions(fair bool) string {
	if !fair {
		return ""
	}
	return fmt.Sprintf("options: {fair_share: {half_life: %s}}\n", diffHalfLife)
}

// runDiffSim runs the script through the simulator.
func runDiffSim(t *testing.T, sc diffScript, fair bool) []diffStep {
	t.Helper()
	var gens strings.Builder
	for _, a := range sc.arrivals {
		size := fmt.Sprintf("gpus: %d, replicas: %d", a.gpus, a.replicas)
		if a.mig != "" {
			size = fmt.Sprintf("mig: %s, replicas: %d", a.mig, a.replicas)
		}
		if a.maxReplicas > 0 {
			size += fmt.Sprintf(", max_replicas: %d, step: %d", a.maxReplicas, max(a.step, 1))
		}
		size = "{" + size + "}"
		fmt.Fprintf(&gens, "  - {name: %s, kind: %s, tenant: %s, priority: %s, preemptible: %v, count: 1, at: %s, flavors: [%s], regions: [%s], sizes: [%s], runtime_min: 240h, runtime_max: 240h, max_price: %g",
			a.name, a.kind, a.tenant, a.priority, a.preemptible, a.at, a.flavor, strings.Join(a.regions, ", "), size, a.maxPrice)
		if len(a.labels) > 0 {
			var ls []string
			for _, k := range slices.Sorted(maps.Keys(a.labels)) {
				ls = append(ls, k+": "+a.labels[k])
			}
			fmt.Fprintf(&gens, ", labels: {%s}", strings.Join(ls, ", "))
		}
		gens.WriteString("}\n")
	}
	src := fmt.Sprintf("name: diff\nstart: %s\nduration: %dm\ncycle: 1m\n%sgenerators:\n%s", diffStart.Format(time.RFC3339), sc.minutes, sc.fleet, gens.String())
	scn, err := sim.ParseScenario("diff.yaml", []byte(src))
	if err != nil {
		t.Fatalf("scenario: %v\n%s", err, src)
	}
	strategy := "name: diff\ndescription: the differential test\n"
	files := fstest.MapFS{}
	if sc.policy != "" {
		strategy += "policies: diff-policy.yaml\n"
		files["s/diff-policy.yaml"] = &fstest.MapFile{Data: []byte(sc.policy)}
	}
	files["s/diff.yaml"] = &fstest.MapFile{Data: []byte(strategy + diffOptions(fair))}
	st, err := sim.LoadStrategy(files, "s/diff")
	if err != nil {
		t.Fatal(err)
	}
	var samples []sim.MetricSample
	if sc.samples != nil {
		samples = sc.samples()
	}
	var steps []diffStep
	prev := map[string][]string{}
	s, err := sim.New(scn, st, sim.Options{Seed: 1, Samples: samples, OnStep: func(r sim.StepRecord) {
		d := diffStep{Running: map[string][]string{}}
		for _, f := range r.Firings {
			d.Firings = append(d.Firings, f.Rule+" "+f.Event.String())
		}
		for _, n := range r.Notifications {
			d.Notes = append(d.Notes, n.Text())
		}
		for id, reps := range r.Replicas {
			for _, rep := range reps {
				d.Running[string(id)] = append(d.Running[string(id)], replicaString(string(rep.Node), rep.GPUs, rep.MIG))
			}
		}
		d.evictions(prev)
		prev = d.Running
		steps = append(steps, d)
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.Run()
	return steps
}

// runDiffServer runs the script through a real in-process server.
func runDiffServer(t *testing.T, sc diffScript, fair bool) []diffStep {
	t.Helper()
	now := diffStart
	o := Options{RateLimit: -1, Clock: func() time.Time { return now }}
	if fair {
		o.Scheduling.FairShare.HalfLife = diffHalfLife
	}
	h := newHarness(t, sc.fleet, o)
	tenants := map[string]*client.Client{}
	for _, a := range sc.arrivals {
		if tenants[a.tenant] == nil {
			tenants[a.tenant] = h.tenant(a.tenant)
		}
	}
	var samples []sim.MetricSample
	if sc.samples != nil {
		samples = sc.samples()
	}
	// The simulator numbers jobs in arrival order (time, then script
	// order); the server's workloads carry the same names.
	order := make([]int, len(sc.arrivals))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(sc.arrivals[a].at - sc.arrivals[b].at) })
	seq := make([]int, len(sc.arrivals))
	for n, i := range order {
		seq[i] = n + 1
	}
	var steps []diffStep
	prev := map[string][]string{}
	seen := 0
	var lastEvent int64
	for m := 0; m < sc.minutes; m++ {
		now = diffStart.Add(time.Duration(m) * time.Minute)
		for i, a := range sc.arrivals {
			if a.at != now.Sub(diffStart) {
				continue
			}
			labels := map[string]string{"class": a.name}
			maps.Copy(labels, a.labels)
			spec := api.WorkloadSpec{Name: fmt.Sprintf("%s-%06d", a.name, seq[i]), Kind: a.kind, Priority: a.priority.String(), Preemptible: a.preemptible,
				GPUs: api.GPUs(a.gpus * 1000), Replicas: a.replicas, Flavors: []string{a.flavor}, Regions: a.regions,
				ExpectedRuntime: api.Duration(240 * time.Hour), MaxPrice: a.maxPrice, Labels: labels}
			if a.maxReplicas > 0 {
				spec.Replicas, spec.Elastic = 0, &api.ElasticSpec{Min: a.replicas, Max: a.maxReplicas, Step: max(a.step, 1)}
			}
			if a.mig != "" {
				spec.GPUs, spec.MIG = 0, a.mig
			}
			if _, err := tenants[a.tenant].Submit(h.ctx, a.tenant, spec); err != nil {
				t.Fatalf("minute %d: submit %s: %v", m, spec.Name, err)
			}
		}
		if m == 0 && sc.policy != "" {
			// Applied once the classes and services it names exist (the
			// server knows them from the workloads' labels).
			if err := h.s.ApplyPolicy(h.ctx, "diff-policy", "diff-policy.yaml", sc.policy); err != nil {
				t.Fatal(err)
			}
		}
		var push []api.MetricSample
		for _, x := range samples {
			if x.At == now.Sub(diffStart) {
				push = append(push, api.MetricSample{Metric: x.Metric.String(), Target: x.Target.String(), Value: x.Value})
			}
		}
		if len(push) > 0 {
			if _, err := h.admin.PushMetrics(h.ctx, api.MetricSamples{Samples: push}); err != nil {
				t.Fatal(err)
			}
		}
		h.s.TickPolicies(h.ctx)
		h.s.Cycle(h.ctx)
		d := diffStep{Running: map[string][]string{}}
		if sc.policy != "" {
			fs, err := h.admin.Firings(h.ctx, "diff-policy")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs[seen:] {
				d.Firings = append(d.Firings, f.Rule+" "+f.Event)
			}
			seen = len(fs)
		}
		evs, err := h.admin.Events(h.ctx, lastEvent, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Type == "PolicyNotification" {
				d.Notes = append(d.Notes, e.Message)
			}
			lastEvent = e.Seq
		}
		for name, c := range tenants {
			ws, err := c.Workloads(h.ctx, name, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				if w.Running == nil {
					continue
				}
				var nodes []string
				for _, r := range w.Running.Replicas {
					nodes = append(nodes, replicaString(r.Node, r.GPUs, r.MIG))
				}
				d.Running[w.Name] = nodes
			}
		}
		d.evictions(prev)
		prev = d.Running
		steps = append(steps, d)
	}
	return steps
}

// TestDifferentialSimServer: the simulator and the server do the same,
// step by step, under a policy file that uses every action, with and
// without fair share over time.
func TestDifferentialSimServer(t *testing.T) {
	t.Run("current-usage", func(t *testing.T) { diffSimServer(t, false) })
	t.Run("fair-share", func(t *testing.T) { diffSimServer(t, true) })
}

func diffSimServer(t *testing.T, fair bool) {
	steps := compareDiff(t, mainScript, fair)
	fired := map[string]bool{}
	evicted, notes := 0, 0
	for _, a := range steps {
		for _, f := range a.Firings {
			fired[f] = true
		}
		evicted += len(a.Evicted)
		notes += len(a.Notes)
	}
	// The script must exercise what it claims: every rule fires, those
	// whose condition clears revert, and some work is evicted.
	for _, r := range []string{"busy", "queued", "chat_slow", "evacuate"} {
		if !fired[r+" fired"] {
			t.Errorf("rule %s never fired; the script must exercise it", r)
		}
	}
	for _, r := range []string{"chat_slow", "evacuate"} {
		if !fired[r+" reverted"] {
			t.Errorf("rule %s never reverted; the script must exercise it", r)
		}
	}
	if evicted == 0 || notes == 0 {
		t.Errorf("%d evictions, %d notifications in the script; want both", evicted, notes)
	}
}

// compareDiff runs sc through the simulator and the server and fails the
// test at each step that differs; it returns the simulator's steps.
func compareDiff(t *testing.T, sc diffScript, fair bool) []diffStep {
	t.Helper()
	simSteps := runDiffSim(t, sc, fair)
	srvSteps := runDiffServer(t, sc, fair)
	if len(simSteps) != len(srvSteps) {
		t.Fatalf("%d simulator steps, %d server steps", len(simSteps), len(srvSteps))
	}
	diffs := 0
	for i := range simSteps {
		a, b := simSteps[i], srvSteps[i]
		if testing.Verbose() {
			t.Logf("minute %d: %s", i, a)
		}
		if a.String() != b.String() {
			diffs++
			if diffs <= 5 {
				t.Errorf("minute %d differs:\n  simulator: %s\n  server:    %s", i, a, b)
			}
		}
	}
	if diffs > 5 {
		t.Errorf("... %d steps differ in all", diffs)
	}
	return simSteps
}

// elasticFleet: four A100 machines; each tenant is guaranteed half.
const elasticFleet = `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
tenants:
  - name: contoso
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 16, limit: 32}
  - name: fabrikam
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 16, limit: 32}
`

// elasticScript: contoso's elastic serve (8 GPUs a replica, 1 to 4) grows
// into the idle fleet; fabrikam's gang within its guarantee makes it give
// growth back; more fabrikam work beyond its guarantee waits (serve's
// remaining growth is within contoso's guarantee), and a contoso job takes
// contoso's own growth.
var elasticScript = diffScript{fleet: elasticFleet, minutes: 20, arrivals: []arrival{
	{at: 0, name: "serve", tenant: "contoso", kind: "inference", priority: workload.PriorityNormal, gpus: 8, replicas: 1, maxReplicas: 4, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 5 * time.Minute, name: "train", tenant: "fabrikam", kind: "training", priority: workload.PriorityNormal, gpus: 8, replicas: 2, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 10 * time.Minute, name: "more", tenant: "fabrikam", kind: "batch", priority: workload.PriorityNormal, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 15 * time.Minute, name: "job", tenant: "contoso", kind: "batch", priority: workload.PriorityNormal, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
}}

// TestDifferentialElastic: elastic growth and shrink (issue 18) are the
// same, step by step, in the simulator and the server; the script must
// grow serve to its max and shrink it.
func TestDifferentialElastic(t *testing.T) {
	steps := compareDiff(t, elasticScript, false)
	sizes := map[int]bool{}
	for _, d := range steps {
		for name, nodes := range d.Running {
			if strings.HasPrefix(name, "serve-") {
				sizes[len(nodes)] = true
			}
		}
	}
	if !sizes[4] || !sizes[2] {
		t.Errorf("serve ran at sizes %v; the script must grow it to 4 and shrink it to 2", slices.Sorted(maps.Keys(sizes)))
	}
}

// migFleet: one machine with its eight A100s in MIG mode and one without.
const migFleet = `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-mig
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 1, labels: {mig: enabled}}]
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 1}]
tenants:
  - name: contoso
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 4, limit: 16}
  - name: fabrikam
    quota:
      - {flavor: A100-80G, region: eastus, limit: 16}
`

// migScript: MIG slices of three profiles packed on the MIG machine, an
// elastic MIG service growing into the free slices, a high-priority
// 7g.80gb pair that needs whole MIG GPUs (the service gives growth back),
// and whole-GPU work, which only the other machine takes.
var migScript = diffScript{fleet: migFleet, minutes: 12, arrivals: []arrival{
	{at: 0, name: "chat", tenant: "contoso", kind: "inference", priority: workload.PriorityNormal, mig: "1g.10gb", replicas: 3, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 0, name: "embed", tenant: "fabrikam", kind: "inference", priority: workload.PriorityNormal, preemptible: true, mig: "3g.40gb", replicas: 2, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: time.Minute, name: "serve", tenant: "contoso", kind: "inference", priority: workload.PriorityNormal, mig: "2g.20gb", replicas: 1, maxReplicas: 24, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 5 * time.Minute, name: "big", tenant: "fabrikam", kind: "inference", priority: workload.PriorityHigh, mig: "7g.80gb", replicas: 2, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 6 * time.Minute, name: "train", tenant: "fabrikam", kind: "training", priority: workload.PriorityNormal, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
}}

// TestDifferentialMIG: MIG placements (GPU and slice), an elastic MIG
// workload's growth and shrink, and whole-GPU work kept off MIG machines
// are the same, step by step, in the simulator and the server.
func TestDifferentialMIG(t *testing.T) {
	steps := compareDiff(t, migScript, false)
	last := steps[len(steps)-1].Running
	for name, reps := range last {
		for _, r := range reps {
			if strings.HasPrefix(name, "train-") == strings.Contains(r, "/") || strings.HasPrefix(name, "train-") == strings.HasPrefix(r, "eus-mig") {
				t.Errorf("%s runs at %s: MIG work only on MIG slices of the MIG machine, whole-GPU work only off it", name, r)
			}
		}
	}
	grew, shrank := false, false
	prev := 0
	for _, d := range steps {
		for name, reps := range d.Running {
			if strings.HasPrefix(name, "serve-") {
				grew = grew || len(reps) > 1
				shrank = shrank || len(reps) < prev
				prev = len(reps)
			}
		}
	}
	if !grew || !shrank || len(last) != 5 {
		t.Errorf("serve grew %v, shrank %v; %d running at the end, want all 5: the script must exercise growth, shrink and every profile", grew, shrank, len(last))
	}
}

// treeFleet: three A100 machines in eastus. Org internal is guaranteed two
// of them for its subtree; its member training one of those, research
// none of its own; the outsider batch one.
const treeFleet = `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 3}]
tenants:
  - name: internal
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 16}
  - name: training
    parent: internal
    quota: [{flavor: A100-80G, region: eastus, guaranteed: 8, limit: 24}]
  - name: research
    parent: internal
    quota: [{flavor: A100-80G, region: eastus, limit: 24}]
  - name: batch
    quota: [{flavor: A100-80G, region: eastus, guaranteed: 8, limit: 24}]
`

// treeScript: batch fills the fleet (one machine within its guarantee,
// two borrowed); research, with no guarantee of its own, reclaims a
// borrowed machine with what internal guarantees its subtree; training
// reclaims its own guarantee from batch's other borrowed machine, not
// from its sibling; a high-priority batch job then takes its own tenant's
// machine, not research's (lower priority and preemptible, but covered by
// internal's guarantee).
var treeScript = diffScript{fleet: treeFleet, minutes: 12, arrivals: []arrival{
	{at: 0, name: "b1", tenant: "batch", kind: "batch", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 0, name: "b2", tenant: "batch", kind: "batch", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 0, name: "b3", tenant: "batch", kind: "batch", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 3 * time.Minute, name: "r1", tenant: "research", kind: "training", priority: workload.PriorityNormal, preemptible: true, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 6 * time.Minute, name: "t1", tenant: "training", kind: "training", priority: workload.PriorityNormal, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
	{at: 9 * time.Minute, name: "b4", tenant: "batch", kind: "batch", priority: workload.PriorityHigh, gpus: 8, replicas: 1, flavor: "A100-80G", regions: []string{"eastus"}},
}}

// TestDifferentialTree: guarantees above the leaves (issue 18 point 1) —
// a child reclaiming its parent's subtree guarantee from an outsider, a
// sibling's work kept while the other sibling reclaims, an outsider's
// higher priority not taking what the subtree's guarantee covers — are the
// same, step by step, in the simulator and the server.
func TestDifferentialTree(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("fair-share=%v", fair), func(t *testing.T) {
			steps := compareDiff(t, treeScript, fair)
			last := steps[len(steps)-1]
			var running []string
			for name := range last.Running {
				running = append(running, strings.SplitN(name, "-", 2)[0])
			}
			slices.Sort(running)
			var evicted []string
			for m, d := range steps {
				for _, e := range d.Evicted {
					evicted = append(evicted, fmt.Sprintf("%s@%d", strings.SplitN(e, "-", 2)[0], m))
				}
			}
			// r1 and t1 each reclaim a borrowed machine from batch; b4
			// takes batch's own b1, never research's r1.
			want := []string{"b2@3", "b3@6", "b1@9"}
			if !slices.Equal(evicted, want) || !slices.Equal(running, []string{"b4", "r1", "t1"}) {
				t.Errorf("evicted %v, running at the end %v; want evicted %v, running [b4 r1 t1]", evicted, running, want)
			}
		})
	}
}
