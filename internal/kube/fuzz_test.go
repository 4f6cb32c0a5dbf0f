package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
)

// FuzzAnnotations feeds every annotation parser arbitrary values: each
// returns a value or an *AnnotationError naming its annotation, never
// panics, and what it accepts is within bounds.
func FuzzAnnotations(f *testing.F) {
	for _, s := range []string{"", "0", "1", "999", "1000", "-1", "250 ", "true", "false", "TRUE", "high", "spot",
		"H100-80G,A100-80G", "a,,b", "a,a", "0,1,2", "7,7", "99999999999999999999", "\x00", strings.Repeat("x,", 600)} {
		f.Add(s)
	}
	cat := fleet.Builtin()
	f.Fuzz(func(t *testing.T, v string) {
		check := func(key string, err error) {
			var ae *AnnotationError
			if err != nil && (!errors.As(err, &ae) || ae.Key != key || !errors.Is(err, ErrAnnotation)) {
				t.Fatalf("%s: %v is not an AnnotationError naming it", key, err)
			}
		}
		if m, err := ParseMilliGPU(v); err == nil && (m < 1 || m > 999) {
			t.Fatalf("milli %d accepted", m)
		} else {
			check(AnnotationMilliGPU, err)
		}
		_, err := ParsePriority(v)
		check(AnnotationPriority, err)
		_, err = ParsePreemptible(v)
		check(AnnotationPreemptible, err)
		l, err := ParseList(AnnotationRegions, v)
		check(AnnotationRegions, err)
		if err == nil && (len(l) == 0 || len(l) > maxListItems) {
			t.Fatalf("list %q accepted", l)
		}
		_, err = ParseFlavors(v, cat)
		check(AnnotationFlavors, err)
		g, err := ParseGPUIndices(v, 8)
		check(AnnotationGPUIndices, err)
		for _, i := range g {
			if i < 0 || i >= 8 {
				t.Fatalf("index %d accepted", i)
			}
		}
		if err == nil && FormatGPUIndices(g) == "" {
			t.Fatal("empty indices accepted")
		}
	})
}

// FuzzTenantSpec feeds ArbiterTenant specs with arbitrary GPU strings.
func FuzzTenantSpec(f *testing.F) {
	for _, s := range []string{"8", "0.5", "500m", "-1", "NaN", "1e300", "lots", ""} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, g, l string) {
		u := tenantObj("t", g, l)
		ten, err := ParseTenant(u)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("%v is not a SpecError", err)
			}
			return
		}
		if q := ten.Spec.Quota[0]; q.Guaranteed < 0 || q.Limit != nil && *q.Limit < 0 {
			t.Fatalf("negative quota accepted: %+v", q)
		}
	})
}

// FuzzPolicySource: any spec.source compiles or is refused with an error
// naming spec.source; none panics.
func FuzzPolicySource(f *testing.F) {
	f.Add("policies:\n  - name: r\n    when: {metric: utilization, of: cluster, above: 50%}\n    then: [{type: set_limit, target: class:dev, limit: 0}]\n")
	f.Add("policies: [")
	f.Add("")
	known := policy.Targets{Tenants: []string{"a"}, Open: []policy.TargetKind{policy.TargetClass, policy.TargetService}}
	f.Fuzz(func(t *testing.T, src string) {
		_, eng, err := compilePolicy(policyObj("p", src), known)
		if err == nil && eng == nil {
			t.Fatal("no engine and no error")
		}
		if err != nil && !strings.Contains(err.Error(), "spec.source") {
			t.Fatalf("error without the field: %v", err)
		}
	})
}
