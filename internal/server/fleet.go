package server

import (
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Fleet handlers: regions and the catalog's machine sizes.

func (s *Server) listRegions(w http.ResponseWriter, r *http.Request) error {
	wd, err := s.readWorld(r, false)
	if err != nil {
		return err
	}
	out := []api.Region{}
	idx := map[string]int{}
	for _, n := range wd.Fleet.Nodes {
		i, ok := idx[n.Region]
		if !ok {
			i = len(out)
			idx[n.Region] = i
			out = append(out, api.Region{Name: n.Region, Zones: []string{}})
		}
		reg := &out[i]
		reg.Nodes++
		reg.GPUs += n.GPUs
		if n.Zone != "" && !contains(reg.Zones, n.Zone) {
			reg.Zones = append(reg.Zones, n.Zone)
		}
	}
	return writeSlice(s, w, r, out)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (s *Server) listSKUs(w http.ResponseWriter, r *http.Request) error {
	cat := s.cat.Load()
	out := []api.SKU{}
	for _, k := range cat.SKUs {
		out = append(out, api.SKU{Name: string(k.Name), Model: string(k.Model), GPUs: k.GPUs, VCPUs: k.VCPUs, MemoryGiB: k.MemoryGiB, QuotaFamily: k.QuotaFamily})
	}
	return writeSlice(s, w, r, out)
}
