package meter

import (
	"encoding/json"
	"runtime"
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
// The bytes passed to Add must stay valid and unchanged until Report
// returns (in the store: call Report inside the read transaction).
type Summer struct {
	since, until time.Time
	by           []Dim
	keep         func(*RecordView) bool
	batch        [][]byte
	next         int
	work         chan sumJob
	free         chan [][]byte // batches to reuse
	results      chan sumJob
	workers      sync.WaitGroup
	merged       chan struct{}
	total        *Aggregator
	err          error
	// groups is the most groups a finished chunk had: later chunks'
	// aggregators are made that big (their maps need not grow).
	groups atomic.Int64
}

type sumJob struct {
	n    int
	data [][]byte
	g    *Aggregator
	err  error
}

// NewSummer starts a report over [since, until) grouped by by of the
// records keep accepts (nil: all; keep is called on many goroutines at
// once and must not change what it reads).
func NewSummer(since, until time.Time, by []Dim, keep func(*RecordView) bool) *Summer {
	n := max(runtime.GOMAXPROCS(0), 1)
	s := &Summer{since: since, until: until, by: by, keep: keep, work: make(chan sumJob, 1), results: make(chan sumJob, n), free: make(chan [][]byte, n+2),
		merged: make(chan struct{}), total: NewAggregator(since, until, by)}
	for range n {
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			for j := range s.work {
				j.g, j.err = s.sum(j.data)
				select {
				case s.free <- j.data[:0]:
				default:
				}
				j.data = nil
				s.results <- j
			}
		}()
	}
	go s.merge()
	return s
}

// sum is one chunk's aggregator.
func (s *Summer) sum(data [][]byte) (*Aggregator, error) {
	g := newAggregatorSized(s.since, s.until, s.by, int(s.groups.Load()))
	defer func() {
		for n := int64(len(g.sums)); ; {
			if old := s.groups.Load(); old >= n || s.groups.CompareAndSwap(old, n) {
				return
			}
		}
	}()
	var v RecordView
	for _, d := range data {
		if IsJSON(d) {
			var r Record
			if err := json.Unmarshal(d, &r); err != nil {
				return g, err
			}
			ViewOf(&r, &v)
		} else if err := v.Decode(d); err != nil {
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
			s.batch = make([][]byte, 0, chunk)
		}
	}
	s.batch = append(s.batch, data)
	if len(s.batch) == chunk {
		s.flush()
	}
}

func (s *Summer) flush() {
	if len(s.batch) == 0 {
		return
	}
	s.work <- sumJob{n: s.next, data: s.batch}
	s.next++
	s.batch = nil
}

// Report waits for the sums and returns the report, or the error of the
// first record that did not decode. Call it once.
func (s *Summer) Report() (Report, error) {
	s.flush()
	close(s.work)
	s.workers.Wait()
	close(s.results)
	<-s.merged
	return s.total.Report(), s.err
}
