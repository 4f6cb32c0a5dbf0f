package meter

import (
	"encoding/json"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Summer is the cost report of stored records (AppendRecord's form, or
// JSON from before it) summed on up to GOMAXPROCS goroutines while the
// caller reads them: Add hands each record's bytes over, Report waits for
// the sums. Chunks of `chunk` records are summed apart and merged in
// order, as Aggregate does, so the report is Aggregate's of the decoded
// records, to the last bit, however many goroutines ran.
//
// A record whose tuple the store numbered (given to Tuple before the
// first Add) is read by Add itself, its head alone (Head: a few fixed
// fields, while the caller's read has its bytes in cache), and summed
// into its tuple's group; the others are decoded whole by the workers.
//
// The bytes passed to Add must stay valid and unchanged until Report
// returns (in the store: call Report inside the read transaction).
type Summer struct {
	since, until time.Time
	by           []Dim
	keep         func(*RecordView) bool
	batch        *batch
	next         int
	work         chan sumJob
	free         chan *batch // batches to reuse
	results      chan sumJob
	workers      sync.WaitGroup
	merged       chan struct{}
	total        *Aggregator
	err          error
	// groups is the most groups a finished chunk had: later chunks'
	// aggregators are made that big (their maps need not grow).
	groups atomic.Int64
	// tuples is the aggregator of the numbered tuples' groups (nil: none
	// given), which every chunk's starts from; group holds, by tuple
	// number, its group's index there (noGroup: not given; refused: a
	// tuple keep refuses).
	tuples *Aggregator
	group  []int32
}

// A tuple's group index in Summer.group: a tuple not given, or one whose
// records keep refuses.
const (
	noGroup = -1
	refused = -2
)

// batch is a chunk's records, in order: each an item.
type batch struct {
	items []item
	raw   [][]byte // the stored bytes of the items to decode
}

// item is a record read from its head (gi its group), or one to decode
// (gi noGroup, raw its bytes' index in the batch's raw): 48 bytes.
type item struct {
	gpus, start, end int64
	unit, list       float64
	gi, raw          int32
}

type sumJob struct {
	n   int
	b   *batch
	g   *Aggregator
	err error
}

// NewSummer starts a report over [since, until) grouped by by of the
// records keep accepts (nil: all; keep is called on many goroutines at
// once and must not change what it reads). For a tuple given to Tuple,
// keep is called once, with a view of the tuple's fields alone (tenant
// and its revision, kind, class, region, SKU, model, charge), and
// decides for all its records.
func NewSummer(since, until time.Time, by []Dim, keep func(*RecordView) bool) *Summer {
	n := max(runtime.GOMAXPROCS(0), 1)
	s := &Summer{since: since, until: until, by: by, keep: keep, work: make(chan sumJob, 1), results: make(chan sumJob, n), free: make(chan *batch, n+2),
		merged: make(chan struct{})}
	for range n {
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			for j := range s.work {
				j.g, j.err = s.sum(j.b)
				clear(j.b.raw) // drop the references to the store's bytes
				j.b.items, j.b.raw = j.b.items[:0], j.b.raw[:0]
				select {
				case s.free <- j.b:
				default:
				}
				j.b = nil
				s.results <- j
			}
		}()
	}
	return s
}

// Tuple gives the Summer a tuple the store numbered: its number and its
// stored form (AppendTuple's), so that the records of that number are
// summed from their heads (Head) alone. Call it before the first Add; a
// report by workload (not a tuple's dimension) ignores it, and a tuple
// that does not decode is left out (its records are summed from their
// strings, as without a number).
func (s *Summer) Tuple(n uint32, data []byte) {
	if s.next > 0 || s.batch != nil {
		panic("meter: Summer.Tuple after Add")
	}
	if n == 0 || n > MaxTuple || slices.Contains(s.by, DimWorkload) {
		return
	}
	var v RecordView
	if decodeTuple(data, &v) != nil {
		return
	}
	if s.tuples == nil {
		s.tuples = NewAggregator(s.since, s.until, s.by)
	}
	for int(n) >= len(s.group) {
		s.group = append(s.group, noGroup)
	}
	if s.keep != nil && !s.keep(&v) {
		s.group[n] = refused
		return
	}
	var k key
	for i, d := range s.by {
		if d == DimCharge {
			k[i] = s.tuples.id(i, v.Charge.String())
		} else {
			k[i] = s.tuples.id(i, string(viewValue(&v, d)))
		}
	}
	s.group[n] = s.tuples.groupIndex(&k)
}

// sum is one chunk's aggregator.
func (s *Summer) sum(b *batch) (*Aggregator, error) {
	var g *Aggregator
	if s.tuples != nil {
		g = s.tuples.clone()
	} else {
		g = newAggregatorSized(s.since, s.until, s.by, int(s.groups.Load()))
	}
	defer func() {
		for n := int64(len(g.sums)); ; {
			if old := s.groups.Load(); old >= n || s.groups.CompareAndSwap(old, n) {
				return
			}
		}
	}()
	var v RecordView
	for i := range b.items {
		it := &b.items[i]
		if it.gi >= 0 {
			g.addHead(it)
			continue
		}
		data := b.raw[it.raw]
		if IsJSON(data) {
			var r Record
			if err := json.Unmarshal(data, &r); err != nil {
				return g, err
			}
			ViewOf(&r, &v)
		} else if err := v.Decode(data); err != nil {
			return g, err
		}
		if s.keep == nil || s.keep(&v) {
			g.AddView(&v)
		}
	}
	return g, nil
}

// merge merges the chunks' aggregators in chunk order.
func (s *Summer) merge() {
	defer close(s.merged)
	pending := map[int]*Aggregator{}
	next := 0
	for j := range s.results {
		if j.err != nil && s.err == nil {
			s.err = j.err
		}
		pending[j.n] = j.g
		for g, ok := pending[next]; ok; g, ok = pending[next] {
			s.total.Merge(g)
			delete(pending, next)
			next++
		}
	}
}

// Add counts the stored record data.
func (s *Summer) Add(data []byte) {
	if s.batch == nil {
		select {
		case s.batch = <-s.free:
		default:
			s.batch = &batch{items: make([]item, 0, chunk)}
		}
	}
	b := s.batch
	var h RecordHead
	if s.group != nil && Head(data, &h) && int(h.Tuple) < len(s.group) {
		switch gi := s.group[h.Tuple]; gi {
		case refused:
			return // not counted: another tenant's
		case noGroup:
		default:
			b.items = append(b.items, item{gpus: h.GPUs, start: h.Start, end: h.End, unit: h.UnitPrice, list: h.ListPrice, gi: gi})
			if len(b.items) == chunk {
				s.flush()
			}
			return
		}
	}
	b.items = append(b.items, item{gi: noGroup, raw: int32(len(b.raw))})
	b.raw = append(b.raw, data)
	if len(b.items) == chunk {
		s.flush()
	}
}

// start starts the merge (at the first chunk: the tuples are known by
// then).
func (s *Summer) start() {
	if s.total != nil {
		return
	}
	if s.tuples != nil {
		s.total = s.tuples.clone()
	} else {
		s.total = NewAggregator(s.since, s.until, s.by)
	}
	go s.merge()
}

func (s *Summer) flush() {
	if s.batch == nil || len(s.batch.items) == 0 {
		return
	}
	s.start()
	s.work <- sumJob{n: s.next, b: s.batch}
	s.next++
	s.batch = nil
}

// Report waits for the sums and returns the report, or the error of the
// first record that did not decode. Call it once.
func (s *Summer) Report() (Report, error) {
	s.flush()
	s.start()
	close(s.work)
	s.workers.Wait()
	close(s.results)
	<-s.merged
	return s.total.Report(), s.err
}
