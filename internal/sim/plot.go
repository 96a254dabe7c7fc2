package sim

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Plot geometry, in SVG user units.
const (
	plotW, plotH           = 960.0, 440.0
	padL, padR, padT, padB = 70.0, 20.0, 50.0, 60.0
	timelineColumns        = 900
)

// svg is a small SVG writer; it keeps the first write error.
type svg struct {
	w   *bufio.Writer
	err error
}

func (s *svg) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

func (s *svg) text(x, y float64, anchor, class, text string) {
	s.printf(`<text x="%.1f" y="%.1f" text-anchor="%s" class="%s">%s</text>`+"\n", x, y, anchor, class, escape(text))
}

func (s *svg) begin(title string) {
	s.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", plotW, plotH, plotW, plotH)
	s.printf(`<style>text{font-family:sans-serif;font-size:12px;fill:#222}.t{font-size:14px;font-weight:bold}.s{font-size:11px;fill:#555}</style>` + "\n")
	s.printf(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.text(padL, 22, "start", "t", title)
}

func (s *svg) end() error {
	s.printf("</svg>\n")
	if s.err == nil {
		s.err = s.w.Flush()
	}
	return s.err
}

// axes is a linear map from data to the plot area, with ticks.
type axes struct {
	x0, x1, y0, y1 float64
}

func (a axes) px(x float64) float64 { return padL + (x-a.x0)/(a.x1-a.x0)*(plotW-padL-padR) }
func (a axes) py(y float64) float64 { return plotH - padB - (y-a.y0)/(a.y1-a.y0)*(plotH-padT-padB) }

// draw writes the frame, grid, ticks (values shown by label) and axis titles.
func (a axes) draw(s *svg, xTitle, yTitle string, xLabel, yLabel func(float64) string) {
	for _, y := range ticks(a.y0, a.y1) {
		s.printf(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", padL, plotW-padR, a.py(y), a.py(y))
		s.text(padL-6, a.py(y)+4, "end", "s", yLabel(y))
	}
	for _, x := range ticks(a.x0, a.x1) {
		s.printf(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", a.px(x), a.px(x), padT, plotH-padB)
		s.text(a.px(x), plotH-padB+16, "middle", "s", xLabel(x))
	}
	s.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", padL, padT, plotW-padL-padR, plotH-padT-padB)
	s.text((padL+plotW-padR)/2, plotH-18, "middle", "", xTitle)
	s.printf(`<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (padT+plotH-padB)/2, yTitle)
}

// ticks returns round values from lo to hi, about six of them.
func ticks(lo, hi float64) []float64 {
	span := hi - lo
	if span <= 0 {
		return []float64{lo}
	}
	raw := span / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

// niceMax rounds v up to a value the ticks end on.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	t := ticks(0, v)
	step := 1.0
	if len(t) > 1 {
		step = t[1] - t[0]
	}
	return math.Ceil(v/step) * step
}

func number(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// PlotTimeline draws the nodes of all clusters over time against the nodes
// their queued and running jobs need (a run with Config.Timeline). Each
// column shows the maximum over its span of time.
func PlotTimeline(w io.Writer, title string, r *Result) error {
	s := &svg{w: bufio.NewWriter(w)}
	s.begin(fmt.Sprintf("%s — %s: nodes against demand", title, r.Label))
	pts := r.Timeline
	end := r.Total.Hours * 3600
	if len(pts) == 0 || end <= 0 {
		s.text(plotW/2, plotH/2, "middle", "", "no timeline: nothing happened")
		return s.end()
	}
	// Maximum per column, carrying the value in force into each column.
	nodes := make([]int, timelineColumns)
	demand := make([]int, timelineColumns)
	col := func(t float64) int { return min(int(t/end*timelineColumns), timelineColumns-1) }
	for i, p := range pts {
		c0 := col(p.T)
		c1 := c0
		if i+1 < len(pts) {
			c1 = col(pts[i+1].T)
		} else {
			c1 = timelineColumns - 1
		}
		for c := c0; c <= c1; c++ {
			nodes[c] = max(nodes[c], p.Nodes)
			demand[c] = max(demand[c], p.Demand)
		}
	}
	top := 0
	for c := range nodes {
		top = max(top, nodes[c], demand[c])
	}
	unit, unitName := 3600.0, "hours"
	if end > 3*86400 {
		unit, unitName = 86400, "days"
	}
	a := axes{0, end / unit, 0, niceMax(float64(top) * 1.05)}
	a.draw(s, "time since the trace start ("+unitName+")", "nodes", number, number)

	step := func(vals []int) string {
		var b strings.Builder
		for c, v := range vals {
			x0 := a.px(float64(c) / timelineColumns * a.x1)
			x1 := a.px(float64(c+1) / timelineColumns * a.x1)
			fmt.Fprintf(&b, "%.1f,%.1f %.1f,%.1f ", x0, a.py(float64(v)), x1, a.py(float64(v)))
		}
		return b.String()
	}
	// Demand as a filled area, nodes as a line over it.
	s.printf(`<polygon fill="#f4a261" fill-opacity="0.45" stroke="none" points="%.1f,%.1f %s%.1f,%.1f"/>`+"\n",
		a.px(0), a.py(0), step(demand), a.px(a.x1), a.py(0))
	s.printf(`<polyline fill="none" stroke="#1d3557" stroke-width="1.2" points="%s"/>`+"\n", step(nodes))
	// Legend.
	lx := plotW - padR - 330
	s.printf(`<rect x="%.1f" y="32" width="14" height="10" fill="#f4a261" fill-opacity="0.45"/>`+"\n", lx)
	s.text(lx+18, 41, "start", "s", "demand (nodes queued + running jobs need)")
	s.printf(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#1d3557" stroke-width="2"/>`+"\n", lx-120, lx-106, 37, 37)
	s.text(lx-102, 41, "start", "s", "nodes")
	m := r.Total
	column := time.Duration(end / timelineColumns * float64(time.Second)).Round(time.Second)
	s.text(padL, plotH-2, "start", "s", fmt.Sprintf("%d jobs · billed %.0f node-h (idle %.0f) · $%.0f · mean queue delay %.0f s · peak %d nodes · each column the maximum over %v",
		m.Jobs, m.BilledNodeHours, m.IdleNodeHours, m.Cost, m.QueueDelay.Mean, m.PeakNodes, column))
	return s.end()
}

// PlotTradeoff draws cost against mean queue delay for the settings of a
// sweep: the fixed idle timeouts joined in sweep order, the adaptive policy
// marked apart. Both axes are zoomed to the points.
func PlotTradeoff(w io.Writer, title string, results []*Result) error {
	s := &svg{w: bufio.NewWriter(w)}
	s.begin(title + " — cost against mean queue delay")
	if len(results) == 0 {
		s.text(plotW/2, plotH/2, "middle", "", "no results")
		return s.end()
	}
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, r := range results {
		x0, x1 = min(x0, r.Total.QueueDelay.Mean), max(x1, r.Total.QueueDelay.Mean)
		y0, y1 = min(y0, r.Total.Cost), max(y1, r.Total.Cost)
	}
	pad := func(lo, hi float64) (float64, float64) {
		span := max(hi-lo, math.Abs(hi)*0.01, 1)
		return lo - 0.1*span, hi + 0.12*span
	}
	x0, x1 = pad(x0, x1)
	y0, y1 = pad(y0, y1)
	a := axes{max(x0, 0), x1, max(y0, 0), y1}
	a.draw(s, "mean queue delay (s)", "cost (USD)", number, dollars)

	var line strings.Builder
	for _, r := range results {
		if r.Settings.Policy == PolicyFixed {
			fmt.Fprintf(&line, "%.1f,%.1f ", a.px(r.Total.QueueDelay.Mean), a.py(r.Total.Cost))
		}
	}
	s.printf(`<polyline fill="none" stroke="#1d3557" stroke-width="1.5" points="%s"/>`+"\n", line.String())
	// Labels to the right of their points, moved down past the labels
	// already placed that they would overlap.
	type box struct{ x, y float64 }
	var placed []box
	for _, r := range results {
		x, y := a.px(r.Total.QueueDelay.Mean), a.py(r.Total.Cost)
		ly := y + 4
		for moved := true; moved; {
			moved = false
			for _, b := range placed {
				if math.Abs(b.x-(x+8)) < 80 && math.Abs(b.y-ly) < 13 {
					ly, moved = b.y+13, true
				}
			}
		}
		placed = append(placed, box{x + 8, ly})
		if r.Settings.Policy == PolicyAdaptive {
			s.printf(`<path d="M%.1f %.1f l7 7 l-7 7 l-7 -7 z" fill="#e63946"/>`+"\n", x, y-7)
			s.printf(`<text x="%.1f" y="%.1f" class="s" style="fill:#e63946;font-weight:bold">%s</text>`+"\n", x+8, ly, escape(r.Label))
			continue
		}
		s.printf(`<circle cx="%.1f" cy="%.1f" r="4" fill="#1d3557"/>`+"\n", x, y)
		s.text(x+8, ly, "start", "s", r.Label)
	}
	s.text(padL, plotH-2, "start", "s", "circles: fixed idle timeouts (joined in sweep order); diamond: adaptive policy. Lower left is better.")
	return s.end()
}

func escape(text string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(text))
	return b.String()
}

// dollars writes an amount for an axis: thousands as k past 10,000.
func dollars(v float64) string {
	if math.Abs(v) >= 10000 {
		return fmt.Sprintf("%sk", number(v/1000))
	}
	return number(v)
}
