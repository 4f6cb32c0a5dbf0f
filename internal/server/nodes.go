package server

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
)

// updateNode drains, undrains or relabels a node (admin).
func (s *Server) updateNode(w http.ResponseWriter, r *http.Request) error {
	var req api.NodeUpdate
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Drained == nil && req.Labels == nil {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "", "nothing to change: send drained and/or labels")
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
		if req.Labels != nil {
			n.Labels = *req.Labels
			what = append(what, "labels replaced")
		}
		if err := store.Put(tx, n, n.Meta.Revision); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: "NodeUpdated", Object: "nodes/" + id, Message: fmt.Sprint(what)})
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
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: "NodeRemoved", Object: "nodes/" + string(id)})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
