package meter

import "encoding/binary"

// A record's tuple is its report dimensions apart from the workload —
// tenant (and the revision that created it), kind, class, region, SKU,
// model and charge — which a month of records repeats: a fleet's
// millions of records share thousands of tuples. The store numbers each
// tuple once (its stored form, AppendTuple's bytes, is the key of its
// number) and writes the number in each record's head, so that a report
// finds a record's group by the number (Summer.Tuple) instead of by its
// strings.

// AppendTuple appends the stored form of r's tuple to b: the strings
// (uvarint length and bytes) Tenant, Kind, Class, Region, SKU, Model, then
// TenantRev (varint) and the charge byte.
func AppendTuple(b []byte, r *Record) []byte {
	for _, s := range [...]string{r.Tenant, r.Kind, r.Class, r.Region, string(r.SKU), string(r.Model)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, r.TenantRev)
	return append(b, byte(r.Charge))
}

// decodeTuple sets the tuple's fields of v from its stored form (the
// strings slices of data); the other fields are left as they are.
func decodeTuple(data []byte, v *RecordView) error {
	r := reader{b: data}
	v.Tenant, v.Kind, v.Class, v.Region, v.SKU, v.Model = r.bytes(), r.bytes(), r.bytes(), r.bytes(), r.bytes(), r.bytes()
	v.TenantRev = r.varint()
	v.Charge = Charge(r.fixed(1)[0])
	if r.bad || len(r.b) != 0 {
		return errStored
	}
	return nil
}

// MaxTuple bounds the number a tuple may have (Summer keeps a slot per
// number up to the largest it is given): the store writes records of
// tuples beyond it without a number.
const MaxTuple = 1 << 24
