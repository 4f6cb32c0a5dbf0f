package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// TestAllowedPriorities: a tenant may not submit priority critical unless
// its allowed_priorities say so (the admin submitting for it neither); the
// refusal is 403 on field priority and lists what it may use; the admin
// changes the list; a parent's list caps its children.
func TestAllowedPriorities(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	ctx := h.ctx
	contoso := h.tenant("contoso")
	crit := spec("vm", 8, 1)
	crit.Priority = "critical"
	for _, submitter := range []struct {
		name string
		err  error
	}{
		{"tenant", func() error { _, err := contoso.Submit(ctx, "contoso", crit); return err }()},
		{"admin", func() error { _, err := h.admin.Submit(ctx, "contoso", crit); return err }()},
	} {
		var ae *api.Error
		if !asAPI(submitter.err, &ae) || ae.Status != 403 || ae.Field != "priority" || !strings.Contains(ae.Message, "may use: high, normal, low, spot") {
			t.Fatalf("%s submitting critical: %v, want 403 on priority listing the allowed classes", submitter.name, submitter.err)
		}
	}
	high := spec("batch", 8, 1)
	high.Priority = "high"
	if _, err := contoso.Submit(ctx, "contoso", high); err != nil {
		t.Fatalf("high is allowed by default: %v", err)
	}
	got, err := h.admin.Tenant(ctx, "contoso")
	if err != nil || !slices.Equal(got.AllowedPriorities, []string{"high", "normal", "low", "spot"}) {
		t.Fatalf("GET shows %v (%v), want the default list", got.AllowedPriorities, err)
	}
	// The admin grants critical; the tenant may not grant itself.
	if _, err := contoso.SetAllowedPriorities(ctx, "contoso", []string{"critical"}); apiCode(err) != api.CodeForbidden {
		t.Fatalf("tenant changing its own list: %v, want Forbidden", err)
	}
	if _, err := h.admin.SetAllowedPriorities(ctx, "contoso", []string{"critical", "normal"}); err != nil {
		t.Fatal(err)
	}
	if _, err := contoso.Submit(ctx, "contoso", crit); err != nil {
		t.Fatalf("critical after the admin allowed it: %v", err)
	}
	high.Name = "batch2"
	if _, err := contoso.Submit(ctx, "contoso", high); apiCode(err) != api.CodeForbidden {
		t.Fatalf("high after the list became critical, normal: %v, want Forbidden", err)
	}
	// customers caps its subtree: fabrikam asks for critical but its parent
	// allows only normal and spot.
	if _, err := h.admin.SetAllowedPriorities(ctx, "customers", []string{"normal", "spot"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.SetAllowedPriorities(ctx, "fabrikam", []string{"critical", "normal"}); err != nil {
		t.Fatal(err)
	}
	fab := h.tenant("fabrikam")
	if _, err := fab.Submit(ctx, "fabrikam", crit); apiCode(err) != api.CodeForbidden || !strings.Contains(err.Error(), "may use: normal") {
		t.Fatalf("fabrikam critical under customers' cap: %v", err)
	}
	// Bad lists name the field.
	for _, bad := range [][]string{{}, {"urgent"}, {"normal", ""}} {
		_, err := h.admin.SetAllowedPriorities(ctx, "contoso", bad)
		var ae *api.Error
		if !asAPI(err, &ae) || ae.Status != 400 || ae.Field != "allowed_priorities" {
			t.Errorf("list %q: %v, want 400 on allowed_priorities", bad, err)
		}
	}
	if _, err := h.admin.CreateTenant(ctx, api.Tenant{Name: "x", AllowedPriorities: []string{"urgent"}}); apiCode(err) != api.CodeInvalid {
		t.Errorf("create with an unknown class: %v", err)
	}
	vip, err := h.admin.CreateTenant(ctx, api.Tenant{Name: "vip", AllowedPriorities: []string{"spot", "critical"}})
	if err != nil || !slices.Equal(vip.AllowedPriorities, []string{"critical", "spot"}) {
		t.Errorf("create vip: %+v %v", vip, err)
	}
}

// TestSeedAllowedPriorities: a config's allowed_priorities reach the store.
func TestSeedAllowedPriorities(t *testing.T) {
	cfg := strings.Replace(quotaConfig, "  - name: lab\n", "  - name: lab\n    allowed_priorities: [critical, normal]\n", 1)
	h := newHarness(t, cfg, Options{})
	lab := h.tenant("lab")
	got, err := lab.Tenant(h.ctx, "lab")
	if err != nil || !slices.Equal(got.AllowedPriorities, []string{"critical", "normal"}) {
		t.Fatalf("lab: %+v %v", got, err)
	}
	w := api.WorkloadSpec{Name: "vm", GPUs: 8000, Priority: "critical", Flavors: []string{"H100-80G"}, Regions: []string{"eastus"}}
	if _, err := lab.Submit(h.ctx, "lab", w); err != nil {
		t.Fatalf("critical allowed by the config: %v", err)
	}
}

// FuzzPrioritiesIn: any list of names is accepted as known classes or
// refused with 400 on allowed_priorities, never panics, and what is
// accepted holds only known classes.
func FuzzPrioritiesIn(f *testing.F) {
	f.Add("critical,high")
	f.Add("")
	f.Add("normal,normal,spot")
	f.Add("urgent")
	f.Add(",,")
	f.Fuzz(func(t *testing.T, csv string) {
		names := strings.Split(csv, ",")
		got, err := prioritiesIn(names, true)
		if err != nil {
			var ae *api.Error
			if !asAPI(err, &ae) || ae.Status != 400 || ae.Field != "allowed_priorities" {
				t.Fatalf("%q: %v", csv, err)
			}
			return
		}
		if len(got) == 0 || len(got) > 5 {
			t.Fatalf("%q: accepted %v", csv, got)
		}
		for _, p := range got {
			if p.String() == "" || strings.HasPrefix(p.String(), "Priority(") {
				t.Fatalf("%q: unknown class %v accepted", csv, p)
			}
		}
	})
}
