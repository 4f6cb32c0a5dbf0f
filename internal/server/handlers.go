package server

import (
	"fmt"
	"math"
	"net/http"
	"sort"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

func (s *Server) apiRoutes() []apiRoute {
	return append([]apiRoute{
		{"GET /v1/whoami", s.whoami},
		{"GET /v1/regions", s.listRegions},
		{"GET /v1/skus", s.listSKUs},
		{"GET /v1/nodes", s.listNodes},
		{"POST /v1/nodes", s.registerNode},
		{"GET /v1/nodes/{id}", s.getNode},
		{"PATCH /v1/nodes/{id}", s.updateNode},
		{"DELETE /v1/nodes/{id}", s.deleteNode},
		{"GET /v1/tenants", s.listTenants},
		{"POST /v1/tenants", s.createTenant},
		{"GET /v1/tenants/{tenant}", s.getTenant},
		{"DELETE /v1/tenants/{tenant}", s.deleteTenant},
		{"PUT /v1/tenants/{tenant}/quotas", s.setQuotas},
		{"PUT /v1/tenants/{tenant}/allowed-priorities", s.setAllowedPriorities},
		{"POST /v1/tenants/{tenant}/tokens", s.createToken},
		{"GET /v1/tenants/{tenant}/usage", s.tenantUsage},
		{"GET /v1/usage", s.allUsage},
		{"GET /v1/tenants/{tenant}/reservations", s.listReservations},
		{"POST /v1/tenants/{tenant}/reservations", s.createReservation},
		{"GET /v1/tenants/{tenant}/reservations/{name}", s.getReservation},
		{"PATCH /v1/tenants/{tenant}/reservations/{name}", s.resizeReservation},
		{"DELETE /v1/tenants/{tenant}/reservations/{name}", s.deleteReservation},
		{"GET /v1/workloads", s.listAllWorkloads},
		{"GET /v1/tenants/{tenant}/workloads", s.listWorkloads},
		{"POST /v1/tenants/{tenant}/workloads", s.submitWorkload},
		{"GET /v1/tenants/{tenant}/workloads/{name}", s.getWorkload},
		{"POST /v1/tenants/{tenant}/workloads/{name}/cancel", s.cancelWorkload},
		{"GET /v1/tenants/{tenant}/workloads/{name}/why", s.whyWorkload},
		{"GET /v1/policies", s.listPolicies},
		{"POST /v1/policies", s.applyPolicy},
		{"GET /v1/policies/{name}", s.getPolicy},
		{"DELETE /v1/policies/{name}", s.deletePolicy},
		{"GET /v1/policies/{name}/firings", s.listFirings},
		{"POST /v1/metrics", s.pushMetrics},
		{"GET /v1/events", s.events},
		{"GET /v1/alerts", s.listAlerts},
		{"PUT /v1/alerts", s.applyAlerts},
		{"GET /v1/partitions", s.listPartitions},
		{"PUT /v1/partitions/{name}", s.setPartition},
		{"DELETE /v1/partitions/{name}", s.deletePartition},
	}, append(append(s.agentRoutes(), s.tokenRoutes()...), s.spotRoutes()...)...)
}

// validName is the one name rule of the API and the config files (see
// package names).
func validName(n string) bool { return names.Valid(n) }

func badName(field, n string) *api.Error {
	return apiErr(http.StatusBadRequest, api.CodeInvalid, field, "invalid name %q: %s", n, names.Rule)
}

func requireAdmin(r *http.Request) error {
	if !who(r).admin {
		return errForbidden
	}
	return nil
}

// scope returns the path's tenant when the caller may see it. Another
// tenant's name answers 404, exactly as a tenant that does not exist.
func (s *Server) scope(r *http.Request) (string, error) {
	t := r.PathValue("tenant")
	p := who(r)
	if !p.admin && t != p.tenant {
		return "", notFound("tenant", t)
	}
	return t, nil
}

// tenantExists is checked inside transactions (admin paths may name any).
func tenantExists(tx store.ReadTx, t string) error {
	if _, ok := tx.GetRaw(store.KindTenant, t); !ok {
		return notFound("tenant", t)
	}
	return nil
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	p := who(r)
	writeJSON(w, http.StatusOK, api.WhoAmI{Admin: p.admin, Role: p.role, TokenID: p.id, Tenant: p.tenant, Node: p.node})
	return nil
}

// readWorld loads a world in a read transaction.
func (s *Server) readWorld(r *http.Request, withWorkloads bool) (*world, error) {
	var w *world
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		w, err = loadWorldWith(tx, s.cat.Load(), withWorkloads, &s.live)
		return err
	})
	return w, err
}

// ---- fleet ----

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

func (s *Server) nodesOut(wd *world) []api.Node {
	alloc := map[fleet.NodeID]resource.MilliGPU{}
	for _, x := range wd.Workloads {
		if x.Running == nil {
			continue
		}
		for _, rep := range x.Running.Replicas {
			alloc[rep.Node] = alloc[rep.Node].Add(replicaGPUs(rep.Milli, len(rep.GPUs), x.Spec.GPUs))
		}
	}
	resOf := map[fleet.NodeID]string{}
	for _, r := range wd.Reservations {
		for _, n := range r.Nodes {
			resOf[n] = r.Key()
		}
	}
	out := []api.Node{}
	for _, n := range wd.Nodes {
		o := api.Node{ID: string(n.ID), Region: n.Region, Zone: n.Zone, Block: string(n.Block), SKU: string(n.SKU),
			Down: n.Down || n.Drained, Drained: n.Drained, Labels: n.Labels, Allocated: api.GPUs(alloc[n.ID]), Reservation: resOf[n.ID]}
		if sku, ok := wd.Catalog.SKU(n.SKU); ok {
			o.Model, o.GPUs = string(sku.Model), sku.GPUs
		}
		out = append(out, o)
	}
	return out
}

// replicaGPUs is what one replica holds: milli per GPU × GPUs.
func replicaGPUs(milli resource.MilliGPU, n int, perReplica resource.MilliGPU) resource.MilliGPU {
	if milli <= 0 {
		milli = min(perReplica, resource.PerGPU)
	}
	return milli.Mul(n)
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) error {
	if err := requireAdmin(r); err != nil {
		return err
	}
	wd, err := s.readWorld(r, true)
	if err != nil {
		return err
	}
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	reg := r.URL.Query().Get("region")
	for i, n := range s.nodesOut(wd) { // in registration order, as wd.Nodes
		key := store.RevKey(wd.Nodes[i].Seq) + "/" + n.ID
		if pg.skip(key) || (reg != "" && n.Region != reg) {
			continue
		}
		if !pg.add(key, n) {
			break
		}
	}
	pg.write(w)
	return nil
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) error {
	if err := requireAdmin(r); err != nil {
		return err
	}
	wd, err := s.readWorld(r, true)
	if err != nil {
		return err
	}
	for _, n := range s.nodesOut(wd) {
		if n.ID == r.PathValue("id") {
			writeJSON(w, http.StatusOK, n)
			return nil
		}
	}
	return notFound("node", r.PathValue("id"))
}

func (s *Server) registerNode(w http.ResponseWriter, r *http.Request) error {
	if p := who(r); !p.admin && p.node == "" {
		return errForbidden
	}
	var req api.NodeRegistration
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := requireNode(r, req.ID); err != nil {
		return err
	}
	switch {
	case !validName(req.ID):
		return badName("id", req.ID)
	case !validName(req.Region):
		return badName("region", req.Region)
	case !validName(req.Block):
		return badName("block", req.Block)
	case req.Zone != "" && !validName(req.Zone):
		return badName("zone", req.Zone)
	}
	if _, ok := s.cat.Load().SKU(fleet.SKUName(req.SKU)); !ok {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "sku", "unknown SKU %q (see GET /v1/skus)", req.SKU)
	}
	if err := s.checkLabels("labels", req.Labels); err != nil {
		return err
	}
	n := &store.Node{ID: fleet.NodeID(req.ID), Region: req.Region, Zone: req.Zone, Block: fleet.BlockID(req.Block), SKU: fleet.SKUName(req.SKU), Labels: req.Labels, Down: req.Down}
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		n.Seq = tx.Revision() + 1
		if err := store.Put(tx, n, store.MustNotExist); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: "NodeRegistered", Object: "nodes/" + req.ID})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusCreated, api.Node{ID: req.ID, Region: req.Region, Zone: req.Zone, Block: req.Block, SKU: req.SKU, Labels: req.Labels, Down: req.Down})
	return nil
}

// ---- tenants ----

func tenantOut(t *store.Tenant) api.Tenant {
	o := api.Tenant{Name: t.Name, Parent: t.Parent, Revision: t.Meta.Revision, AllowedPriorities: tenancy.AllowedSet(t.AllowedPriorities).Names()}
	for _, q := range t.Quotas {
		aq := api.Quota{Flavor: string(q.Flavor), Region: q.Region, Guaranteed: api.GPUs(q.Guaranteed), Weight: q.Weight, Priority: q.Priority}
		if q.Limit != nil {
			l := api.GPUs(*q.Limit)
			aq.Limit = &l
		}
		if q.Lendable != nil {
			l := api.GPUs(*q.Lendable)
			aq.Lendable = &l
		}
		o.Quotas = append(o.Quotas, aq)
	}
	return o
}

// quotasIn validates quota entries and converts them.
func (s *Server) quotasIn(qs []api.Quota, prefix string) ([]store.Quota, error) {
	cat := s.cat.Load()
	seen := map[tenancy.Key]bool{}
	var out []store.Quota
	if len(qs) > 256 {
		return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, prefix, "at most 256 quota entries")
	}
	for i, q := range qs {
		f := fmt.Sprintf("%s[%d]", prefix, i)
		if _, ok := cat.Model(fleet.ModelID(q.Flavor)); !ok {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".flavor", "unknown GPU model %q (known: %v)", q.Flavor, cat.ModelNames())
		}
		if q.Region != "" && !validName(q.Region) {
			return nil, badName(f+".region", q.Region)
		}
		k := tenancy.Key{Model: fleet.ModelID(q.Flavor), Region: q.Region}
		if seen[k] {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f, "second quota entry for %s", k)
		}
		seen[k] = true
		sq := store.Quota{Flavor: k.Model, Region: q.Region, Guaranteed: resource.MilliGPU(q.Guaranteed), Weight: q.Weight, Priority: q.Priority}
		if q.Limit != nil {
			l := resource.MilliGPU(*q.Limit)
			if l < sq.Guaranteed {
				return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".limit", "limit %v is below guaranteed %v", l, sq.Guaranteed)
			}
			sq.Limit = &l
		}
		if q.Lendable != nil {
			l := resource.MilliGPU(*q.Lendable)
			if l > sq.Guaranteed {
				return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".lendable", "lendable %v is more than guaranteed %v", l, sq.Guaranteed)
			}
			sq.Lendable = &l
		}
		if q.Weight < 0 || q.Weight > 1e6 || q.Weight != q.Weight {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".weight", "weight must be between 0 and 1000000")
		}
		if q.Priority < -1_000_000 || q.Priority > 1_000_000 {
			return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, f+".priority", "priority must be between -1000000 and 1000000, got %d", q.Priority)
		}
		out = append(out, sq)
	}
	return out, nil
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) error {
	p := who(r)
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		if p.admin {
			return scanPage(tx, pg, "", func(t *store.Tenant) (any, bool) { return tenantOut(t), true })
		}
		// A tenant reads its own object, not the list of everyone's.
		t, err := store.Get[store.Tenant](tx, p.tenant)
		if err == nil && p.tenant != "" && !pg.skip(t.Name) {
			pg.add(t.Name, tenantOut(t))
		}
		return nil
	})
	if err != nil {
		return err
	}
	pg.write(w)
	return nil
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	name, err := s.scope(r)
	if err != nil {
		return err
	}
	var t *store.Tenant
	err = s.st.View(r.Context(), func(tx store.ReadTx) error {
		t, err = store.Get[store.Tenant](tx, name)
		return err
	})
	if err != nil {
		return notFound("tenant", name)
	}
	writeJSON(w, http.StatusOK, tenantOut(t))
	return nil
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) error {
	if err := requireAdmin(r); err != nil {
		return err
	}
	var req api.Tenant
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if !validName(req.Name) {
		return badName("name", req.Name)
	}
	qs, err := s.quotasIn(req.Quotas, "quotas")
	if err != nil {
		return err
	}
	allowed, err := prioritiesIn(req.AllowedPriorities, req.AllowedPriorities != nil)
	if err != nil {
		return err
	}
	t := &store.Tenant{Name: req.Name, Parent: req.Parent, Quotas: qs, AllowedPriorities: allowed}
	err = s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if req.Parent != "" {
			if _, ok := tx.GetRaw(store.KindTenant, req.Parent); !ok {
				return apiErr(http.StatusBadRequest, api.CodeInvalid, "parent", "unknown parent tenant %q", req.Parent)
			}
		}
		if err := store.Put(tx, t, store.MustNotExist); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: "TenantCreated", Object: "tenants/" + t.Name, Tenant: t.Name})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusCreated, tenantOut(t))
	return nil
}

func (s *Server) setQuotas(w http.ResponseWriter, r *http.Request) error {
	if err := requireAdmin(r); err != nil {
		return err
	}
	name := r.PathValue("tenant")
	var req api.QuotaList
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	qs, err := s.quotasIn(req.Quotas, "quotas")
	if err != nil {
		return err
	}
	var t *store.Tenant
	err = s.st.Update(r.Context(), func(tx store.WriteTx) error {
		var err error
		if t, err = store.Get[store.Tenant](tx, name); err != nil {
			return notFound("tenant", name)
		}
		t.Quotas = qs
		if err := store.Put(tx, t, t.Meta.Revision); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: "QuotasChanged", Object: "tenants/" + name, Tenant: name})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusOK, tenantOut(t))
	return nil
}

func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	if err := requireAdmin(r); err != nil {
		return err
	}
	name := r.PathValue("tenant")
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if err := tenantExists(tx, name); err != nil {
			return err
		}
		ts, err := store.List[store.Tenant](tx, "")
		if err != nil {
			return err
		}
		for _, t := range ts {
			if t.Parent == name {
				return apiErr(http.StatusConflict, api.CodeConflict, "", "tenant %q has child tenant %q; delete it first", name, t.Name)
			}
		}
		ws, err := store.List[store.Workload](tx, name+"/")
		if err != nil {
			return err
		}
		for _, x := range ws {
			if x.State.Live() {
				return apiErr(http.StatusConflict, api.CodeConflict, "", "tenant %q has live workload %q; cancel it first", name, x.Spec.Name)
			}
		}
		rs, err := store.List[store.Reservation](tx, name+"/")
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			return apiErr(http.StatusConflict, api.CodeConflict, "", "tenant %q owns reservation %q; delete it first", name, rs[0].Name)
		}
		ps, err := store.List[store.Partition](tx, "")
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Tenant == name {
				return apiErr(http.StatusConflict, api.CodeConflict, "", "tenant %q owns partition %q; delete it first", name, p.Name)
			}
		}
		if err := deleteTenantHistory(tx, name); err != nil {
			return err
		}
		if err := revokeTokensOf(tx, name, ""); err != nil {
			return err
		}
		if err := store.Delete(tx, store.KindTenant, name); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: "TenantDeleted", Object: "tenants/" + name})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant")
	return s.issueToken(w, r, store.Token{Tenant: name}, "default", func(tx store.ReadTx) error { return tenantExists(tx, name) })
}

// ---- usage ----

func (s *Server) tenantUsage(w http.ResponseWriter, r *http.Request) error {
	name, err := s.scope(r)
	if err != nil {
		return err
	}
	wd, err := s.readWorld(r, true)
	if err != nil {
		return err
	}
	if _, ok := wd.Tree.Lookup(name); !ok {
		return notFound("tenant", name)
	}
	return writeSlice(s, w, r, usage(wd, []string{name}, r.URL.Query().Get("region"), s.now()))
}

func (s *Server) allUsage(w http.ResponseWriter, r *http.Request) error {
	wd, err := s.readWorld(r, true)
	if err != nil {
		return err
	}
	p := who(r)
	var names []string
	if want := r.URL.Query().Get("tenant"); want != "" {
		if !p.admin && want != p.tenant {
			return notFound("tenant", want)
		}
		names = []string{want}
	} else if p.admin {
		for _, t := range wd.Tree.Tenants {
			names = append(names, t.Name)
		}
	} else {
		names = []string{p.tenant}
	}
	return writeSlice(s, w, r, usage(wd, names, r.URL.Query().Get("region"), s.now()))
}

// ---- events ----

func eventOut(e *store.Event) api.Event {
	return api.Event{Seq: e.Seq, Time: e.Time, Type: e.Type, Object: e.Object, Tenant: e.Tenant, Message: e.Message}
}

// events answers the events after ?after=SEQ visible to the caller, at
// most ?limit= (default 100, at most 1000); with ?wait=DURATION (at most
// 60s) it waits for the first one (long poll).
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after, err := optIntParam(q, "after", 0, math.MaxInt64, 0)
	if err != nil {
		return err
	}
	limit64, err := optIntParam(q, "limit", 1, 1000, 100)
	if err != nil {
		return err
	}
	limit := int(limit64)
	var wait api.Duration
	if v := q.Get("wait"); v != "" {
		if err := wait.UnmarshalYAMLScalar(v); err != nil || wait > api.Duration(60e9) {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "wait", "wait must be a duration of at most 60s, got %q", v)
		}
	}
	if wantsSSE(r) {
		return s.streamEvents(w, r, after)
	}
	p := who(r)
	deadline := s.now().Add(timeDuration(wait))
	for {
		ch := s.changes()
		out := api.Events{Items: []api.Event{}, Next: after}
		err := s.st.View(r.Context(), func(tx store.ReadTx) error {
			if err := checkPruned(tx, after); err != nil {
				return err
			}
			var err error
			out.Next, err = scanEvents(tx, p, after, func(e *store.Event) bool {
				out.Items = append(out.Items, eventOut(e))
				return len(out.Items) < limit
			})
			return err
		})
		if err != nil {
			return err
		}
		left := deadline.Sub(s.now())
		if len(out.Items) > 0 || left <= 0 {
			writeJSON(w, http.StatusOK, out)
			return nil
		}
		after = out.Next
		select {
		case <-ch:
		case <-timeAfter(left):
		case <-r.Context().Done():
			return r.Context().Err()
		}
	}
}

// ---- sorting helpers ----

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
