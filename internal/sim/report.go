package sim

import (
	"html"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The report is one self-contained HTML page: inline CSS and inline SVG
// charts drawn here, no scripts, fonts or anything else fetched, so it
// renders offline and with JavaScript disabled. Output is a pure function
// of Results: nothing iterates over a map, and every number is formatted
// with a fixed precision, so the same Results give byte-identical pages.

// maxPoints bounds the points per drawn line; longer series are bucketed.
const maxPoints = 500

// maxAreaPoints bounds the points per stacked area (one area per tenant
// per strategy, so they add up faster than lines).
const maxAreaPoints = 300

var strategyColors = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"}

var areaColors = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
	"#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d", "#f1ce63", "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e",
}

// Line styles for spot-price regions: SVG dash arrays and the CSS border
// styles the legend draws them with.
var (
	regionDash   = []string{"", "7 4", "2 3", "10 3 2 3"}
	regionBorder = []string{"solid", "dashed", "dotted", "double"}
)

func esc(s string) string { return html.EscapeString(s) }

func pick(p []string, i int) string { return p[i%len(p)] }

// WriteHTML writes report.html: the comparison table and the time-series
// charts of every strategy.
func (r *Results) WriteHTML(w io.Writer) error {
	var b strings.Builder
	title := "Arbiter simulation: " + r.Scenario
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>" + esc(title) + "</title>\n<style>\n" + reportCSS + "</style>\n</head>\n<body>\n")
	b.WriteString("<h1>" + esc(title) + "</h1>\n")
	names := make([]string, len(r.Strategies))
	for i, sr := range r.Strategies {
		names[i] = sr.Strategy
	}
	b.WriteString("<p class=\"meta\">seed <b>" + strconv.FormatUint(r.Seed, 10) + "</b> · <b>" + fmtNum(r.Days, 2) +
		"</b> days · <b>" + strconv.Itoa(r.GPUs) + "</b> GPUs · strategies: <b>" + esc(strings.Join(names, ", ")) + "</b></p>\n")

	r.writeStrategies(&b)
	r.writeTable(&b)

	if len(r.Strategies) > 0 {
		xMax := r.xMax()
		b.WriteString("<h2>Time series</h2>\n")
		r.writeClassCharts(&b)
		r.writeTenantCharts(&b, xMax)
		r.writeLatencyCharts(&b, xMax)
		r.writeLineCharts(&b, xMax)
		r.writeSpotCharts(&b, xMax)
	}
	writeGlossary(&b)
	b.WriteString("<footer>Written by arbiter sim. Time in days from the scenario start; one sample every " +
		SampleEvery.String() + ", lines bucketed to at most " + strconv.Itoa(maxPoints) + " points.</footer>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const reportCSS = `body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#222;background:#fff;margin:24px auto;max-width:1360px;padding:0 16px}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:20px;margin:32px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:16px;margin:20px 0 4px}
p.meta{color:#555;margin:0 0 16px}
p.note{color:#666;font-size:13px;margin:2px 0 6px}
table{border-collapse:collapse;font-size:14px}
th,td{padding:5px 14px;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
thead th{border-bottom:2px solid #888}
td.best{background:#dff3df;font-weight:600}
table.glossary td{white-space:normal;text-align:left;vertical-align:top;font-size:13px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.ln{display:inline-block;width:22px;height:0;border-top-width:3px;margin-right:5px;vertical-align:3px}
.legend{font-size:13px;margin:4px 0 6px}
.legend span.item{margin-right:14px;white-space:nowrap;display:inline-block}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(400px,1fr));gap:12px 20px}
.grid2{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:12px 20px}
svg.chart{width:100%;max-width:720px;height:auto;display:block}
svg.chart text{font-family:inherit}
footer{color:#777;font-size:12px;margin:32px 0 8px}
`

// writeTable writes the comparison table (Results.MetricRows), then the
// classes' table (ClassRows of every class), the best value of a row
// marked where it matters.
func (r *Results) writeTable(b *strings.Builder) {
	b.WriteString("<h2 id=\"comparison\">Comparison</h2>\n")
	r.writeRows(b, r.MetricRows())
	b.WriteString("<h2 id=\"classes\">Classes</h2>\n<p class=\"note\">Per class of the scenario's <code>classes</code> section; " +
		"the CLI shows the classes with a promise (sla, reservation, slo) and every class with --all-classes.</p>\n")
	r.writeRows(b, r.ClassRows(true))
}

// writeRows writes one table of rows, a column per strategy.
func (r *Results) writeRows(b *strings.Builder, rows []Row) {
	b.WriteString("<table>\n<thead><tr><th>metric</th>")
	for i, sr := range r.Strategies {
		b.WriteString("<th><span class=\"sw\" style=\"background:" + pick(strategyColors, i) + "\"></span>" + esc(sr.Strategy) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range rows {
		b.WriteString("<tr><td>" + esc(row.Label))
		switch row.Better {
		case +1:
			b.WriteString(" <small title=\"higher is better\">↑</small>")
		case -1:
			b.WriteString(" <small title=\"lower is better\">↓</small>")
		}
		b.WriteString("</td>")
		for i, v := range row.Cells {
			if row.Best[i] {
				b.WriteString("<td class=\"best\">")
			} else {
				b.WriteString("<td>")
			}
			b.WriteString(esc(v) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
}

// writeGlossary defines every metric of the tables and the CSVs, from
// Metrics, ClassMetrics and SeriesColumns.
func writeGlossary(b *strings.Builder) {
	b.WriteString("<h2 id=\"glossary\">Glossary</h2>\n<p class=\"note\">Every metric, defined once (docs/metrics.md holds the same). " +
		"n/a: the metric does not apply to the run (null in results.json). ↑ higher is better, ↓ lower is better.</p>\n")
	b.WriteString("<table class=\"glossary\">\n<thead><tr><th>metric</th><th>key</th><th>unit</th><th>covers</th><th>definition</th></tr></thead>\n<tbody>\n")
	row := func(label, key, unit string, better int, covers, def string) {
		b.WriteString("<tr><td>" + esc(label) + " " + arrow(better) + "</td><td><code>" + esc(key) + "</code></td><td>" + esc(unit) +
			"</td><td>" + esc(covers) + "</td><td>" + esc(def) + "</td></tr>\n")
	}
	for _, d := range Metrics {
		row(d.Label, d.Key, d.Unit, d.Better, d.Covers, d.Definition)
	}
	for _, d := range ClassMetrics {
		row("class: "+d.Label, "classes.NAME."+d.Key, d.Unit, d.Better, "the class's workloads", d.Definition)
	}
	for _, d := range SeriesColumns {
		key := d.Column
		if d.Names != nil {
			key += "NAME"
		}
		row("time series: "+key, key+" (CSV)", d.Unit, 0, "", d.Definition)
	}
	b.WriteString("</tbody>\n</table>\n")
}

func (r *Results) xMax() float64 {
	x := r.Days
	for _, sr := range r.Strategies {
		if n := len(sr.Series.Times); n > 0 {
			x = math.Max(x, sr.Series.Times[n-1].Hours()/24)
		}
	}
	if x <= 0 {
		x = 1
	}
	return x
}

func strategyLegend(b *strings.Builder, srs []*StrategyResult, extra string) {
	b.WriteString("<div class=\"legend\">")
	for i, sr := range srs {
		b.WriteString("<span class=\"item\"><span class=\"ln\" style=\"border-top-style:solid;border-top-color:" + pick(strategyColors, i) + "\"></span>" + esc(sr.Strategy) + "</span>")
	}
	b.WriteString(extra + "</div>\n")
}

// union returns the names of every strategy's series in first-seen order.
func (r *Results) union(names func(*Series) []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, sr := range r.Strategies {
		for _, n := range names(&sr.Series) {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

func index(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func at(row []float64, i int) float64 {
	if i < 0 || i >= len(row) {
		return 0
	}
	return row[i]
}

// buckets splits n rows into at most limit consecutive [lo, hi) ranges.
func buckets(n, limit int) [][2]int {
	size := (n + limit - 1) / limit
	if size < 1 {
		size = 1
	}
	var out [][2]int
	for lo := 0; lo < n; lo += size {
		out = append(out, [2]int{lo, min(lo+size, n)})
	}
	return out
}

type aggregate int

const (
	aggLast aggregate = iota // cumulative series: the bucket's last row
	aggMean                  // levels: the mean over the bucket
	aggMax                   // latencies: the worst row, so spikes survive
)

// points turns column y of a series into chart points (x in days),
// bucketed to at most limit points.
func points(se *Series, limit int, agg aggregate, y func(row int) float64) []pt {
	n := len(se.Times)
	var out []pt
	for _, bk := range buckets(n, limit) {
		lo, hi := bk[0], bk[1]
		switch agg {
		case aggLast:
			out = append(out, pt{days(se.Times[hi-1]), y(hi - 1)})
		case aggMean:
			var sx, sy float64
			for i := lo; i < hi; i++ {
				sx += days(se.Times[i])
				sy += y(i)
			}
			k := float64(hi - lo)
			out = append(out, pt{sx / k, sy / k})
		case aggMax:
			var sx float64
			m := math.Inf(-1)
			for i := lo; i < hi; i++ {
				sx += days(se.Times[i])
				m = math.Max(m, y(i))
			}
			out = append(out, pt{sx / float64(hi-lo), m})
		}
	}
	return out
}

func days(d time.Duration) float64 { return d.Hours() / 24 }

// writeTenantCharts draws GPUs by tenant as one stacked-area chart per
// strategy, all on the same scale.
func (r *Results) writeTenantCharts(b *strings.Builder, xMax float64) {
	tenants := r.union(func(s *Series) []string { return s.Tenants })
	// Only tenants that ever held a GPU (parents of the tenant tree hold
	// none directly).
	var shown []string
	for _, t := range tenants {
		used := false
		for _, sr := range r.Strategies {
			se := &sr.Series
			ti := index(se.Tenants, t)
			for i := 0; i < len(se.Times) && ti >= 0 && !used; i++ {
				used = at(se.TenantGPUs[i], ti) > 0
			}
		}
		if used {
			shown = append(shown, t)
		}
	}
	b.WriteString("<h3 id=\"tenants\">GPUs by tenant</h3>\n<p class=\"note\">GPUs allocated to each tenant, stacked; the dashed line is the fleet's capacity.</p>\n<div class=\"legend\">")
	for i, t := range shown {
		b.WriteString("<span class=\"item\"><span class=\"sw\" style=\"background:" + pick(areaColors, i) + "\"></span>" + esc(t) + "</span>")
	}
	b.WriteString("<span class=\"item\"><span class=\"ln\" style=\"border-top-style:dashed;border-top-color:#333\"></span>capacity</span></div>\n<div class=\"grid\">\n")
	type stack struct{ tops [][]pt }
	stacks := make([]stack, len(r.Strategies))
	yMax := float64(r.GPUs)
	for si, sr := range r.Strategies {
		se := &sr.Series
		var cum []float64
		for _, t := range shown {
			ti := index(se.Tenants, t)
			p := points(se, maxAreaPoints, aggMean, func(i int) float64 { return at(se.TenantGPUs[i], ti) })
			if cum == nil {
				cum = make([]float64, len(p))
			}
			for k := range p {
				cum[k] += p[k].y
				p[k].y = cum[k]
				yMax = math.Max(yMax, cum[k])
			}
			stacks[si].tops = append(stacks[si].tops, p)
		}
	}
	for si, sr := range r.Strategies {
		c := &chart{title: sr.Strategy, yLabel: "GPUs", xMax: xMax, yMax: yMax, w: 460, h: 300}
		for i, p := range stacks[si].tops {
			c.areas = append(c.areas, series{name: shown[i], color: pick(areaColors, i), pts: p})
		}
		if r.GPUs > 0 {
			c.hlines = append(c.hlines, hline{y: float64(r.GPUs), label: "capacity " + strconv.Itoa(r.GPUs), color: "#333"})
		}
		c.render(b)
	}
	b.WriteString("</div>\n")
}

// writeLatencyCharts draws each inference service's p99 per strategy
// against its SLO, on a log scale (latencies are capped at maxLatency).
func (r *Results) writeLatencyCharts(b *strings.Builder, xMax float64) {
	services := r.union(func(s *Series) []string { return s.Services })
	b.WriteString("<h3 id=\"latency\">Inference time to first token p99 against the SLO, by day</h3>\n")
	if len(services) == 0 {
		b.WriteString("<p class=\"note\">No inference services in this scenario.</p>\n")
		return
	}
	b.WriteString("<p class=\"note\">One chart per strategy. Each day's " + SampleEvery.String() +
		" samples of the service's TTFT p99: the line is the day's median sample, the band runs from its 10th to its 90th percentile sample (log scale; a request turned away counts as " +
		maxLatency.String() + "). The red dashed line is the SLO.</p>\n")
	for _, svc := range services {
		b.WriteString("<div class=\"grid\">\n")
		for si, sr := range r.Strategies {
			se := &sr.Series
			k := index(se.Services, svc)
			if k < 0 {
				continue
			}
			color := pick(strategyColors, si)
			c := &chart{title: sr.Strategy + ": " + svc, yLabel: "TTFT p99", xMax: xMax, logY: true, yFmt: fmtMs, w: 460, h: 260}
			med, lo, hi := dailyBands(se, k)
			c.bands = append(c.bands, band{name: sr.Strategy + " p10–p90 of the day", color: color, lo: lo, hi: hi})
			c.lines = append(c.lines, series{name: sr.Strategy + " daily median", color: color, pts: med})
			if k < len(se.SLOMs) && se.SLOMs[k] > 0 {
				c.hlines = append(c.hlines, hline{y: se.SLOMs[k], label: "SLO " + fmtMs(se.SLOMs[k]), color: "#c00"})
			}
			c.render(b)
		}
		b.WriteString("</div>\n")
	}
}

// dailyBands is, per simulated day, the median and the 10th and 90th
// percentile of service k's TTFT p99 samples, at the day's middle.
func dailyBands(se *Series, k int) (med, lo, hi []pt) {
	var day []float64
	flush := func(d int) {
		if len(day) == 0 {
			return
		}
		sort.Float64s(day)
		q := func(f float64) float64 { return day[int(f*float64(len(day)-1)+0.5)] }
		x := float64(d) + 0.5
		med, lo, hi = append(med, pt{x, q(0.5)}), append(lo, pt{x, q(0.1)}), append(hi, pt{x, q(0.9)})
		day = day[:0]
	}
	cur := -1
	for i, t := range se.Times {
		d := int(days(t))
		if d != cur {
			flush(cur)
			cur = d
		}
		day = append(day, at(se.P99Ms[i], k))
	}
	flush(cur)
	return med, lo, hi
}

// writeStrategies says what each strategy is, in its file's words.
func (r *Results) writeStrategies(b *strings.Builder) {
	b.WriteString("<h2 id=\"strategies\">Strategies</h2>\n")
	for si, sr := range r.Strategies {
		d := sr.Description
		if d == "" {
			d = "(its file has no description)"
		}
		b.WriteString("<p><span class=\"sw\" style=\"background:" + pick(strategyColors, si) + "\"></span><b>" + esc(sr.Strategy) + "</b>: " + esc(d) + "</p>\n")
	}
}

// writeLineCharts draws the cumulative counters and utilization, one line
// per strategy.
func (r *Results) writeLineCharts(b *strings.Builder, xMax float64) {
	type spec struct {
		title, yLabel, note string
		agg                 aggregate
		y                   func(se *Series, i int) float64
		yFmt                func(float64) string
		yMaxAtLeast         float64
	}
	specs := []spec{
		{"Customer capacity failures", "failures (cumulative)", "Customer VM requests turned away with \"capacity not available\", cumulative.", aggLast,
			func(se *Series, i int) float64 { return float64(intAt(se.Failures, i)) }, nil, 0},
		{"Training progress", "GPU-hours (cumulative)", "GPU-hours delivered to training, cumulative.", aggLast,
			func(se *Series, i int) float64 { return floatAt(se.TrainingGPU, i) }, nil, 0},
		{"Preemptions", "preemptions (cumulative)", "Workloads preempted, cumulative.", aggLast,
			func(se *Series, i int) float64 { return float64(intAt(se.Preemptions, i)) }, nil, 0},
		{"GPU utilization", "utilization", "Share of the fleet's GPUs allocated.", aggMean,
			func(se *Series, i int) float64 { return floatAt(se.Utilization, i) }, fmtPct, 1},
	}
	b.WriteString("<div class=\"grid2\">\n")
	for _, s := range specs {
		b.WriteString("<div>\n<h3>" + esc(s.title) + "</h3>\n<p class=\"note\">" + esc(s.note) + "</p>\n")
		strategyLegend(b, r.Strategies, "")
		c := &chart{yLabel: s.yLabel, xMax: xMax, yFmt: s.yFmt, yMax: s.yMaxAtLeast, w: 680, h: 300}
		for si, sr := range r.Strategies {
			se := &sr.Series
			c.lines = append(c.lines, series{name: sr.Strategy, color: pick(strategyColors, si),
				pts: points(se, maxPoints, s.agg, func(i int) float64 { return s.y(se, i) })})
		}
		c.render(b)
		b.WriteString("</div>\n")
	}
	b.WriteString("</div>\n")
}

func intAt(xs []int, i int) int {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

func floatAt(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

// writeSpotCharts draws spot prices per strategy, one line per
// model/region key: colour by model, dash by region.
func (r *Results) writeSpotCharts(b *strings.Builder, xMax float64) {
	keys := r.union(func(s *Series) []string { return s.SpotKeys })
	b.WriteString("<h3 id=\"spot\">Spot price</h3>\n")
	if len(keys) == 0 {
		b.WriteString("<p class=\"note\">No spot prices in this scenario.</p>\n")
		return
	}
	var models, regions []string
	color := make([]string, len(keys))
	dash := make([]int, len(keys))
	for i, k := range keys {
		m, reg, _ := strings.Cut(k, "/")
		mi := index(models, m)
		if mi < 0 {
			mi = len(models)
			models = append(models, m)
		}
		ri := index(regions, reg)
		if ri < 0 {
			ri = len(regions)
			regions = append(regions, reg)
		}
		color[i], dash[i] = pick(strategyColors, mi), ri%len(regionDash)
	}
	b.WriteString("<p class=\"note\">Spot price in USD per GPU-hour for each GPU model and region (mean per point): colour by model, line style by region.</p>\n<div class=\"legend\">")
	for i, k := range keys {
		b.WriteString("<span class=\"item\"><span class=\"ln\" style=\"border-top-style:" + regionBorder[dash[i]] + ";border-top-color:" + color[i] + "\"></span>" + esc(k) + "</span>")
	}
	b.WriteString("</div>\n<div class=\"grid\">\n")
	yMax := 0.0
	lines := make([][]series, len(r.Strategies))
	for si, sr := range r.Strategies {
		se := &sr.Series
		for ki, k := range keys {
			j := index(se.SpotKeys, k)
			if j < 0 {
				continue
			}
			p := points(se, maxPoints, aggMean, func(i int) float64 { return at(se.SpotPrice[i], j) })
			for _, q := range p {
				yMax = math.Max(yMax, q.y)
			}
			lines[si] = append(lines[si], series{name: k, color: color[ki], dash: regionDash[dash[ki]], pts: p})
		}
	}
	for si, sr := range r.Strategies {
		c := &chart{title: sr.Strategy, yLabel: "USD per GPU-hour", xMax: xMax, yMax: yMax, yFmt: fmtUSD, w: 460, h: 300, lines: lines[si]}
		c.render(b)
	}
	b.WriteString("</div>\n")
}

// --- SVG charts ---

type pt struct{ x, y float64 }

type series struct {
	name, color, dash string
	pts               []pt
}

type hline struct {
	y            float64
	label, color string
}

// chart is one SVG chart: x in days from 0 to xMax, y from 0 (or a power
// of ten on a log scale) to at least yMax. Areas are cumulative tops, the
// first the lowest; lines are drawn over them.
type chart struct {
	title, yLabel string
	w, h          float64
	xMax, yMax    float64
	logY          bool
	yFmt          func(float64) string
	areas, lines  []series
	bands         []band
	hlines        []hline
}

// band is a shaded range between two lines (lo and hi at the same xs).
type band struct {
	name, color string
	lo, hi      []pt
}

const (
	marginLeft   = 62
	marginRight  = 14
	marginTop    = 26
	marginBottom = 40
)

func (c *chart) render(b *strings.Builder) {
	// The y range.
	lo, hi := math.Inf(1), c.yMax
	var bandPts []series
	for _, bd := range c.bands {
		bandPts = append(bandPts, series{pts: bd.hi}, series{pts: bd.lo})
	}
	for _, set := range [][]series{c.areas, c.lines, bandPts} {
		for _, s := range set {
			for _, p := range s.pts {
				hi = math.Max(hi, p.y)
				if p.y > 0 {
					lo = math.Min(lo, p.y)
				}
			}
		}
	}
	for _, h := range c.hlines {
		hi = math.Max(hi, h.y)
		if h.y > 0 {
			lo = math.Min(lo, h.y)
		}
	}
	var ticks []float64
	var y0, y1 float64
	if c.logY {
		if math.IsInf(lo, 1) {
			lo, hi = 1, 10
		}
		e0, e1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if e1 <= e0 {
			e1 = e0 + 1
		}
		y0, y1 = e0, e1
		mult := []float64{1, 2, 5}
		if e1-e0 > 3 {
			mult = []float64{1}
		}
		for e := e0; e <= e1; e++ {
			for _, m := range mult {
				if v := m * math.Pow(10, e); math.Log10(v) <= e1+1e-9 {
					ticks = append(ticks, v)
				}
			}
		}
	} else {
		if hi <= 0 {
			hi = 1
		}
		step := niceStep(hi, 5)
		top := math.Ceil(hi/step-1e-9) * step
		for i := 0; float64(i)*step <= top+step/1e6; i++ {
			ticks = append(ticks, float64(i)*step)
		}
		y0, y1 = 0, top
	}
	yFmt := c.yFmt
	if yFmt == nil {
		step := 1.0
		if len(ticks) > 1 {
			step = ticks[1] - ticks[0]
		}
		yFmt = func(v float64) string { return fmtTick(v, step) }
	}

	pw, ph := c.w-marginLeft-marginRight, c.h-marginTop-marginBottom
	px := func(x float64) float64 { return marginLeft + x/c.xMax*pw }
	py := func(y float64) float64 {
		if c.logY {
			if y <= 0 {
				return marginTop + ph
			}
			y = math.Log10(y)
		}
		v := marginTop + ph - (y-y0)/(y1-y0)*ph
		return math.Max(marginTop, math.Min(marginTop+ph, v))
	}

	label := c.title
	if label == "" {
		label = c.yLabel
	}
	b.WriteString("<svg class=\"chart\" viewBox=\"0 0 " + f0(c.w) + " " + f0(c.h) + "\" role=\"img\" aria-label=\"" + esc(label) + "\">\n")
	if c.title != "" {
		b.WriteString("<text x=\"" + f0(marginLeft) + "\" y=\"17\" font-size=\"14\" font-weight=\"600\" fill=\"#222\">" + esc(c.title) + "</text>\n")
	}
	// Grid and y ticks.
	b.WriteString("<g font-size=\"11\" fill=\"#555\" stroke-width=\"1\">\n")
	for _, t := range ticks {
		y := py(t)
		b.WriteString("<line x1=\"" + f0(marginLeft) + "\" x2=\"" + f1(marginLeft+pw) + "\" y1=\"" + f1(y) + "\" y2=\"" + f1(y) + "\" stroke=\"#e6e6e6\"/>")
		b.WriteString("<text x=\"" + f0(marginLeft-6) + "\" y=\"" + f1(y+4) + "\" text-anchor=\"end\">" + esc(yFmt(t)) + "</text>\n")
	}
	// X ticks in days.
	xStep := niceStep(c.xMax, 8)
	for i := 0; float64(i)*xStep <= c.xMax+xStep/1e6; i++ {
		d := float64(i) * xStep
		x := px(d)
		b.WriteString("<line x1=\"" + f1(x) + "\" x2=\"" + f1(x) + "\" y1=\"" + f0(marginTop) + "\" y2=\"" + f1(marginTop+ph) + "\" stroke=\"#f0f0f0\"/>")
		b.WriteString("<line x1=\"" + f1(x) + "\" x2=\"" + f1(x) + "\" y1=\"" + f1(marginTop+ph) + "\" y2=\"" + f1(marginTop+ph+5) + "\" stroke=\"#888\"/>")
		b.WriteString("<text x=\"" + f1(x) + "\" y=\"" + f1(marginTop+ph+17) + "\" text-anchor=\"middle\">" + fmtTick(d, xStep) + "</text>\n")
	}
	b.WriteString("<text x=\"" + f1(marginLeft+pw/2) + "\" y=\"" + f1(c.h-5) + "\" text-anchor=\"middle\" fill=\"#333\">days</text>\n")
	b.WriteString("<text transform=\"translate(13 " + f1(marginTop+ph/2) + ") rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">" + esc(c.yLabel) + "</text>\n")
	b.WriteString("</g>\n")

	// Stacked areas: drawn top first, each filled down to the baseline.
	base := f1(py(math.Inf(-1)))
	if !c.logY {
		base = f1(py(0))
	}
	for i := len(c.areas) - 1; i >= 0; i-- {
		s := c.areas[i]
		if len(s.pts) == 0 {
			continue
		}
		var d []byte
		d = append(d, 'M')
		d = append(d, f1(px(s.pts[0].x))...)
		d = append(d, ' ')
		d = append(d, base...)
		for _, p := range s.pts {
			d = appendPt(d, 'L', px(p.x), py(p.y))
		}
		d = append(d, 'L')
		d = append(d, f1(px(s.pts[len(s.pts)-1].x))...)
		d = append(d, ' ')
		d = append(d, base...)
		d = append(d, 'Z')
		b.WriteString("<path d=\"" + string(d) + "\" fill=\"" + s.color + "\" stroke=\"none\"><title>" + esc(s.name) + "</title></path>\n")
	}
	for _, bd := range c.bands {
		if len(bd.hi) == 0 {
			continue
		}
		var d []byte
		for i, p := range bd.hi {
			op := byte('L')
			if i == 0 {
				op = 'M'
			}
			d = appendPt(d, op, px(p.x), py(p.y))
		}
		for i := len(bd.lo) - 1; i >= 0; i-- {
			d = appendPt(d, 'L', px(bd.lo[i].x), py(bd.lo[i].y))
		}
		d = append(d, 'Z')
		b.WriteString("<path d=\"" + string(d) + "\" fill=\"" + bd.color + "\" fill-opacity=\"0.22\" stroke=\"none\"><title>" + esc(bd.name) + "</title></path>\n")
	}
	for _, h := range c.hlines {
		y := f1(py(h.y))
		b.WriteString("<line x1=\"" + f0(marginLeft) + "\" x2=\"" + f1(marginLeft+pw) + "\" y1=\"" + y + "\" y2=\"" + y + "\" stroke=\"" + h.color + "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>")
		b.WriteString("<text x=\"" + f1(marginLeft+pw-4) + "\" y=\"" + f1(py(h.y)-4) + "\" text-anchor=\"end\" font-size=\"11\" fill=\"" + h.color + "\">" + esc(h.label) + "</text>\n")
	}
	for _, s := range c.lines {
		if len(s.pts) == 0 {
			continue
		}
		var d []byte
		for i, p := range s.pts {
			op := byte('L')
			if i == 0 {
				op = 'M'
			}
			d = appendPt(d, op, px(p.x), py(p.y))
		}
		b.WriteString("<path d=\"" + string(d) + "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.8\" stroke-linejoin=\"round\"")
		if s.dash != "" {
			b.WriteString(" stroke-dasharray=\"" + s.dash + "\"")
		}
		b.WriteString("><title>" + esc(s.name) + "</title></path>\n")
	}
	// Axes.
	b.WriteString("<path d=\"M" + f0(marginLeft) + " " + f0(marginTop) + "V" + f1(marginTop+ph) + "H" + f1(marginLeft+pw) + "\" fill=\"none\" stroke=\"#888\"/>\n")
	b.WriteString("</svg>\n")
}

func appendPt(d []byte, op byte, x, y float64) []byte {
	d = append(d, op)
	d = strconv.AppendFloat(d, x, 'f', 1, 64)
	d = append(d, ' ')
	return strconv.AppendFloat(d, y, 'f', 1, 64)
}

func f0(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }
func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// niceStep is a 1, 2 or 5 × 10^k step that splits [0, span] into about n
// intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// fmtTick formats a tick value with as many decimals as its step needs,
// using k and M for thousands and millions.
func fmtTick(v, step float64) string {
	suffix := ""
	switch a := math.Max(math.Abs(v), step); {
	case a >= 1e6 && step >= 1e5:
		v, step, suffix = v/1e6, step/1e6, "M"
	case a >= 1e3 && step >= 100:
		v, step, suffix = v/1e3, step/1e3, "k"
	}
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	return fmtNum(v, dec) + suffix
}

// fmtNum formats x with at most dec decimals, trailing zeros dropped.
func fmtNum(x float64, dec int) string {
	s := strconv.FormatFloat(x, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

func fmtMs(ms float64) string {
	if ms >= 1000 {
		return fmtNum(ms/1000, 1) + " s"
	}
	return fmtNum(ms, 1) + " ms"
}

func fmtPct(x float64) string { return fmtNum(100*x, 0) + "%" }

func fmtUSD(x float64) string { return "$" + fmtNum(x, 2) }

// writeClassCharts draws, per class, each strategy's share of requests
// that failed for capacity and its time to capacity p95, as grouped
// horizontal bars: who pays for a strategy, at a glance.
func (r *Results) writeClassCharts(b *strings.Builder) {
	if len(r.Strategies) == 0 || len(r.Strategies[0].Classes) == 0 {
		return
	}
	b.WriteString("<h3 id=\"class-charts\">Classes at a glance</h3>\n<p class=\"note\">Per class: the share of its requests that failed for capacity, and the 95th percentile of the time to capacity of those placed. n/a: the class has no requests that can fail.</p>\n")
	strategyLegend(b, r.Strategies, "")
	b.WriteString("<div class=\"grid2\">\n")
	classBars(b, r.Strategies, "capacity failures", fmtPct, func(c *ClassResult) (float64, bool) {
		return c.CapacityFailureRate, c.Patient > 0
	})
	classBars(b, r.Strategies, "time to capacity p95", func(v float64) string { return dur(v) }, func(c *ClassResult) (float64, bool) {
		return c.TimeToCapacityP95S, c.Placed > 0
	})
	b.WriteString("</div>\n")
}

// classBars is one grouped bar chart: a group per class of the first
// strategy, a bar per strategy, scaled to the largest value.
func classBars(b *strings.Builder, srs []*StrategyResult, title string, format func(float64) string, value func(*ClassResult) (float64, bool)) {
	const labelW, barH, gap, w = 190.0, 12.0, 10.0, 640.0
	classes := srs[0].Classes
	hi := 0.0
	for _, sr := range srs {
		for _, c := range sr.Classes {
			if v, ok := value(c); ok {
				hi = math.Max(hi, v)
			}
		}
	}
	if hi <= 0 {
		hi = 1
	}
	h := 26 + float64(len(classes))*(float64(len(srs))*barH+gap)
	b.WriteString("<svg class=\"chart\" viewBox=\"0 0 " + f0(w) + " " + f0(h) + "\" role=\"img\" aria-label=\"" + esc(title) + " by class\">\n")
	b.WriteString("<text x=\"0\" y=\"17\" font-size=\"14\" font-weight=\"600\" fill=\"#222\">" + esc(title) + " by class</text>\n")
	y := 26.0
	for _, c := range classes {
		name := c.Display
		if name == "" {
			name = c.Name
		}
		b.WriteString("<text x=\"" + f0(labelW-6) + "\" y=\"" + f1(y+float64(len(srs))*barH/2+4) + "\" text-anchor=\"end\" font-size=\"12\" fill=\"#333\">" + esc(name) + "</text>\n")
		for si, sr := range srs {
			cr := sr.Classes.Get(c.Name)
			text := NA
			bw := 0.0
			if cr != nil {
				if v, ok := value(cr); ok {
					text, bw = format(v), v/hi*(w-labelW-90)
				}
			}
			b.WriteString("<rect x=\"" + f0(labelW) + "\" y=\"" + f1(y) + "\" width=\"" + f1(math.Max(bw, 0.5)) + "\" height=\"" + f1(barH-2) + "\" fill=\"" + pick(strategyColors, si) + "\"><title>" + esc(sr.Strategy+": "+text) + "</title></rect>")
			b.WriteString("<text x=\"" + f1(labelW+bw+4) + "\" y=\"" + f1(y+barH-3) + "\" font-size=\"10\" fill=\"#555\">" + esc(text) + "</text>\n")
			y += barH
		}
		y += gap
	}
	b.WriteString("</svg>\n")
}
