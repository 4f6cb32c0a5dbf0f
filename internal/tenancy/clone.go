package tenancy

import "slices"

// Clone returns a copy of the tree whose tenants and quota entries may be
// changed without changing t (the policy runtime adjusts limits and
// guarantees on a copy each cycle).
func (t *Tree) Clone() *Tree {
	c := &Tree{Tenants: make([]*Tenant, len(t.Tenants)), byName: t.byName}
	for i, ten := range t.Tenants {
		x := *ten
		x.Quotas = slices.Clone(ten.Quotas)
		c.Tenants[i] = &x
	}
	return c
}
