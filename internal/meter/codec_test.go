package meter

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestRecordCodecRoundTrip: a record's stored form decodes back to it (as
// a Record and as a view), a JSON record (before the stored form) decodes
// as before, and AddView sums what Add sums.
func TestRecordCodecRoundTrip(t *testing.T) {
	recs := benchRecords(2000)
	recs[0].Path, recs[0].Class, recs[0].Preemptible, recs[0].TenantRev, recs[0].ContractedPrice = []string{"org", recs[0].Tenant}, "research", true, 42, 3.5
	by := []Dim{DimTenant, DimCharge, DimSKU, DimClass}
	since, until := t0.Add(24*time.Hour), t0.Add(20*24*time.Hour)
	g := NewAggregator(since, until, by)
	for i := range recs {
		data := AppendRecord(nil, &recs[i])
		var got Record
		if err := DecodeRecord(data, &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(recs[i], got); d != "" {
			t.Fatalf("record %d (-want +got):\n%s", i, d)
		}
		js, _ := json.Marshal(recs[i])
		if err := DecodeRecord(js, &got); err != nil || !got.Start.Equal(recs[i].Start) || got.Workload != recs[i].Workload {
			t.Fatalf("JSON record %d: %v %+v", i, err, got)
		}
		var v RecordView
		if err := v.Decode(data); err != nil {
			t.Fatal(err)
		}
		if i == 0 && (!v.PathHas("org") || v.PathHas("nobody")) {
			t.Error("PathHas")
		}
		g.AddView(&v)
	}
	want := Aggregate(recs, since, until, by)
	if d := cmp.Diff(want, g.Report()); d != "" {
		t.Errorf("AddView's report differs from Add's (-want +got):\n%s", d)
	}
	if len(AppendRecord(nil, &recs[1])) > 160 {
		t.Errorf("stored form of %d bytes", len(AppendRecord(nil, &recs[1])))
	}
}

// FuzzDecodeRecord: any bytes decode or are refused, never panic; what
// decodes encodes to a form that decodes to the same record.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range benchRecords(3) {
		f.Add(AppendRecord(nil, &r))
	}
	for i, r := range benchRecords(3) {
		f.Add(AppendRecordTuple(nil, &r, uint32(i+1)))
		f.Add(appendRecordV1(nil, &r))
	}
	f.Add([]byte{codecV1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{codecV2, 0xff, 0xff, 0xff, 0xff, 0x1f})
	f.Add([]byte(`{"workload":"a/b"}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The head, where it reads, is the whole record's.
		var h RecordHead
		var v RecordView
		if Head(data, &h) && v.Decode(data) == nil {
			if h.Tuple != v.Tuple || h.GPUs != int64(v.GPUs) || h.Start != v.Start || h.End != v.End || h.UnitPrice != v.UnitPrice || h.ListPrice != v.ListPrice {
				t.Fatalf("head %+v of view %+v", h, v)
			}
		}
		// Any bytes as a tuple: left out or summed, never a panic.
		s := NewSummer(t0, t0.Add(time.Hour), []Dim{DimTenant, DimCharge}, nil)
		s.Tuple(1, data)
		s.Report()
		var r Record
		if err := DecodeRecord(data, &r); err != nil || IsJSON(data) {
			return
		}
		var again Record
		if err := DecodeRecord(AppendRecord(nil, &r), &again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if d := cmp.Diff(r, again); d != "" {
			t.Fatalf("(-first +again):\n%s", d)
		}
	})
}

// appendRecordV1 is the first stored form (codecV1), which stores
// written before the tuples hold.
func appendRecordV1(b []byte, r *Record) []byte {
	b = appendNames(append(b, codecV1), r)
	b = binary.AppendVarint(b, int64(r.GPUs))
	b = binary.AppendVarint(b, r.Start.UnixNano())
	var end, run int64
	if !r.End.IsZero() {
		end = r.End.UnixNano()
	}
	if !r.RunStart.IsZero() {
		run = r.RunStart.UnixNano()
	}
	b = binary.AppendVarint(b, end)
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

// TestRecordCodecV1: a record in the first stored form decodes as it
// was written.
func TestRecordCodecV1(t *testing.T) {
	recs := benchRecords(200)
	recs[0].Path, recs[0].Class, recs[0].Preemptible, recs[0].TenantRev, recs[0].ContractedPrice = []string{"org", recs[0].Tenant}, "research", true, 42, 3.5
	recs[1].RunStart = recs[1].Start.Add(-time.Hour)
	for i := range recs {
		var got Record
		if err := DecodeRecord(appendRecordV1(nil, &recs[i]), &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(recs[i], got); d != "" {
			t.Fatalf("record %d (-want +got):\n%s", i, d)
		}
	}
}

// tupleBook numbers tuples as the store does (from 1, in the order
// first seen).
type tupleBook struct {
	num   map[string]uint32
	order [][]byte
}

func (b *tupleBook) number(r *Record) uint32 {
	k := AppendTuple(nil, r)
	if n, ok := b.num[string(k)]; ok {
		return n
	}
	if b.num == nil {
		b.num = map[string]uint32{}
	}
	b.order = append(b.order, k)
	b.num[string(k)] = uint32(len(b.order))
	return uint32(len(b.order))
}

// TestSummerIsAggregate: the Summer's report of stored records (some
// written as JSON, from before the stored form, some in the first stored
// form, most with their tuple's number) is Aggregate's of the records to
// the last bit, in one chunk and in many, whether the tuples are given
// or not; keep filters (by tuple where it has one); a record that does
// not decode is an error.
func TestSummerIsAggregate(t *testing.T) {
	recs := benchRecords(5000)
	var stored [][]byte
	var book tupleBook
	for i := range recs {
		switch {
		case i%7 == 0:
			js, _ := json.Marshal(&recs[i])
			stored = append(stored, js)
		case i%5 == 0:
			stored = append(stored, appendRecordV1(nil, &recs[i]))
		case i%11 == 0:
			stored = append(stored, AppendRecord(nil, &recs[i])) // no number
		default:
			stored = append(stored, AppendRecordTuple(nil, &recs[i], book.number(&recs[i])))
		}
	}
	since, until := t0.Add(2*24*time.Hour), t0.Add(25*24*time.Hour)
	defer func(c int) { chunk = c }(chunk)
	for _, by := range [][]Dim{{DimTenant, DimKind, DimCharge}, {DimSKU, DimClass, DimModel, DimRegion, DimTenant}, {DimWorkload, DimTenant}} {
		for _, c := range []int{1 << 20, 300} {
			for _, tuples := range []bool{false, true} {
				chunk = c
				summer := func(keep func(*RecordView) bool) Report {
					s := NewSummer(since, until, by, keep)
					if tuples {
						for i, k := range book.order {
							s.Tuple(uint32(i+1), k)
						}
						s.Tuple(uint32(len(book.order)+5), []byte{1}) // does not decode: left out
					}
					for _, d := range stored {
						s.Add(d)
					}
					got, err := s.Report()
					if err != nil {
						t.Fatal(err)
					}
					return got
				}
				name := fmt.Sprintf("by %v, chunk %d, tuples %v", by, c, tuples)
				if d := cmp.Diff(Aggregate(recs, since, until, by), summer(nil)); d != "" {
					t.Errorf("%s: (-Aggregate +Summer):\n%s", name, d)
				}
				got := summer(func(v *RecordView) bool { return string(v.Tenant) == recs[0].Tenant })
				var mine []Record
				for _, r := range recs {
					if r.Tenant == recs[0].Tenant {
						mine = append(mine, r)
					}
				}
				// Chunks of all records, not of the kept ones: the same sums up to
				// the order of the additions.
				want := Aggregate(mine, since, until, by)
				if d := cmp.Diff(want, got, cmpopts.EquateApprox(1e-12, 0)); d != "" || got.Total.Records == 0 {
					t.Errorf("%s, one tenant kept: (-want +got):\n%s", name, d)
				}
			}
		}
	}
	s := NewSummer(since, until, []Dim{DimTenant}, nil)
	s.Add(stored[1])
	s.Add([]byte{codecV1, 9})
	if _, err := s.Report(); err == nil {
		t.Error("a record that does not decode: no error")
	}
}
