package sim

import (
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteHTML writes the seeds report: the comparison of mean ± 95% CI per
// metric (the best marked only where significant, as in the CLI table),
// then, for each headline metric with a direction, a bar per strategy at
// its mean with its confidence interval drawn as a whisker, so that
// overlapping intervals read as what they are: not told apart. Each seed's
// own report is in seed-N/report.html.
func (r *SeedResults) WriteHTML(w io.Writer) error {
	var b strings.Builder
	title := "Arbiter simulation over seeds: " + r.Scenario
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>" + esc(title) + "</title>\n<style>\n" + reportCSS + "</style>\n</head>\n<body>\n")
	b.WriteString("<h1>" + esc(title) + "</h1>\n")
	seeds := make([]string, len(r.Seeds))
	for i, s := range r.Seeds {
		seeds[i] = strconv.FormatUint(s, 10)
	}
	b.WriteString("<p class=\"meta\"><b>" + strconv.Itoa(len(r.Seeds)) + "</b> seeds (" + esc(strings.Join(seeds, ", ")) + ") · <b>" +
		fmtNum(r.Days, 2) + "</b> days · <b>" + strconv.Itoa(r.GPUs) + "</b> GPUs · each seed's own report: seed-N/report.html</p>\n")
	b.WriteString("<h2 id=\"comparison\">Comparison: mean ± 95% confidence interval</h2>\n")
	b.WriteString("<p class=\"note\">* marks a strategy significantly better than every other (Welch's t-test, p &lt; " +
		strconv.FormatFloat(Significance, 'f', 2, 64) + "); a tie names the strategies not told apart.</p>\n<table>\n<thead><tr><th>metric</th>")
	for _, s := range r.Strategies {
		b.WriteString("<th>" + esc(s.Strategy) + "</th>")
	}
	b.WriteString("<th>best</th></tr></thead>\n<tbody>\n")
	for _, row := range r.Table(SeedMetrics) {
		b.WriteString("<tr><td>" + esc(row.Label) + "</td>")
		for _, v := range row.Values {
			cls := ""
			if strings.HasSuffix(v, " *") {
				cls = " class=\"best\""
			}
			b.WriteString("<td" + cls + ">" + esc(v) + "</td>")
		}
		best := row.Best
		if best == "" {
			best = "-"
		}
		b.WriteString("<td>" + esc(best) + "</td></tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	b.WriteString("<h2 id=\"intervals\">Confidence intervals</h2>\n<p class=\"note\">Each bar is a strategy's mean over the seeds; the whisker is its 95% confidence interval.</p>\n")
	b.WriteString("<div class=\"grid\">\n")
	for _, d := range Metrics {
		if !d.Headline || d.Better == 0 || d.Value == nil {
			continue
		}
		m, ok := SeedMetricByKey(d.Key)
		if !ok {
			continue
		}
		r.ciChart(&b, m)
	}
	b.WriteString("</div>\n")
	writeGlossary(&b)
	b.WriteString("<footer>Written by arbiter sim --seeds.</footer>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ciChart draws one metric: a bar per strategy at its mean, a whisker for
// its CI (nothing when no strategy has the metric).
func (r *SeedResults) ciChart(b *strings.Builder, m SeedMetric) {
	const w, h, top, bottom, left = 420.0, 210.0, 28.0, 36.0, 10.0
	hi := 0.0
	any := false
	for _, s := range r.Strategies {
		if st := s.Metrics[m.Key]; st.N > 0 {
			any = true
			hi = math.Max(hi, st.Mean+st.CI95)
		}
	}
	if !any {
		return
	}
	if hi <= 0 {
		hi = 1
	}
	ph := h - top - bottom
	slot := (w - 2*left) / float64(len(r.Strategies))
	b.WriteString("<svg class=\"chart\" viewBox=\"0 0 " + f0(w) + " " + f0(h) + "\" role=\"img\" aria-label=\"" + esc(m.Label) + "\">\n")
	dir := "higher is better"
	if m.Better < 0 {
		dir = "lower is better"
	}
	b.WriteString("<text x=\"" + f0(left) + "\" y=\"17\" font-size=\"13\" font-weight=\"600\" fill=\"#222\">" + esc(m.Label) + " <tspan font-weight=\"400\" fill=\"#777\">(" + dir + ")</tspan></text>\n")
	y := func(v float64) float64 { return top + ph - math.Max(0, v)/hi*ph }
	for i, s := range r.Strategies {
		st := s.Metrics[m.Key]
		x := left + float64(i)*slot + slot*0.2
		bw := slot * 0.6
		label := NA
		if st.N > 0 {
			label = FormatStat(m, st)
			b.WriteString("<rect x=\"" + f1(x) + "\" y=\"" + f1(y(st.Mean)) + "\" width=\"" + f1(bw) + "\" height=\"" + f1(top+ph-y(st.Mean)) +
				"\" fill=\"" + pick(strategyColors, i) + "\" fill-opacity=\"0.8\"><title>" + esc(s.Strategy+": "+label) + "</title></rect>\n")
			cx := f1(x + bw/2)
			b.WriteString("<path d=\"M" + cx + " " + f1(y(st.Mean+st.CI95)) + "V" + f1(y(st.Mean-st.CI95)) + "M" + f1(x+bw/2-6) + " " + f1(y(st.Mean+st.CI95)) +
				"h12M" + f1(x+bw/2-6) + " " + f1(y(st.Mean-st.CI95)) + "h12\" stroke=\"#222\" stroke-width=\"1.5\" fill=\"none\"/>\n")
		}
		b.WriteString("<text x=\"" + f1(x+bw/2) + "\" y=\"" + f1(h-20) + "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#333\">" + esc(s.Strategy) + "</text>\n")
		b.WriteString("<text x=\"" + f1(x+bw/2) + "\" y=\"" + f1(h-6) + "\" text-anchor=\"middle\" font-size=\"10\" fill=\"#555\">" + esc(label) + "</text>\n")
	}
	b.WriteString("<line x1=\"" + f0(left) + "\" x2=\"" + f1(w-left) + "\" y1=\"" + f1(top+ph) + "\" y2=\"" + f1(top+ph) + "\" stroke=\"#888\"/>\n</svg>\n")
}
