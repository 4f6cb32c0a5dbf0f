package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

func TestLoadExample(t *testing.T) {
	c, err := Load("../../examples/schedule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Fleet.Nodes) != 52 || len(c.Workloads) != 12 {
		t.Errorf("nodes = %d, workloads = %d", len(c.Fleet.Nodes), len(c.Workloads))
	}
}

func TestErrorsNameFileLineField(t *testing.T) {
	src := `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
tenants:
  - name: a
    quota: [{flavor: H200-141G, region: westus9}]
reservations:
  - {name: r1, owner: nobody, region: eastus, sku: Standard_ND96isr_H100_v5, count: 3}
workloads:
  - name: w1
    tenant: ghost
    gpus: 16
    replicas: 1
    flavors: [H100-80G]
    regions: [eastus]
    priority: urgent
`
	// The value that does not decode and the problems of the rest, all in
	// one run.
	_, err := Parse("bad.yaml", []byte(src))
	for _, want := range []string{
		`bad.yaml:21:15: workloads[0].priority: unknown priority class "urgent"`,
		`bad.yaml:11:13: tenants[0].quota[0].region: region "westus9" is not in the fleet`,
		`bad.yaml:13:5: reservations[0].owner: unknown tenant "nobody"`,
		`bad.yaml:13:5: reservations[0]: tenancy: insufficient capacity for reservation "r1": 3 × Standard_ND96isr_H100_v5 wanted in eastus, 2 available`,
		`bad.yaml:15:5: workloads[0].tenant: unknown tenant "ghost"`,
		`bad.yaml:15:5: workloads[0].gpus: 16 GPUs per replica, but the largest machine of [H100-80G] has 8`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestEveryProblemInOneRun: problems in the fleet, the tenants, the
// workloads and values that do not decode are reported together, each
// once; with the fleet incomplete, nothing is reported about the nodes it
// lacks.
func TestEveryProblemInOneRun(t *testing.T) {
	src := `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
            - name: b2
              nodes: [{sku: Standard_NoSuchSKU, count: 2}]
            - name: b3
              nodes: [{sku: Standard_ND96isr_H100_v5, count: two}]
tenants:
  - name: a
    parent: nobody
  - name: b
    qouta: [{flavor: H100-80G, guaranteed: 8}]
partitions:
  - {name: p, tenant: a, blocks: [b2]}
workloads:
  - name: w1
    tenant: a
    gpus: 8
    flavors: [H100-80G]
    regions: [eastus]
    expected_runtime: 5 minutes
  - name: w1
    tenant: a
    gpus: 8
    flavors: [H100-80G]
    regions: [eastus]
`
	_, err := Parse("bad.yaml", []byte(src))
	want := []string{
		`bad.yaml:10:23: fleet.regions[0].zones[0].blocks[1].nodes[0].sku: unknown SKU "Standard_NoSuchSKU"`,
		`bad.yaml:12:62: fleet.regions[0].zones[0].blocks[2].nodes[0].count: want a whole number, got "two"`,
		`bad.yaml:14:5: tenants[0].parent: unknown parent tenant "nobody"`,
		`bad.yaml:17:5: tenants[1].qouta: unknown field (did you mean "quota"?)`,
		`bad.yaml:26:23: workloads[0].expected_runtime: invalid duration "5 minutes"`,
		`bad.yaml:27:5: workloads[1].name: workload "w1" defined twice`,
	}
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

func TestRunningConflict(t *testing.T) {
	data, err := os.ReadFile("../../examples/schedule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Put contoso-vm1 on the GPUs research-base already holds.
	bad := strings.Replace(string(data), "{node: eus-ib2-n0004,", "{node: eus-ib2-n0000,", 1)
	_, err = Parse("x.yaml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "GPU 0 of node eus-ib2-n0000 is already allocated") {
		t.Errorf("double allocation not caught: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../../examples/schedule.yaml"); err == nil {
		f.Add(string(data))
	}
	f.Add("fleet: {regions: [{name: e, zones: [{name: z, blocks: [{name: b, nodes: [{sku: Standard_NC4as_T4_v3, count: 1}]}]}]}]}\ntenants: [{name: t}]\nworkloads: [{name: w, tenant: t, gpus: 500m, replicas: 1, flavors: [T4], regions: [e]}]\n")
	if data, err := os.ReadFile("../../examples/backfill.yaml"); err == nil {
		f.Add(string(data)) // options.planning, running work with expected runtimes
	}
	f.Fuzz(func(t *testing.T, src string) {
		c, err := Parse("fuzz.yaml", []byte(src))
		if err != nil {
			return
		}
		if len(c.Fleet.Nodes) > 10_000 || len(c.Workloads) > 1000 {
			t.Skip()
		}
		// A config that loads must schedule without panicking.
		sched.Schedule(c.Input())
	})
}

// TestNamesFollowTheAPIRule (issue 12, item 7): the config applies the
// API's name rule, so a tenant "a/b" — whose workload keys "a/b/w" the
// tenant "a" could reach — is rejected, with every bad name reported at
// its position.
func TestNamesFollowTheAPIRule(t *testing.T) {
	src := `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
            - name: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 1}]
tenants:
  - name: a
  - name: a/b
    parent: a
  - name: " c"
reservations:
  - {name: "r/1", owner: a, region: eastus, sku: Standard_ND96isr_H100_v5, count: 1}
partitions:
  - {name: "p 1", tenant: a, nodes: [b1-n0001]}
workloads:
  - name: w.1
    tenant: a/b
    gpus: 8
    replicas: 1
    flavors: [H100-80G]
    regions: [eastus]
`
	_, err := Parse("names.yaml", []byte(src))
	if err == nil {
		t.Fatal("invalid names accepted")
	}
	for _, want := range []string{
		`names.yaml:9:15: fleet.regions[0].zones[0].blocks[1].name: block "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" makes node IDs such as`,
		`names.yaml:13:5: tenants[1].name: invalid name "a/b"`,
		`names.yaml:15:5: tenants[2].name: invalid name " c"`,
		`names.yaml:17:5: reservations[0].name: invalid name "r/1"`,
		`names.yaml:19:5: partitions[0].name: invalid name "p 1"`,
		`names.yaml:21:5: workloads[0].tenant: invalid name "a/b"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"w.1"`) {
		t.Errorf("a valid workload name reported:\n%v", err)
	}
}

// TestExamplesFollowTheNameRule: every example config still loads.
func TestExamplesFollowTheNameRule(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), "fleet:") {
			continue
		}
		if _, err := Parse(f, data); err != nil && strings.Contains(err.Error(), "invalid name") {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestWorkloadDefaultsAsTheAPI: a config workload that leaves out priority
// and replicas gets the API's defaults (normal, 1), not spot and an error.
func TestWorkloadDefaultsAsTheAPI(t *testing.T) {
	src := `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 1}]
tenants:
  - name: a
workloads:
  - {name: plain, tenant: a, gpus: 1, flavors: [H100-80G], regions: [eastus]}
  - {name: spot, tenant: a, gpus: 1, priority: spot, replicas: 2, flavors: [H100-80G], regions: [eastus]}
`
	c, err := Parse("d.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	plain, spot := c.Workloads[0], c.Workloads[1]
	if plain.Priority != workload.DefaultPriority || plain.Replicas != workload.DefaultReplicas {
		t.Errorf("plain: priority %v, replicas %d; want %v, %d", plain.Priority, plain.Replicas, workload.DefaultPriority, workload.DefaultReplicas)
	}
	if spot.Priority != workload.PrioritySpot || spot.Replicas != 2 {
		t.Errorf("spot written: priority %v, replicas %d", spot.Priority, spot.Replicas)
	}
}

// TestAllowedPriorities: a config workload above its tenant's allowed
// classes is reported with its position; a list of unknown classes too.
func TestAllowedPriorities(t *testing.T) {
	src := `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 1}]
tenants:
  - name: plain
  - name: vip
    allowed_priorities: [critical, normal]
workloads:
  - {name: w1, tenant: plain, priority: critical, gpus: 1, flavors: [H100-80G], regions: [eastus]}
  - {name: w2, tenant: vip, priority: critical, gpus: 1, flavors: [H100-80G], regions: [eastus]}
  - {name: w3, tenant: vip, priority: high, gpus: 1, flavors: [H100-80G], regions: [eastus]}
`
	_, err := Parse("p.yaml", []byte(src))
	for _, want := range []string{
		`p.yaml:14:5: workloads[0].priority: priority class not allowed: tenant "plain" may not use priority critical (allowed: high, normal, low, spot)`,
		`p.yaml:16:5: workloads[2].priority: priority class not allowed: tenant "vip" may not use priority high (allowed: critical, normal)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "workloads[1]") {
		t.Errorf("vip may use critical: %v", err)
	}
	_, err = Parse("p.yaml", []byte(strings.Replace(src, "[critical, normal]", "[critical, urgent]", 1)))
	if want := `p.yaml:12:36: tenants[1].allowed_priorities[1]: unknown priority class "urgent"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error lacks %q:\n%v", want, err)
	}
}

func TestLimitsSection(t *testing.T) {
	c, err := Parse("l.yaml", []byte("limits:\n  workloads_queued: 5\n  env_bytes: 1024\n  tenants:\n    contoso: {reservations: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := c.File.Limits.WithDefaults()
	if l.WorkloadsQueued != 5 || l.EnvBytes != 1024 || l.Reservations != DefaultLimits.Reservations || l.Tenants["contoso"].Reservations != 3 {
		t.Fatalf("limits %+v", l)
	}
	if _, err := Parse("l.yaml", []byte("limits:\n  workloads_queued: -1\n")); err == nil || !strings.Contains(err.Error(), "limits.workloads_queued") {
		t.Fatalf("negative limit: %v", err)
	}
	if _, err := Parse("l.yaml", []byte("limits:\n  workloads_queud: 1\n")); err == nil {
		t.Fatal("a misspelt limit was accepted")
	}
}

// TestEveryFleetProblem (issue 13): the config reports every way a
// workload does not fit the fleet, each with file:line and its field path,
// through the same check as the submission API (workload.CheckFleet).
func TestEveryFleetProblem(t *testing.T) {
	src := `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 1}]
tenants:
  - name: a
workloads:
  - name: w1
    tenant: a
    gpus: 16
    flavors: [H100-80G, B300]
    regions: [westus9, eastus]
`
	_, err := Parse("bad.yaml", []byte(src))
	for _, want := range []string{
		`bad.yaml:12:5: workloads[0].flavors[1]: unknown GPU model "B300"`,
		`bad.yaml:12:5: workloads[0].regions[0]: region "westus9" is not in the fleet (regions: [eastus])`,
		`bad.yaml:12:5: workloads[0].gpus: 16 GPUs per replica, but the largest machine of [H100-80G B300] has 8`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
