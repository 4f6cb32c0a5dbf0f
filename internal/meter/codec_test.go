package meter

import (
	"encoding/json"
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
	f.Add([]byte{codecV1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte(`{"workload":"a/b"}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
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

// TestSummerIsAggregate: the Summer's report of stored records (some
// written as JSON, from before the stored form) is Aggregate's of the
// records to the last bit, in one chunk and in many; keep filters; a
// record that does not decode is an error.
func TestSummerIsAggregate(t *testing.T) {
	recs := benchRecords(5000)
	var stored [][]byte
	for i := range recs {
		if i%7 == 0 {
			js, _ := json.Marshal(&recs[i])
			stored = append(stored, js)
		} else {
			stored = append(stored, AppendRecord(nil, &recs[i]))
		}
	}
	by := []Dim{DimTenant, DimKind, DimCharge}
	since, until := t0.Add(2*24*time.Hour), t0.Add(25*24*time.Hour)
	defer func(c int) { chunk = c }(chunk)
	for _, c := range []int{1 << 20, 300} {
		chunk = c
		s := NewSummer(since, until, by, nil)
		for _, d := range stored {
			s.Add(d)
		}
		got, err := s.Report()
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(Aggregate(recs, since, until, by), got); d != "" {
			t.Errorf("chunk %d: (-Aggregate +Summer):\n%s", c, d)
		}
		s = NewSummer(since, until, by, func(v *RecordView) bool { return string(v.Tenant) == recs[0].Tenant })
		for _, d := range stored {
			s.Add(d)
		}
		got, _ = s.Report()
		var mine []Record
		for _, r := range recs {
			if r.Tenant == recs[0].Tenant {
				mine = append(mine, r)
			}
		}
		// Chunks of all records, not of the kept ones: the same sums up to
		// the order of the additions.
		if d := cmp.Diff(Aggregate(mine, since, until, by).Total, got.Total, cmpopts.EquateApprox(1e-12, 0)); d != "" || got.Total.Records == 0 {
			t.Errorf("chunk %d, one tenant kept: (-want +got):\n%s", c, d)
		}
	}
	s := NewSummer(since, until, by, nil)
	s.Add(stored[1])
	s.Add([]byte{codecV1, 9})
	if _, err := s.Report(); err == nil {
		t.Error("a record that does not decode: no error")
	}
}
