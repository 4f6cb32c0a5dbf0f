package server

import (
	"maps"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
)

// interner makes the cached workloads share one copy of each equal tenant
// name, flavor, region and pool list and label set: a queue of 200,000
// workloads has a few hundred of each, and the cycle's order reads them
// for every queued workload (shared copies stay in the CPU's cache, and
// equal strings compare by pointer). The cache's objects are never
// changed (liveCache.live), so sharing them is safe; lists are clipped,
// so an append copies them.
//
// Its tables keep what they saw until the cache's next full read starts a
// new interner, so values of workloads gone since are kept at most that
// long (fullReadEvery).
type interner struct {
	strs   map[string]string
	models map[string][]fleet.ModelID
	lists  map[string][]string
	labels map[string]map[string]string
	key    strings.Builder
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, models: map[string][]fleet.ModelID{},
		lists: map[string][]string{}, labels: map[string]map[string]string{}}
}

// workload interns w's tenant, flavors, regions, pools and labels in
// place; w must be the caller's own (not yet shared).
func (in *interner) workload(w *store.Workload) {
	w.Tenant = in.str(w.Tenant)
	s := &w.Spec
	s.Tenant = in.str(s.Tenant)
	s.Flavors = in.modelList(s.Flavors)
	s.Regions = in.list(s.Regions)
	s.Pools = in.list(s.Pools)
	s.Labels = in.labelSet(s.Labels)
}

func (in *interner) str(x string) string {
	if x == "" {
		return ""
	}
	if c, ok := in.strs[x]; ok {
		return c
	}
	in.strs[x] = x
	return x
}

// listKey joins n strings with NUL; lists that join alike but differ
// (a NUL in a name) are told apart by comparing on a hit.
func (in *interner) listKey(n int, at func(int) string) string {
	in.key.Reset()
	for i := range n {
		if i > 0 {
			in.key.WriteByte(0)
		}
		in.key.WriteString(at(i))
	}
	return in.key.String()
}

func (in *interner) modelList(xs []fleet.ModelID) []fleet.ModelID {
	if len(xs) == 0 {
		return xs
	}
	k := in.listKey(len(xs), func(i int) string { return string(xs[i]) })
	if c, ok := in.models[k]; ok && slices.Equal(c, xs) {
		return c
	}
	c := make([]fleet.ModelID, len(xs))
	for i, x := range xs {
		c[i] = fleet.ModelID(in.str(string(x)))
	}
	in.models[k] = c
	return c
}

func (in *interner) list(xs []string) []string {
	if len(xs) == 0 {
		return xs
	}
	k := in.listKey(len(xs), func(i int) string { return xs[i] })
	if c, ok := in.lists[k]; ok && slices.Equal(c, xs) {
		return c
	}
	c := make([]string, len(xs))
	for i, x := range xs {
		c[i] = in.str(x)
	}
	in.lists[k] = c
	return c
}

func (in *interner) labelSet(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := slices.Sorted(maps.Keys(m))
	in.key.Reset()
	for _, k := range keys {
		in.key.WriteString(k)
		in.key.WriteByte(0)
		in.key.WriteString(m[k])
		in.key.WriteByte(0)
	}
	k := in.key.String()
	if c, ok := in.labels[k]; ok && maps.Equal(c, m) {
		return c
	}
	c := make(map[string]string, len(m))
	for _, k := range keys {
		c[in.str(k)] = in.str(m[k])
	}
	in.labels[k] = c
	return c
}
