package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Sentinel errors wrapped by *ParseError; test with errors.Is.
var (
	// ErrMissingColumn: a required column is absent from the header.
	ErrMissingColumn = errors.New("trace: missing column")
	// ErrBadValue: a cell does not hold a valid value for its column.
	ErrBadValue = errors.New("trace: bad value")
	// ErrDuplicateName: two rows carry the same node or pod name.
	ErrDuplicateName = errors.New("trace: duplicate name")
	// ErrEmpty: the file has no header row.
	ErrEmpty = errors.New("trace: empty file")
	// ErrNoTimes: the pod list has no creation and deletion times.
	ErrNoTimes = errors.New("trace: pod list has no creation/deletion times")
)

// ParseError reports a bad row or header of a trace file.
type ParseError struct {
	File   string // file name as given to the reader
	Line   int    // 1-based line in the file (0 when unknown)
	Column string // column name ("" for problems with the whole row)
	Err    error  // wraps one of the sentinel errors or a csv error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("trace: ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, ": column %s", e.Column)
	}
	b.WriteString(": ")
	b.WriteString(strings.TrimPrefix(e.Err.Error(), "trace: "))
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// NoTime marks a time cell that is empty or a time column that is absent.
const NoTime int64 = -1

// OpenBNode is one row of an openb node list: one server.
type OpenBNode struct {
	Name      string // column sn
	CPUMilli  int64  // cpu_milli
	MemoryMiB int64  // memory_mib
	GPUs      int    // gpu: GPUs on the node, each 1000 milli
	Model     string // model: GPU model ("" on CPU-only nodes)
}

// OpenBPod is one row of an openb pod list: one task.
type OpenBPod struct {
	Name      string // name
	CPUMilli  int64  // cpu_milli
	MemoryMiB int64  // memory_mib
	NumGPU    int    // num_gpu: GPUs requested (0 for CPU-only pods)
	// GPUMilli is gpu_milli as written: the share of each requested GPU in
	// thousandths (1000 for whole GPUs). It is not clamped.
	GPUMilli int64
	// GPUSpec is gpu_spec as written: allowed GPU models separated by '|';
	// "" (or an absent column) allows any model.
	GPUSpec string
	QoS     string // qos ("" when the column is absent)
	Phase   string // pod_phase ("" when the column is absent)
	// Times in seconds from the start of the trace; NoTime when empty or absent.
	CreationTime  int64
	DeletionTime  int64
	ScheduledTime int64
}

// AllowedModels returns the models of GPUSpec; nil means any model.
func (p *OpenBPod) AllowedModels() []string {
	if p.GPUSpec == "" {
		return nil
	}
	var out []string
	for _, m := range strings.Split(p.GPUSpec, "|") {
		if m != "" {
			out = append(out, m)
		}
	}
	return out
}

// ReadOpenBNodesFile reads an openb node list from a file.
func ReadOpenBNodesFile(path string) ([]OpenBNode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpenBNodes(f, filepath.Base(path))
}

// ReadOpenBPodsFile reads an openb pod list from a file.
func ReadOpenBPodsFile(path string) ([]OpenBPod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpenBPods(f, filepath.Base(path))
}

// table is a CSV reader that finds columns by header name.
type table struct {
	file string
	r    *csv.Reader
	cols map[string]int
	rec  []string
}

func newTable(r io.Reader, file string) (*table, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = 0 // every row as wide as the header
	hdr, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: file, Line: 1, Err: ErrEmpty}
	}
	if err != nil {
		return nil, csvError(file, err)
	}
	t := &table{file: file, r: cr, cols: make(map[string]int, len(hdr))}
	for i, h := range hdr {
		h = strings.TrimSpace(h)
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		if _, dup := t.cols[h]; !dup {
			t.cols[h] = i
		}
	}
	return t, nil
}

func csvError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: file, Line: pe.Line, Err: fmt.Errorf("%w: %v", ErrBadValue, pe.Err)}
	}
	return &ParseError{File: file, Err: err}
}

func (t *table) require(names ...string) error {
	for _, n := range names {
		if _, ok := t.cols[n]; !ok {
			return &ParseError{File: t.file, Line: 1, Column: n, Err: ErrMissingColumn}
		}
	}
	return nil
}

// next reads the next row; it returns io.EOF at the end.
func (t *table) next() error {
	rec, err := t.r.Read()
	if err != nil {
		if err == io.EOF {
			return err
		}
		return csvError(t.file, err)
	}
	t.rec = rec
	return nil
}

func (t *table) line() int {
	l, _ := t.r.FieldPos(0)
	return l
}

func (t *table) bad(col, format string, args ...any) error {
	line := t.line()
	if i, ok := t.cols[col]; ok {
		line, _ = t.r.FieldPos(i)
	}
	return &ParseError{File: t.file, Line: line, Column: col,
		Err: fmt.Errorf("%w: %s", ErrBadValue, fmt.Sprintf(format, args...))}
}

// str returns the trimmed cell of col, or "" when the column is absent.
func (t *table) str(col string) string {
	i, ok := t.cols[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

// int reads a required integer cell in [lo, hi]. Values written as floats
// with an integral value ("1000.0") are accepted.
func (t *table) int(col string, lo, hi int64) (int64, error) {
	s := t.str(col)
	if s == "" {
		return 0, t.bad(col, "empty cell")
	}
	v, err := parseInt(s)
	if err != nil {
		return 0, t.bad(col, "%q is not an integer", s)
	}
	if v < lo || v > hi {
		return 0, t.bad(col, "%d out of range [%d, %d]", v, lo, hi)
	}
	return v, nil
}

// time reads an optional time cell: NoTime when empty or absent.
func (t *table) time(col string) (int64, error) {
	s := t.str(col)
	if s == "" {
		return NoTime, nil
	}
	v, err := parseInt(s)
	if err != nil {
		return 0, t.bad(col, "%q is not a time in seconds", s)
	}
	if v < 0 {
		return 0, t.bad(col, "negative time %d", v)
	}
	return v, nil
}

func parseInt(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return v, nil
	}
	f, ferr := strconv.ParseFloat(s, 64)
	if ferr != nil || f != float64(int64(f)) || f > 1<<53 || f < -(1<<53) {
		return 0, err
	}
	return int64(f), nil
}

// Limits on values, far above any real machine, that keep sums from
// overflowing.
const (
	maxCPUMilli  = 1 << 40
	maxMemoryMiB = 1 << 40
	maxGPUs      = 64
	maxGPUMilli  = 1 << 30
)

// ReadOpenBNodes reads an openb node list (columns sn, cpu_milli,
// memory_mib, gpu, model). file names the input in errors.
func ReadOpenBNodes(r io.Reader, file string) ([]OpenBNode, error) {
	t, err := newTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require("sn", "cpu_milli", "memory_mib", "gpu", "model"); err != nil {
		return nil, err
	}
	var out []OpenBNode
	seen := map[string]bool{}
	for {
		if err := t.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		var n OpenBNode
		if n.Name = t.str("sn"); n.Name == "" {
			return nil, t.bad("sn", "empty node name")
		}
		if seen[n.Name] {
			return nil, &ParseError{File: file, Line: t.line(), Column: "sn",
				Err: fmt.Errorf("%w: %q", ErrDuplicateName, n.Name)}
		}
		seen[n.Name] = true
		if n.CPUMilli, err = t.int("cpu_milli", 0, maxCPUMilli); err != nil {
			return nil, err
		}
		if n.MemoryMiB, err = t.int("memory_mib", 0, maxMemoryMiB); err != nil {
			return nil, err
		}
		g, err := t.int("gpu", 0, maxGPUs)
		if err != nil {
			return nil, err
		}
		n.GPUs = int(g)
		n.Model = t.str("model")
		if n.GPUs > 0 && n.Model == "" {
			return nil, t.bad("model", "empty GPU model on a node with %d GPUs", n.GPUs)
		}
		out = append(out, n)
	}
	return out, nil
}

// ReadOpenBPods reads an openb pod list. Columns name, cpu_milli,
// memory_mib, num_gpu and gpu_milli are required; gpu_spec, qos, pod_phase
// and the three time columns are optional. file names the input in errors.
func ReadOpenBPods(r io.Reader, file string) ([]OpenBPod, error) {
	t, err := newTable(r, file)
	if err != nil {
		return nil, err
	}
	if err := t.require("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"); err != nil {
		return nil, err
	}
	var out []OpenBPod
	seen := map[string]bool{}
	for {
		if err := t.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		var p OpenBPod
		if p.Name = t.str("name"); p.Name == "" {
			return nil, t.bad("name", "empty pod name")
		}
		if seen[p.Name] {
			return nil, &ParseError{File: file, Line: t.line(), Column: "name",
				Err: fmt.Errorf("%w: %q", ErrDuplicateName, p.Name)}
		}
		seen[p.Name] = true
		if p.CPUMilli, err = t.int("cpu_milli", 0, maxCPUMilli); err != nil {
			return nil, err
		}
		if p.MemoryMiB, err = t.int("memory_mib", 0, maxMemoryMiB); err != nil {
			return nil, err
		}
		k, err := t.int("num_gpu", 0, maxGPUs)
		if err != nil {
			return nil, err
		}
		p.NumGPU = int(k)
		if p.GPUMilli, err = t.int("gpu_milli", -maxGPUMilli, maxGPUMilli); err != nil {
			return nil, err
		}
		p.GPUSpec = t.str("gpu_spec")
		p.QoS = t.str("qos")
		p.Phase = t.str("pod_phase")
		if p.CreationTime, err = t.time("creation_time"); err != nil {
			return nil, err
		}
		if p.DeletionTime, err = t.time("deletion_time"); err != nil {
			return nil, err
		}
		if p.ScheduledTime, err = t.time("scheduled_time"); err != nil {
			return nil, err
		}
		if p.DeletionTime != NoTime && p.CreationTime != NoTime && p.DeletionTime < p.CreationTime {
			return nil, t.bad("deletion_time", "deletion time %d before creation time %d",
				p.DeletionTime, p.CreationTime)
		}
		out = append(out, p)
	}
	return out, nil
}

// EventKind says whether a pod arrives or departs.
type EventKind uint8

// Event kinds.
const (
	Departure EventKind = iota + 1
	Arrival
)

func (k EventKind) String() string {
	switch k {
	case Arrival:
		return "arrival"
	case Departure:
		return "departure"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one arrival or departure of a pod at a time in seconds.
type Event struct {
	Time int64
	Kind EventKind
	Pod  int // index into the pod slice the timeline was built from
}

// OpenBTimeline turns a pod list into a time-ordered list of arrivals (at
// creation_time) and departures (at deletion_time), the input of a
// time-based simulation. Pods without a creation time are left out; pods
// without a deletion time never depart. Events are ordered by time; at one
// time, departures of pods that arrived earlier come first (the capacity
// they free is available to arrivals at that time), then arrivals, then
// departures of pods that arrived at that same time; ties by pod index. It returns ErrNoTimes when
// no pod has a creation time (the multigpu variants carry no times).
func OpenBTimeline(pods []OpenBPod) ([]Event, error) {
	events := make([]Event, 0, 2*len(pods))
	for i := range pods {
		p := &pods[i]
		if p.CreationTime == NoTime {
			continue
		}
		events = append(events, Event{Time: p.CreationTime, Kind: Arrival, Pod: i})
		if p.DeletionTime != NoTime {
			events = append(events, Event{Time: p.DeletionTime, Kind: Departure, Pod: i})
		}
	}
	if len(events) == 0 && len(pods) > 0 {
		return nil, ErrNoTimes
	}
	// rank orders events at one time: departures of pods that arrived
	// earlier, then arrivals, then departures of pods that arrived at this
	// very time (zero-length pods leave after they came).
	rank := func(e Event) int {
		switch {
		case e.Kind == Arrival:
			return 1
		case pods[e.Pod].CreationTime < e.Time:
			return 0
		}
		return 2
	}
	sort.Slice(events, func(a, b int) bool {
		ea, eb := events[a], events[b]
		if ea.Time != eb.Time {
			return ea.Time < eb.Time
		}
		if ra, rb := rank(ea), rank(eb); ra != rb {
			return ra < rb
		}
		return ea.Pod < eb.Pod
	})
	return events, nil
}
