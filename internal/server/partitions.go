package server

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
)

// maxPartitionEntries bounds a partition's blocks and nodes lists.
const maxPartitionEntries = 4096

// partitionOut is the API form of a partition, with the machines and GPUs
// it covers in the world's fleet.
func partitionOut(wd *world, p *store.Partition) api.Partition {
	o := api.Partition{Name: p.Name, Tenant: p.Tenant, Blocks: []string{}, Nodes: []string{}, Revision: p.Meta.Revision}
	for _, b := range p.Blocks {
		o.Blocks = append(o.Blocks, string(b))
	}
	for _, n := range p.Nodes {
		o.Nodes = append(o.Nodes, string(n))
	}
	seen := map[fleet.NodeID]bool{}
	for _, id := range partitionNodes(wd.Fleet, p) {
		if n, ok := wd.Fleet.Node(id); ok && !seen[id] {
			seen[id] = true
			o.Machines++
			o.GPUs += n.GPUs
		}
	}
	return o
}

func (s *Server) listPartitions(w http.ResponseWriter, r *http.Request) error {
	wd, err := s.readWorld(r, false)
	if err != nil {
		return err
	}
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	for _, p := range wd.Partitions { // in name order
		if pg.skip(p.Name) {
			continue
		}
		if !pg.add(p.Name, partitionOut(wd, p)) {
			break
		}
	}
	pg.write(w)
	return nil
}

// setPartition creates or replaces a partition. Its machines must exist,
// be in no other partition and be bound to no reservation (a reservation
// is never bound to a partitioned machine either; see world.nodeUse).
// Work already running on them stays; from the next cycle on only the
// tenant's subtree is placed there.
func (s *Server) setPartition(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !validName(name) {
		return badName("name", name)
	}
	var req api.PartitionRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Tenant == "":
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "tenant", "a partition needs a tenant")
	case len(req.Blocks)+len(req.Nodes) == 0:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "nodes", "a partition needs at least one block or node")
	case len(req.Blocks) > maxPartitionEntries:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "blocks", "at most %d blocks", maxPartitionEntries)
	case len(req.Nodes) > maxPartitionEntries:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "nodes", "at most %d nodes", maxPartitionEntries)
	}
	p := &store.Partition{Name: name, Tenant: req.Tenant}
	for _, b := range req.Blocks {
		p.Blocks = append(p.Blocks, fleet.BlockID(b))
	}
	for _, n := range req.Nodes {
		p.Nodes = append(p.Nodes, fleet.NodeID(n))
	}
	var wd *world
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if _, ok := tx.GetRaw(store.KindTenant, req.Tenant); !ok {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "tenant", "unknown tenant %q", req.Tenant)
		}
		var err error
		if wd, err = loadWorld(tx, s.cat.Load(), false); err != nil {
			return err
		}
		// Where each machine is taken: other partitions, reservations.
		inPartition := map[fleet.NodeID]string{}
		for _, o := range wd.Partitions {
			if o.Name == name {
				continue
			}
			for _, id := range partitionNodes(wd.Fleet, o) {
				inPartition[id] = o.Name
			}
		}
		reservedBy := map[fleet.NodeID]string{}
		for _, res := range wd.Reservations {
			for _, id := range res.Nodes {
				reservedBy[id] = res.Key()
			}
		}
		mine := map[fleet.NodeID]string{} // node → the field that named it
		check := func(field string, id fleet.NodeID) error {
			if other, ok := mine[id]; ok {
				return apiErr(http.StatusBadRequest, api.CodeInvalid, field, "node %s is already named by %s", id, other)
			}
			mine[id] = field
			if other, ok := inPartition[id]; ok {
				return apiErr(http.StatusConflict, api.CodeConflict, field, "node %s is already in partition %q", id, other)
			}
			if res, ok := reservedBy[id]; ok {
				return apiErr(http.StatusConflict, api.CodeConflict, field, "node %s is bound to reservation %q", id, res)
			}
			return nil
		}
		for i, b := range p.Blocks {
			f := fmt.Sprintf("blocks[%d]", i)
			nodes := wd.Fleet.BlockNodes(b)
			if len(nodes) == 0 {
				return apiErr(http.StatusBadRequest, api.CodeInvalid, f, "unknown block %q (see GET /v1/nodes)", b)
			}
			for _, n := range nodes {
				if err := check(f, n.ID); err != nil {
					return err
				}
			}
		}
		for i, id := range p.Nodes {
			f := fmt.Sprintf("nodes[%d]", i)
			if _, ok := wd.Fleet.Node(id); !ok {
				return apiErr(http.StatusBadRequest, api.CodeInvalid, f, "unknown node %q (see GET /v1/nodes)", id)
			}
			if err := check(f, id); err != nil {
				return err
			}
		}
		if err := store.Put(tx, p, store.Any); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventPartitionSet, Object: store.PartitionObject(name), Tenant: p.Tenant,
			Message: fmt.Sprintf("tenant %s: %d machines", p.Tenant, len(mine))})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	writeJSON(w, http.StatusOK, partitionOut(wd, p))
	return nil
}

// deletePartition returns a partition's machines to the shared pool.
func (s *Server) deletePartition(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		p, err := store.Get[store.Partition](tx, name)
		if err != nil {
			return notFound("partition", name)
		}
		if err := store.Delete(tx, store.KindPartition, name); err != nil {
			return err
		}
		return store.AppendEvent(tx, &store.Event{Time: s.now(), Type: store.EventPartitionDeleted, Object: store.PartitionObject(name), Tenant: p.Tenant})
	})
	if err != nil {
		return err
	}
	s.notify(true)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
