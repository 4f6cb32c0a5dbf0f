package sched

import (
	"reflect"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestAlikeCoversSpec: the repeat memo may reuse a decision only between
// workloads that agree on every field the core reads. Each field of
// workload.Spec is either compared by alike (changing it alone makes two
// workloads unalike) or listed here as never read for a pending workload;
// a new field fails this test until it is classified.
func TestAlikeCoversSpec(t *testing.T) {
	notRead := map[string]bool{
		"Name": true, "Kind": true, "CheckpointInterval": true,
		"Labels":  true,
		"Elastic": true, // a pending elastic workload is placed as Replicas (its min); growth is decided for running work only
		// GracePeriod is read: ExitTime decides who may borrow reserved capacity;
		// ExpectedRuntime too: it decides who may use an upcoming reservation's machines
	}
	base := workload.Workload{Spec: workload.Spec{
		Name: "a", Tenant: "t", Priority: workload.PriorityNormal, GPUs: resource.GPUs(1), Replicas: 1,
		Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}, Pools: []string{"p"},
	}}
	typ := reflect.TypeOf(base.Spec)
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		b := base
		b.Flavors = append([]fleet.ModelID(nil), base.Flavors...)
		b.Regions = append([]string(nil), base.Regions...)
		b.Pools = append([]string(nil), base.Pools...)
		v := reflect.ValueOf(&b.Spec).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Float64:
			v.SetFloat(v.Float() + 1)
		case reflect.Slice:
			v.Set(reflect.Append(v, v.Index(0)))
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]string{"k": "v"}))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
		}
		if got := alike(&base, &b); got != notRead[f.Name] {
			if notRead[f.Name] {
				t.Errorf("%s is listed as not read, but alike compares it", f.Name)
			} else {
				t.Errorf("changing %s alone leaves the workloads alike: add it to alike and repeatKey, or list it as not read", f.Name)
			}
		}
	}
	// The key must agree with alike: alike workloads have equal keys.
	c := base
	c.Name, c.SubmittedAt = "c", time.Unix(1, 0)
	if !alike(&base, &c) || repeatKeyOf(&base) != repeatKeyOf(&c) {
		t.Error("workloads differing in name and submission time are not alike")
	}
}
