package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestGuaranteeNamesItsEntry: a reallocate guarantee must name the quota
// entry it raises (tenant(s), one flavor, at most one region); the loader
// refuses it otherwise, at the guarantee's position.
func TestGuaranteeNamesItsEntry(t *testing.T) {
	for _, tc := range []struct {
		resources string
		guarantee string
		want      string // "" = accepted
	}{
		{"[tenant:acme, flavor:H100-80G]", "guarantee: 8", ""},
		{"[tenant:acme, flavor:H100-80G, region:eastus]", "guarantee: 8", ""},
		{"[pool:inference_gpus, research, flavor:H100-80G]", "guarantee: 8", ""},
		{"[pool:inference_gpus]", "guarantee: 8", "test.yaml:7:20: policies[0].then[0].guarantee: a guarantee raises a tenant's quota entry"},
		{"[tenant:acme]", "guarantee: 8", "policies[0].then[0].guarantee"},
		{"[tenant:acme, flavor:H100-80G, region:eastus, region:westeurope]", "guarantee: 8", "policies[0].then[0].guarantee"},
		{"[tenant:acme, flavor:H100-80G]", "priority: high", "policies[0].then[0].resources: a flavor or region in resources names the quota entry of a guarantee"},
	} {
		src := `policies:
  - name: r
    when: {metric: utilization, above: 50%}
    then:
      - type: reallocate
        resources: ` + tc.resources + `
        ` + tc.guarantee + `
`
		p, err := Load("test.yaml", []byte(src))
		if err == nil {
			err = p.Resolve(known)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v", tc.resources, tc.guarantee, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: got %v, want an error containing %q", tc.resources, tc.guarantee, err, tc.want)
		}
	}
}

// TestUnmeasuredMetricRefused: a condition on a metric × target pair that
// no side measures (utilization of a class) is refused at its position,
// instead of never firing.
func TestUnmeasuredMetricRefused(t *testing.T) {
	src := "policies:\n  - name: r\n    when: {metric: utilization, of: class:inference, above: 50%}\n    then:\n      - {type: notify, message: hi}\n"
	_, err := Load("test.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "test.yaml:3:37: policies[0].when.of: utilization is not measured on a class") {
		t.Errorf("got %v, want a positioned refusal", err)
	}
}
