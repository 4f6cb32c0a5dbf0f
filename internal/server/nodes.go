package server

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
)

// updateNode drains, undrains or relabels a node (admin).
func (s *Server) updateNode(w http.ResponseWriter, r *http.Request) error {
	var req api.NodeUpdate
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Drained == nil && req.Cordoned == nil && req.Labels == nil {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "nothing to change: send drained, cordoned and/or labels")
	}
	if req.Labels != nil {
		if err := s.checkLabels("labels", *req.Labels); err != nil {
			return err
		}
	}
	id := r.PathValue("id")
	var n *store.Node
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		var err error
		if n, err = store.Get[store.Node](tx, id); err != nil {
			return notFound("node", id)
		}
		what := []string{}
		if req.Drained != nil && *req.Drained != n.Drained {
			n.Drained = *req.Drained
			what = append(what, map[bool]string{true: "drained", false: "undrained"}[n.Drained])
		}
		if req.Cordoned != nil && *req.Cordoned != n.Cordoned {
			n.Cordoned = *req.Cordoned
			what = append(what, map[bool]string{true: "cordoned", false: "uncordoned"}[n.Cordoned])
		}
		if req.Labels != nil {
			n.Labels = *req.Labels
			what = append(what, "labels replaced")
		}
		if err := store.Put(tx, n, n.Meta.Revision); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventNodeUpdated, Object: store.NodeObject(id), Message: fmt.Sprint(what)})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	wd, err := s.readWorld(r, true)
	if err != nil {
		return err
	}
	for _, o := range s.nodesOut(wd) {
		if o.ID == id {
			writeJSON(w, http.StatusOK, o)
			return nil
		}
	}
	return notFound("node", id)
}

// deleteNode removes a node (admin) that no running workload, reservation
// or partition holds.
func (s *Server) deleteNode(w http.ResponseWriter, r *http.Request) error {
	id := fleet.NodeID(r.PathValue("id"))
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if _, ok := tx.GetRaw(store.KindNode, string(id)); !ok {
			return notFound("node", string(id))
		}
		ws, err := store.List[store.Workload](tx, "")
		if err != nil {
			return err
		}
		for _, x := range ws {
			if x.Running == nil {
				continue
			}
			for _, rep := range x.Running.Replicas {
				if rep.Node == id {
					return apiErr(http.StatusConflict, api.CodeConflict, "", "workload %s runs on node %s; drain the node (PATCH drained: true) and wait for it to move", x.Key(), id)
				}
			}
		}
		rs, err := store.List[store.Reservation](tx, "")
		if err != nil {
			return err
		}
		for _, res := range rs {
			for _, n := range res.Nodes {
				if n == id {
					return apiErr(http.StatusConflict, api.CodeConflict, "", "reservation %s holds node %s; shrink or delete it first", res.Key(), id)
				}
			}
		}
		ps, err := store.List[store.Partition](tx, "")
		if err != nil {
			return err
		}
		for _, p := range ps {
			for _, n := range p.Nodes {
				if n == id {
					return apiErr(http.StatusConflict, api.CodeConflict, "", "partition %s holds node %s; change it first", p.Name, id)
				}
			}
		}
		if err := store.Delete(tx, store.KindNode, string(id)); err != nil {
			return err
		}
		if err := revokeTokensOf(tx, "", string(id)); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventNodeRemoved, Object: store.NodeObject(id)})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	w.WriteHeader(http.StatusNoContent)
	return nil
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
			Down: n.Down || n.Drained, Drained: n.Drained, Cordoned: n.Cordoned, State: nodeState(n), Labels: n.Labels, Allocated: api.GPUs(alloc[n.ID]), Reservation: resOf[n.ID]}
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
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventNodeRegistered, Object: store.NodeObject(req.ID)})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusCreated, api.Node{ID: req.ID, Region: req.Region, Zone: req.Zone, Block: req.Block, SKU: req.SKU, Labels: req.Labels, Down: req.Down})
	return nil
}
