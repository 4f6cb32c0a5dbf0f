package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// TestWorkloadShowPrintsPolicyEffects: after set_priority fired,
// `workload show` and `workload why` print the effective priority and
// which policy set it since when (show used to say "normal").
func TestWorkloadShowPrintsPolicyEffects(t *testing.T) {
	ctx := context.Background()
	s, url := seededServer(t, `
fleet:
  regions:
    - name: eastus
      zones: [{name: "1", blocks: [{name: b, nodes: [{sku: Standard_ND96amsr_A100_v4, count: 2}]}]}]
tenants:
  - name: acme
`)
	c := client.New(url, testAdmin)
	if _, err := c.Submit(ctx, "acme", api.WorkloadSpec{Name: "train", GPUs: 8000, Replicas: 1, Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}); err != nil {
		t.Fatal(err)
	}
	s.Cycle(ctx)
	src := `policies:
  - name: protect
    when: {metric: utilization, of: cluster, above: 1%}
    then: [{type: set_priority, target: tenant:acme, priority: high}]
`
	if _, err := c.ApplyPolicy(ctx, api.PolicyApply{Name: "customer_sla_protection", Source: src}); err != nil {
		t.Fatal(err)
	}
	s.TickPolicies(ctx)
	since := time.Now().UTC().Format("15:04")
	for _, args := range [][]string{{"workload", "show", "train"}, {"workload", "why", "train"}} {
		var out, errb bytes.Buffer
		if code := Main(append(args, "--tenant", "acme", "--server", url, "--token", testAdmin), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errb.String())
		}
		got := out.String()
		want := "priority high, set by customer_sla_protection (rule protect) since "
		if !strings.Contains(got, want) || !strings.Contains(got, "UTC") {
			t.Errorf("%v prints:\n%s\nwant a line with %q (about %s UTC)", args, got, want, since)
		}
		if args[1] == "show" && !strings.Contains(got, "high (policy)") {
			t.Errorf("workload show's table:\n%s\nwant the effective priority", got)
		}
	}
}
