package meter

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// ErrInvalid is the error of every parser here; the message names the
// flag or field.
var ErrInvalid = errors.New("meter: invalid")

// Dim is a dimension a report groups by.
type Dim int

// Dimensions.
const (
	DimTenant Dim = iota + 1
	DimKind
	DimRegion
	DimSKU
	DimModel
	DimCharge
	DimClass
	DimWorkload
)

var dimNames = [...]string{"", "tenant", "kind", "region", "sku", "model", "charge", "class", "workload"}

func (d Dim) String() string {
	if d <= 0 || int(d) >= len(dimNames) {
		return fmt.Sprintf("Dim(%d)", int(d))
	}
	return dimNames[d]
}

// ParseGroupBy reads a comma-separated list of dimensions (flag names
// the field in errors). Empty means tenant.
func ParseGroupBy(flag, s string) ([]Dim, error) {
	if strings.TrimSpace(s) == "" {
		return []Dim{DimTenant}, nil
	}
	var out []Dim
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		d := Dim(slices.Index(dimNames[:], part))
		if part == "" || d <= 0 {
			return nil, fmt.Errorf("%w: %s: unknown dimension %q (want %s)", ErrInvalid, flag, part, strings.Join(dimNames[1:], ", "))
		}
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("%w: %s: %q given twice", ErrInvalid, flag, part)
		}
		out = append(out, d)
	}
	return out, nil
}

// ParseTime reads a report bound: a duration back from now ("30d", "12h",
// "90m", "1w"), an RFC 3339 time or a date (YYYY-MM-DD, UTC). flag names
// the field in errors.
func ParseTime(flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("%w: %s: empty", ErrInvalid, flag)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	d, err := parseAgo(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %q is not a duration (30d, 12h, 1w), an RFC 3339 time or a date (2006-01-02)", ErrInvalid, flag, s)
	}
	return now.Add(-d), nil
}

func parseAgo(s string) (time.Duration, error) {
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	if u, ok := unit[s[len(s)-1]]; ok {
		n, err := strconv.ParseFloat(s[:len(s)-1], 64)
		if err != nil || !(n >= 0 && n <= 100*365) { // NaN fails both
			return 0, errors.New("bad")
		}
		return time.Duration(n * float64(u)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("bad")
	}
	return d, nil
}

// Window checks a report's window: since before until.
func Window(since, until time.Time) error {
	if !since.Before(until) {
		return fmt.Errorf("%w: since: %s is not before until %s", ErrInvalid, since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	return nil
}

// Row is one group of a report: its key (one value per dimension), its
// GPU-hours and cost (USD) and list cost, and how many records.
type Row struct {
	Keys     []string `json:"keys"`
	GPUHours float64  `json:"gpu_hours"`
	Cost     float64  `json:"cost_usd"`
	ListCost float64  `json:"list_cost_usd"`
	Records  int      `json:"records"`
}

// Report is the cost report over a window.
type Report struct {
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	GroupBy []string  `json:"group_by"`
	Rows    []Row     `json:"rows"`
	Total   Row       `json:"total"`
}

// maxDims bounds a report's dimensions (each at most once).
const maxDims = len(dimNames) - 1

// key is a group's key: each dimension's value by its number in the
// aggregator's table of that dimension's values (small maps that stay in
// cache).
type key [maxDims]uint32

type sums struct {
	gpuh, cost, list float64
	n                int
}

// add counts one record's GPU-hours at its unit and list prices.
func (s *sums) add(gpuh, unit, list float64) {
	s.gpuh += gpuh
	s.cost += gpuh * unit
	s.list += gpuh * list
	s.n++
}

// Aggregator sums records into a report's groups. The groups' sums sit
// in one slice; a group is found by its key packed in a uint64 (up to 4
// dimensions of up to 65536 values each: the common case, and the
// fastest map) or else by the whole key.
type Aggregator struct {
	since, until time.Time
	by           []Dim
	ids          [maxDims]map[string]uint32
	names        [maxDims][]string
	packed       map[uint64]int32
	wide         map[key]int32
	keys         []key
	sums         []sums
	total        sums
	// base is the aggregator g was cloned from (nil: none): g's first
	// len(base.sums) groups are base's, in base's order.
	base *Aggregator
}

// NewAggregator starts a report over [since, until) grouped by by (at
// most one of each dimension; ParseGroupBy's answer).
func NewAggregator(since, until time.Time, by []Dim) *Aggregator {
	return newAggregatorSized(since, until, by, 0)
}

// newAggregatorSized is NewAggregator with room for about n groups (a
// hint: the sums do not depend on it).
func newAggregatorSized(since, until time.Time, by []Dim, n int) *Aggregator {
	g := &Aggregator{since: since, until: until, by: by[:min(len(by), maxDims)], packed: make(map[uint64]int32, n), wide: map[key]int32{},
		keys: make([]key, 0, n), sums: make([]sums, 0, n)}
	for i := range g.by {
		g.ids[i] = map[string]uint32{}
	}
	return g
}

// clone is a new aggregator over g's window and dimensions that starts
// with g's groups, their sums zero.
func (g *Aggregator) clone() *Aggregator {
	c := &Aggregator{since: g.since, until: g.until, by: g.by, packed: maps.Clone(g.packed), wide: maps.Clone(g.wide),
		keys: slices.Clone(g.keys), sums: make([]sums, len(g.sums), cap(g.sums)), base: g}
	for i := range g.by {
		c.ids[i], c.names[i] = maps.Clone(g.ids[i]), slices.Clone(g.names[i])
	}
	return c
}

// id is v's number among dimension i's values.
func (g *Aggregator) id(i int, v string) uint32 {
	id, ok := g.ids[i][v]
	if !ok {
		id = uint32(len(g.names[i]))
		g.ids[i][v] = id
		g.names[i] = append(g.names[i], v)
	}
	return id
}

// group returns the sums of the group of key k.
func (g *Aggregator) group(k *key) *sums { return &g.sums[g.groupIndex(k)] }

// groupIndex returns the index of the group of key k in g.sums.
func (g *Aggregator) groupIndex(k *key) int32 {
	var p uint64
	fits := len(g.by) <= 4
	for i := range g.by {
		fits = fits && k[i] < 1<<16
		p |= uint64(k[i]) << (16 * i)
	}
	var idx int32
	var ok bool
	if fits {
		idx, ok = g.packed[p]
	} else {
		idx, ok = g.wide[*k]
	}
	if !ok {
		idx = int32(len(g.sums))
		g.sums = append(g.sums, sums{})
		g.keys = append(g.keys, *k)
		if fits {
			g.packed[p] = idx
		} else {
			g.wide[*k] = idx
		}
	}
	return idx
}

func dimValue(r *Record, d Dim) string {
	switch d {
	case DimTenant:
		return r.Tenant
	case DimKind:
		return r.Kind
	case DimRegion:
		return r.Region
	case DimSKU:
		return string(r.SKU)
	case DimModel:
		return string(r.Model)
	case DimCharge:
		return r.Charge.String()
	case DimClass:
		return r.Class
	case DimWorkload:
		return r.Workload
	}
	return ""
}

// Add counts the part of r inside the window.
func (g *Aggregator) Add(r *Record) {
	from, to, ok := r.Span(g.since, g.until)
	if !ok {
		return
	}
	gpuh := float64(r.GPUs) / 1000 * to.Sub(from).Hours()
	var k key
	for i, d := range g.by {
		k[i] = g.id(i, dimValue(r, d))
	}
	g.group(&k).add(gpuh, r.UnitPrice, r.ListPrice)
	g.total.add(gpuh, r.UnitPrice, r.ListPrice)
}

// viewValue is the value of dimension d of v (charge by name).
func viewValue(v *RecordView, d Dim) []byte {
	switch d {
	case DimTenant:
		return v.Tenant
	case DimKind:
		return v.Kind
	case DimRegion:
		return v.Region
	case DimSKU:
		return v.SKU
	case DimModel:
		return v.Model
	case DimClass:
		return v.Class
	case DimWorkload:
		return v.Workload
	}
	return nil
}

// idBytes is id for a value read in place: it allocates only for a value
// not seen before.
func (g *Aggregator) idBytes(i int, v []byte) uint32 {
	if id, ok := g.ids[i][string(v)]; ok {
		return id
	}
	return g.id(i, string(v))
}

// hours is the GPU-hours of gpus milli-GPUs over [start, end) (Unix
// nanoseconds; end 0: open) inside the window; ok false when the
// interval has no part inside it.
func (g *Aggregator) hours(gpus, start, end int64) (gpuh float64, ok bool) {
	if u := g.until.UnixNano(); end == 0 || end > u {
		end = u
	}
	if s := g.since.UnixNano(); start < s {
		start = s
	}
	if end <= start {
		return 0, false
	}
	return float64(gpus) / 1000 * time.Duration(end-start).Hours(), true
}

// AddView counts the part of the stored record v inside the window: the
// same sums as Add of v.Record(), without a copy.
func (g *Aggregator) AddView(v *RecordView) {
	gpuh, ok := g.hours(int64(v.GPUs), v.Start, v.End)
	if !ok {
		return
	}
	var k key
	for i, d := range g.by {
		if d == DimCharge {
			k[i] = g.id(i, v.Charge.String())
		} else {
			k[i] = g.idBytes(i, viewValue(v, d))
		}
	}
	g.group(&k).add(gpuh, v.UnitPrice, v.ListPrice)
	g.total.add(gpuh, v.UnitPrice, v.ListPrice)
}

// addHead counts the part of the record read from its head (Summer's
// item) inside the window into its group: AddView's sums, the group
// found by the record's tuple.
func (g *Aggregator) addHead(it *item) {
	gpuh, ok := g.hours(it.gpus, it.start, it.end)
	if !ok {
		return
	}
	g.sums[it.gi].add(gpuh, it.unit, it.list)
	g.total.add(gpuh, it.unit, it.list)
}

// Report returns the groups in key order and the totals.
func (g *Aggregator) Report() Report {
	rep := Report{Since: g.since, Until: g.until, Rows: []Row{}}
	for _, d := range g.by {
		rep.GroupBy = append(rep.GroupBy, d.String())
	}
	for j, k := range g.keys {
		s := g.sums[j]
		if s.n == 0 {
			continue // a group of a tuple no record in the window has
		}
		keys := make([]string, len(g.by))
		for i := range keys {
			keys[i] = g.names[i][k[i]]
		}
		rep.Rows = append(rep.Rows, Row{Keys: keys, GPUHours: s.gpuh, Cost: s.cost, ListCost: s.list, Records: s.n})
	}
	slices.SortFunc(rep.Rows, func(x, y Row) int { return slices.Compare(x.Keys, y.Keys) })
	rep.Total = Row{Keys: []string{}, GPUHours: g.total.gpuh, Cost: g.total.cost, ListCost: g.total.list, Records: g.total.n}
	return rep
}

// Merge adds o's groups (of the same window and dimensions) to g's.
func (g *Aggregator) Merge(o *Aggregator) {
	shared := 0 // the groups o and g have from the same base, in its order
	if o.base != nil && o.base == g.base {
		shared = min(len(o.base.sums), len(g.sums), len(o.sums))
	}
	for j, ok := range o.keys {
		os := &o.sums[j]
		var s *sums
		if j < shared {
			s = &g.sums[j]
		} else {
			var k key
			for i := range g.by {
				k[i] = g.id(i, o.names[i][ok[i]])
			}
			s = g.group(&k)
		}
		s.gpuh += os.gpuh
		s.cost += os.cost
		s.list += os.list
		s.n += os.n
	}
	g.total.gpuh += o.total.gpuh
	g.total.cost += o.total.cost
	g.total.list += o.total.list
	g.total.n += o.total.n
}

// chunk is how many records one aggregator of Aggregate sums: fixed, so
// that the order of the additions (chunk by chunk) and so the sums are
// the same on every machine, however many run at once.
var chunk = 1 << 20 // a variable for the tests

// Aggregate is a report of recs: chunks of them summed at once on up to
// GOMAXPROCS goroutines, merged in chunk order.
func Aggregate(recs []Record, since, until time.Time, by []Dim) Report {
	n := (len(recs) + chunk - 1) / chunk
	if n <= 1 {
		g := NewAggregator(since, until, by)
		for i := range recs {
			g.Add(&recs[i])
		}
		return g.Report()
	}
	parts := make([]*Aggregator, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				g := NewAggregator(since, until, by)
				for i := c * chunk; i < min((c+1)*chunk, len(recs)); i++ {
					g.Add(&recs[i])
				}
				parts[c] = g
			}
		}()
	}
	wg.Wait()
	g := NewAggregator(since, until, by)
	for _, p := range parts {
		g.Merge(p)
	}
	return g.Report()
}

func money(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func hours(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// WriteTable writes the report as an aligned table with a TOTAL row.
func (rep Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := make([]string, 0, len(rep.GroupBy)+3)
	for _, d := range rep.GroupBy {
		head = append(head, strings.ToUpper(d))
	}
	head = append(head, "GPU-HOURS", "COST-USD", "LIST-USD")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rep.Rows {
		cells := make([]string, 0, len(head))
		for _, k := range r.Keys {
			cells = append(cells, cmp.Or(k, "-"))
		}
		cells = append(cells, hours(r.GPUHours), money(r.Cost), money(r.ListCost))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	cells := []string{"TOTAL"}
	for range max(len(rep.GroupBy)-1, 0) {
		cells = append(cells, "")
	}
	cells = append(cells, hours(rep.Total.GPUHours), money(rep.Total.Cost), money(rep.Total.ListCost))
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	return tw.Flush()
}

// CSVRows is the report as CSV rows: a header (one column per
// dimension, then gpu_hours, cost_usd, list_cost_usd and records), the
// groups, and the total (its keys "TOTAL", then empty).
func (rep Report) CSVRows() [][]string {
	head := append(slices.Clone(rep.GroupBy), "gpu_hours", "cost_usd", "list_cost_usd", "records")
	out := [][]string{head}
	row := func(keys []string, r Row) []string {
		return append(slices.Clone(keys), hours(r.GPUHours), money(r.Cost), money(r.ListCost), strconv.Itoa(r.Records))
	}
	for _, r := range rep.Rows {
		out = append(out, row(r.Keys, r))
	}
	tk := make([]string, len(rep.GroupBy))
	if len(tk) > 0 {
		tk[0] = "TOTAL"
	}
	return append(out, row(tk, rep.Total))
}

// WriteCSV writes CSVRows.
func (rep Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.WriteAll(rep.CSVRows()); err != nil {
		return err
	}
	return cw.Error()
}

// round6 rounds to a millionth: the last bits of sums are not the same
// on every machine (fused multiply-add), a millionth of a dollar or
// GPU-hour is.
func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func (r Row) rounded() Row {
	r.GPUHours, r.Cost, r.ListCost = round6(r.GPUHours), round6(r.Cost), round6(r.ListCost)
	return r
}

// WriteJSON writes the report as indented JSON, amounts rounded to a
// millionth.
func (rep Report) WriteJSON(w io.Writer) error {
	rows := make([]Row, len(rep.Rows))
	for i, r := range rep.Rows {
		rows[i] = r.rounded()
	}
	rep.Rows, rep.Total = rows, rep.Total.rounded()
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(rep)
}
