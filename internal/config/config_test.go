package config

import (
	"os"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/sched"
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
	_, err := Parse("bad.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`bad.yaml:21:15: workloads[0].priority: unknown priority class "urgent"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// Fix the syntax-level problem; the semantic ones are all reported.
	_, err = Parse("bad.yaml", []byte(strings.Replace(src, "urgent", "high", 1)))
	for _, want := range []string{
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
