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

// A record's stored form (what the store keeps; the API speaks JSON),
// codecV2: the version byte, then a fixed head of headSize bytes, all
// little-endian, that a report reads — the record's tuple (uint32: the
// number the store gave its report dimensions, AppendTuple's; 0 for
// none), GPUs (int64 milli-GPUs), Start and End (int64 Unix nanoseconds;
// End 0 while open), the charge byte, and the prices UnitPrice and
// ListPrice (float64 bits) — then the rest: the strings (uvarint length
// and bytes) Workload, Tenant, Kind, Class, SKU, Model, Region, Node, the
// path's length and its names, Replica (uvarint), TenantRev and RunStart
// (varint; RunStart 0 for a run's first record), a flags byte (1:
// preemptible) and ContractedPrice. About a third of the JSON's size; a
// report reads the head alone (Head) where the store numbered the tuple,
// and the whole without allocating (RecordView) where it did not.
// Records written in the first stored form (codecV1: the strings first,
// varints, no tuple) or as JSON before it (first byte '{') are read as
// they were written.
const (
	codecV1 = 1
	codecV2 = 2
	// headSize is the v2 head's size after the version byte.
	headSize = 4 + 8 + 8 + 8 + 1 + 8 + 8
)

// maxStored bounds what DecodeRecord accepts of one string or path: far
// above any real record, it keeps a corrupt length from allocating much.
const maxStored = 1 << 16

// AppendRecord appends r's stored form to b, without a tuple.
func AppendRecord(b []byte, r *Record) []byte { return AppendRecordTuple(b, r, 0) }

// AppendRecordTuple appends r's stored form to b with tuple, the number
// the store gave r's tuple (AppendTuple's bytes).
func AppendRecordTuple(b []byte, r *Record, tuple uint32) []byte {
	b = append(b, codecV2)
	b = binary.LittleEndian.AppendUint32(b, tuple)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.GPUs))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Start.UnixNano()))
	var end int64
	if !r.End.IsZero() {
		end = r.End.UnixNano()
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(end))
	b = append(b, byte(r.Charge))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.UnitPrice))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.ListPrice))
	b = appendNames(b, r)
	var run int64
	if !r.RunStart.IsZero() {
		run = r.RunStart.UnixNano()
	}
	b = binary.AppendVarint(b, run)
	var flags byte
	if r.Preemptible {
		flags |= 1
	}
	b = append(b, flags)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(r.ContractedPrice))
}

// appendNames appends what both stored forms write alike: the strings
// Workload, Tenant, Kind, Class, SKU, Model, Region, Node (uvarint length
// and bytes), the path's length and its names, Replica (uvarint) and
// TenantRev (varint).
func appendNames(b []byte, r *Record) []byte {
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
	return binary.AppendVarint(b, r.TenantRev)
}

// RecordHead is what a report reads of a stored record whose tuple the
// store numbered: the rest of its dimensions are the tuple's.
type RecordHead struct {
	Tuple      uint32
	GPUs       int64
	Start, End int64 // Unix nanoseconds; End 0 while open
	UnitPrice  float64
	ListPrice  float64
}

// Head reads the head of a stored record; ok false when it has no tuple
// (an older form, or written without one) or is too short to hold a
// head, or its prices are not finite. It checks no more than that
// (Decode checks the whole).
func Head(data []byte, h *RecordHead) bool {
	if len(data) < 1+headSize || data[0] != codecV2 {
		return false
	}
	d := data[1 : 1+headSize]
	h.Tuple = binary.LittleEndian.Uint32(d)
	h.GPUs = int64(binary.LittleEndian.Uint64(d[4:]))
	h.Start = int64(binary.LittleEndian.Uint64(d[12:]))
	h.End = int64(binary.LittleEndian.Uint64(d[20:]))
	h.UnitPrice = math.Float64frombits(binary.LittleEndian.Uint64(d[29:]))
	h.ListPrice = math.Float64frombits(binary.LittleEndian.Uint64(d[37:]))
	return h.Tuple != 0 && finite(h.UnitPrice) && finite(h.ListPrice)
}

// RecordView is a stored record read in place: its strings are slices of
// the stored bytes (valid while they are: in the store, the read
// transaction), its times Unix nanoseconds (End 0 while open).
type RecordView struct {
	// Tuple is the number the store gave the record's tuple (0: none).
	Tuple                                                   uint32
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
	if len(data) == 0 || (data[0] != codecV1 && data[0] != codecV2) {
		return errStored
	}
	r := reader{b: data[1:]}
	v.Tuple = 0
	if data[0] == codecV2 {
		d := r.fixed(headSize)
		v.Tuple = binary.LittleEndian.Uint32(d)
		v.GPUs = resource.MilliGPU(binary.LittleEndian.Uint64(d[4:]))
		v.Start = int64(binary.LittleEndian.Uint64(d[12:]))
		v.End = int64(binary.LittleEndian.Uint64(d[20:]))
		v.Charge = Charge(d[28])
		v.UnitPrice = math.Float64frombits(binary.LittleEndian.Uint64(d[29:]))
		v.ListPrice = math.Float64frombits(binary.LittleEndian.Uint64(d[37:]))
	}
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
	if data[0] == codecV2 {
		v.RunStart = r.varint()
		v.Preemptible = r.fixed(1)[0]&1 != 0
	} else {
		v.GPUs = resource.MilliGPU(r.varint())
		v.Start, v.End, v.RunStart = r.varint(), r.varint(), r.varint()
		fc := r.fixed(2)
		v.Preemptible, v.Charge = fc[0]&1 != 0, Charge(fc[1])
		v.UnitPrice = math.Float64frombits(binary.LittleEndian.Uint64(r.fixed(8)))
		v.ListPrice = math.Float64frombits(binary.LittleEndian.Uint64(r.fixed(8)))
	}
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
