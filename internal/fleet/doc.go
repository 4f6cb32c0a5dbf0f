// Package fleet describes the machines Arbiter schedules onto: GPU models,
// the SKU catalog (machine sizes with cloud names, shapes and prices), and
// the fleet topology region → zone → block → node → GPU.
//
// A block is an InfiniBand/NVLink domain: a gang that must talk fast stays
// inside one. The catalog is embedded (catalog.yaml) and a config may
// override or extend it.
//
//	cat := fleet.Builtin()
//	f, err := fleet.Build(spec, cat) // every problem, with file:line:col
//	for _, n := range f.Nodes { ... } // fixed, deterministic order
//
// Fleet values are read-only once built; the scheduler keeps free capacity
// in its own snapshot.
package fleet
