package meter

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// A record's stored form (what the store keeps; the API speaks JSON):
// the version byte codecV1, then the strings (uvarint length and bytes)
// Workload, Tenant, Kind, Class, SKU, Model, Region, Node, the path's
// length and its names, then Replica (uvarint), TenantRev, GPUs, Start,
// End and RunStart (varint Unix nanoseconds; End 0 while open, RunStart 0
// for a run's first record), a
// flags byte (1: preemptible), the charge byte and the prices UnitPrice,
// ListPrice, ContractedPrice (float64 bits, little-endian). About a third
// of the JSON's size, and a report reads it without allocating
// (RecordView). Records written as JSON before it (first byte '{') are
// read as JSON.
const codecV1 = 1

// maxStored bounds what DecodeRecord accepts of one string or path: far
// above any real record, it keeps a corrupt length from allocating much.
const maxStored = 1 << 16

// AppendRecord appends r's stored form to b.
func AppendRecord(b []byte, r *Record) []byte {
	b = append(b, codecV1)
	for _, s := range [...]string{r.Workload, r.Tenant, r.Kind, r.Class, string(r.SKU), string(r.Model), r.Region, string(r.Node)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Path)))
	for _, s := range r.Path {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(max(r.Replica, 0)))
	b = binary.AppendVarint(b, r.TenantRev)
	b = binary.AppendVarint(b, int64(r.GPUs))
	b = binary.AppendVarint(b, r.Start.UnixNano())
	var end int64
	if !r.End.IsZero() {
		end = r.End.UnixNano()
	}
	b = binary.AppendVarint(b, end)
	var run int64
	if !r.RunStart.IsZero() {
		run = r.RunStart.UnixNano()
	}
	b = binary.AppendVarint(b, run)
	var flags byte
	if r.Preemptible {
		flags |= 1
	}
	b = append(b, flags, byte(r.Charge))
	for _, p := range [...]float64{r.UnitPrice, r.ListPrice, r.ContractedPrice} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p))
	}
	return b
}

// RecordView is a stored record read in place: its strings are slices of
// the stored bytes (valid while they are: in the store, the read
// transaction), its times Unix nanoseconds (End 0 while open).
type RecordView struct {
	Workload, Tenant, Kind, Class, SKU, Model, Region, Node []byte
	// path is the stored path (its names, each length-prefixed).
	path                                  []byte
	pathLen                               int
	Replica                               int
	TenantRev                             int64
	GPUs                                  resource.MilliGPU
	Start, End, RunStart                  int64
	Preemptible                           bool
	Charge                                Charge
	UnitPrice, ListPrice, ContractedPrice float64
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) || n > maxStored {
		r.bad = true
		r.b = nil
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) fixed(n int) []byte {
	if len(r.b) < n {
		r.bad = true
		r.b = nil
		return make([]byte, n)
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

// errStored is the error of a stored record that does not decode.
var errStored = fmt.Errorf("%w: stored usage record", ErrInvalid)

// Decode reads a record's stored form (not JSON: see IsJSON).
func (v *RecordView) Decode(data []byte) error {
	if len(data) == 0 || data[0] != codecV1 {
		return errStored
	}
	r := reader{b: data[1:]}
	v.Workload, v.Tenant, v.Kind, v.Class = r.bytes(), r.bytes(), r.bytes(), r.bytes()
	v.SKU, v.Model, v.Region, v.Node = r.bytes(), r.bytes(), r.bytes(), r.bytes()
	n := r.uvarint()
	if n > maxStored {
		return errStored
	}
	v.pathLen = int(n)
	rest := r.b
	for range n {
		r.bytes()
	}
	if r.bad {
		return errStored
	}
	v.path = rest[:len(rest)-len(r.b)]
	v.Replica = int(min(r.uvarint(), math.MaxInt32))
	v.TenantRev = r.varint()
	v.GPUs = resource.MilliGPU(r.varint())
	v.Start, v.End, v.RunStart = r.varint(), r.varint(), r.varint()
	fc := r.fixed(2)
	v.Preemptible, v.Charge = fc[0]&1 != 0, Charge(fc[1])
	v.UnitPrice = math.Float64frombits(binary.LittleEndian.Uint64(r.fixed(8)))
	v.ListPrice = math.Float64frombits(binary.LittleEndian.Uint64(r.fixed(8)))
	v.ContractedPrice = math.Float64frombits(binary.LittleEndian.Uint64(r.fixed(8)))
	if r.bad || !finite(v.UnitPrice) || !finite(v.ListPrice) || !finite(v.ContractedPrice) {
		return errStored
	}
	return nil
}

// PathHas reports whether the record's tenant path names tenant.
func (v *RecordView) PathHas(tenant string) bool {
	r := reader{b: v.path}
	for range v.pathLen {
		if string(r.bytes()) == tenant {
			return true
		}
	}
	return false
}

// Record is the view as a Record (its strings copied).
func (v *RecordView) Record() Record {
	rec := Record{Workload: string(v.Workload), Replica: v.Replica, Tenant: string(v.Tenant), TenantRev: v.TenantRev,
		Kind: string(v.Kind), Class: string(v.Class), Preemptible: v.Preemptible, SKU: fleet.SKUName(v.SKU), Model: fleet.ModelID(v.Model),
		Region: string(v.Region), Node: fleet.NodeID(v.Node), GPUs: v.GPUs, Start: time.Unix(0, v.Start).UTC(), Charge: v.Charge,
		UnitPrice: v.UnitPrice, ListPrice: v.ListPrice, ContractedPrice: v.ContractedPrice}
	if v.End != 0 {
		rec.End = time.Unix(0, v.End).UTC()
	}
	if v.RunStart != 0 {
		rec.RunStart = time.Unix(0, v.RunStart).UTC()
	}
	if v.pathLen > 0 {
		rec.Path = make([]string, 0, v.pathLen)
		r := reader{b: v.path}
		for range v.pathLen {
			rec.Path = append(rec.Path, string(r.bytes()))
		}
	}
	return rec
}

// IsJSON reports whether stored data is a record written as JSON (before
// the stored form).
func IsJSON(data []byte) bool { return len(data) > 0 && data[0] == '{' }

// DecodeRecord reads a stored record, in the stored form or as JSON.
func DecodeRecord(data []byte, r *Record) error {
	if IsJSON(data) {
		*r = Record{}
		return json.Unmarshal(data, r)
	}
	var v RecordView
	if err := v.Decode(data); err != nil {
		return err
	}
	*r = v.Record()
	return nil
}

// ViewOf sets v to r's values (for a record decoded from JSON); v's
// strings are copies.
func ViewOf(r *Record, v *RecordView) {
	*v = RecordView{}
	data := AppendRecord(nil, r)
	if err := v.Decode(data); err != nil {
		panic(err) // AppendRecord's output always decodes
	}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
