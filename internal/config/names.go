package config

import (
	"fmt"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// checkNames applies the API's name rule (package names) to every name
// the config defines: regions, zones, blocks, tenants and their parents,
// reservations, partitions and workloads (and their tenants). A tenant
// "a/b" would otherwise share a key prefix with tenant "a".
func checkNames(f *File, errs *yamlfile.Errors) {
	bad := func(pos yamlfile.Pos, field, n string) {
		if !names.Valid(n) {
			errs.Add(pos, field, "invalid name %q: %s", n, names.Rule)
		}
	}
	for ri, r := range f.Fleet.Regions {
		rf := fmt.Sprintf("fleet.regions[%d]", ri)
		bad(r.Pos, rf+".name", r.Name)
		for zi, z := range r.Zones {
			zf := fmt.Sprintf("%s.zones[%d]", rf, zi)
			if z.Name != "" {
				bad(z.Pos, zf+".name", z.Name)
			}
			for bi, b := range z.Blocks {
				bad(b.Pos, fmt.Sprintf("%s.blocks[%d].name", zf, bi), string(b.Name))
			}
		}
	}
	for ti, t := range f.Tenants {
		bad(t.Pos, fmt.Sprintf("tenants[%d].name", ti), t.Name)
		if t.Parent != "" {
			bad(t.Pos, fmt.Sprintf("tenants[%d].parent", ti), t.Parent)
		}
	}
	for ri, r := range f.Reservations {
		if r.Name != "" { // an empty one is reported with the reservations
			bad(r.Pos, fmt.Sprintf("reservations[%d].name", ri), r.Name)
		}
	}
	for pi, p := range f.Partitions {
		bad(p.Pos, fmt.Sprintf("partitions[%d].name", pi), p.Name)
	}
	for wi, w := range f.Workloads {
		if w.Name != "" { // an empty one is reported by the spec's checks
			bad(w.Pos, fmt.Sprintf("workloads[%d].name", wi), string(w.Name))
		}
		if w.Tenant != "" {
			bad(w.Pos, fmt.Sprintf("workloads[%d].tenant", wi), w.Tenant)
		}
	}
}

// checkNodeIDs applies the rule to the node IDs the fleet derives from
// its blocks' names (a long block name makes IDs too long).
func checkNodeIDs(f *File, fl *fleet.Fleet, errs *yamlfile.Errors) {
	at := map[fleet.BlockID]yamlfile.Pos{}
	field := map[fleet.BlockID]string{}
	for ri, r := range f.Fleet.Regions {
		for zi, z := range r.Zones {
			for bi, b := range z.Blocks {
				at[b.Name], field[b.Name] = b.Pos, fmt.Sprintf("fleet.regions[%d].zones[%d].blocks[%d].name", ri, zi, bi)
			}
		}
	}
	reported := map[fleet.BlockID]bool{}
	for _, n := range fl.Nodes {
		if names.Valid(string(n.ID)) || reported[n.Block] || !names.Valid(string(n.Block)) {
			continue
		}
		reported[n.Block] = true
		errs.Add(at[n.Block], field[n.Block], "block %q makes node IDs such as %q, longer than %d characters; shorten it", n.Block, n.ID, names.MaxLen)
	}
}
