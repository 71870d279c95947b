package sim

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A figure is one or more plots stacked in a column, written as one image.
type figure struct {
	name string
	rows []*plot.Plot
	w, h vg.Length
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, // blue
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, // orange
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, // green
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, // red
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, // purple
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, // grey
}

// render draws a figure in format ("png" or "svg").
func render(f figure, w, h vg.Length, format string) ([]byte, error) {
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return nil, fmt.Errorf("plot format %q: %w", format, err)
	}
	dc := draw.New(c)
	// An opaque background, so the image reads on dark pages too.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: len(f.rows), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	grid := make([][]*plot.Plot, len(f.rows))
	for i, p := range f.rows {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range f.rows {
		p.Draw(canvases[i][0])
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	p.X.Tick.Label.Font.Size = vg.Points(10)
	p.Y.Tick.Label.Font.Size = vg.Points(10)
	p.Legend.Top = true
	p.Legend.XOffs = -3 * vg.Millimeter
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds a line through the points whose ok is true, broken where
// it is false, with a legend entry.
func addLine(p *plot.Plot, label string, c color.Color, width vg.Length, xs, ys []float64, ok []bool) {
	var first *plotter.Line
	var seg plotter.XYs
	flush := func() {
		if len(seg) == 0 {
			return
		}
		l, err := plotter.NewLine(seg)
		if err != nil {
			seg = nil
			return
		}
		l.Color, l.Width = c, width
		p.Add(l)
		if first == nil {
			first = l
		}
		seg = nil
	}
	for i := range xs {
		if ok != nil && !ok[i] || math.IsNaN(ys[i]) || math.IsInf(ys[i], 0) {
			flush()
			continue
		}
		seg = append(seg, plotter.XY{X: xs[i], Y: ys[i]})
	}
	flush()
	if first != nil && label != "" {
		p.Legend.Add(label, first)
	}
}

// timeAxis picks the unit of a time axis for a run of the given length in
// seconds.
func timeAxis(total float64) (div float64, label string) {
	switch {
	case total <= 20*60:
		return 1, "time (s)"
	case total <= 20*3600:
		return 60, "time (min)"
	case total <= 5*86400:
		return 3600, "time (h)"
	default:
		return 86400, "time (days)"
	}
}

func (r *Report) title(what string) string {
	name := r.Name
	if r.Parameter != "" {
		name += fmt.Sprintf(" (%s = %s)", r.Parameter, r.Value)
	}
	if name == "" {
		return what
	}
	return name + ": " + what
}

// plots returns the report's figures.
func (r *Report) plots() ([]figure, error) {
	div, xlabel := timeAxis(r.Duration.D().Seconds())
	n := len(r.Series)
	xs := make([]float64, n)
	col := func(f func(s *Sample) float64) []float64 {
		ys := make([]float64, n)
		for i := range r.Series {
			ys[i] = f(&r.Series[i])
		}
		return ys
	}
	prev := 0.0
	interval := make([]float64, n)
	for i, s := range r.Series {
		xs[i] = s.T / div
		interval[i] = math.Max(s.T-prev, 1e-9)
		prev = s.T
	}
	rate := func(f func(s *Sample) int64) []float64 {
		ys := make([]float64, n)
		for i := range r.Series {
			ys[i] = float64(f(&r.Series[i])) / interval[i]
		}
		return ys
	}
	w := vg.Length(9) * vg.Inch

	// Flow, depth and consumers. A line that is zero throughout is left
	// out, and so is a panel left with no line: an idle run draws no
	// empty panels.
	var rows []*plot.Plot
	flow := newPlot(r.title("messages per second"), "", "messages / s")
	drawn := 0
	for _, l := range []struct {
		label string
		c     color.Color
		ys    []float64
	}{
		{"put", palette[0], rate(func(s *Sample) int64 { return s.Put })},
		{"completed", palette[2], rate(func(s *Sample) int64 { return s.Completed })},
		{"duplicate deliveries", palette[3], rate(func(s *Sample) int64 { return s.Duplicates })},
	} {
		if !allZero(l.ys) {
			addLine(flow, l.label, l.c, 1.5, xs, l.ys, nil)
			drawn++
		}
	}
	if drawn > 0 {
		rows = append(rows, flow)
	}
	depth := newPlot("queue depth", "", "messages")
	if d, f := col(func(s *Sample) float64 { return float64(s.Depth) }), col(func(s *Sample) float64 { return float64(s.InFlight) }); !allZero(d) || !allZero(f) {
		addLine(depth, "in the queue", palette[0], 1.5, xs, d, nil)
		addLine(depth, "in flight (held by consumers)", palette[1], 1.5, xs, f, nil)
		rows = append(rows, depth)
	}
	title := "consumers"
	if len(rows) == 0 {
		title = r.title("consumers (no messages were put)")
	}
	cons := newPlot(title, xlabel, "consumers")
	addLine(cons, "running", palette[4], 1.5, xs, col(func(s *Sample) float64 { return float64(s.Consumers) }), nil)
	if b := col(func(s *Sample) float64 { return float64(s.Busy) }); !allZero(b) {
		addLine(cons, "busy (for workers: handlers)", palette[2], 1.5, xs, b, nil)
	}
	rows = append(rows, cons)

	// Latency over time, when anything completed.
	has := make([]bool, n)
	completed := false
	for i, s := range r.Series {
		has[i] = s.Completed > 0
		completed = completed || has[i]
	}
	lat := newPlot(r.title("latency, put to delete, of the messages completed in each interval"), xlabel, "seconds")
	addLine(lat, "max", palette[5], 1, xs, col(func(s *Sample) float64 { return s.LatencyMax }), has)
	addLine(lat, "p99", palette[3], 1.5, xs, col(func(s *Sample) float64 { return s.LatencyP99 }), has)
	addLine(lat, "p50", palette[0], 1.5, xs, col(func(s *Sample) float64 { return s.LatencyP50 }), has)
	for _, p := range append(rows, lat) {
		headroom(p)
		p.Y.Tick.Marker = shortTicks{}
		p.X.Tick.Marker = timeTicks{}
		p.X.Min, p.X.Max = 0, r.Duration.D().Seconds()/div
	}

	figs := []figure{{name: "depth", rows: rows, w: w, h: vg.Length(len(rows)) * 3 * vg.Inch}}
	if completed {
		figs = append(figs, figure{name: "latency", rows: []*plot.Plot{lat}, w: w, h: 4 * vg.Inch})
	}
	if h := r.histogramPlot(); h != nil {
		figs = append(figs, figure{name: "histogram", rows: []*plot.Plot{h}, w: w, h: 4 * vg.Inch})
	}
	figs = append(figs, figure{name: "transactions", rows: []*plot.Plot{r.transactionsPlot()}, w: w, h: 4 * vg.Inch})
	for i := range figs {
		figs[i].w = w
	}
	return figs, nil
}

// histogramPlot draws the latency histogram on a logarithmic axis, in 60
// bins between the shortest and the longest latency.
func (r *Report) histogramPlot() *plot.Plot {
	if len(r.Histogram) == 0 {
		return nil
	}
	lo := math.Max(r.Histogram[0].Seconds, 1e-6)
	hi := math.Max(r.Histogram[len(r.Histogram)-1].Seconds, lo*1.01)
	const nb = 60
	step := math.Log(hi/lo) / nb
	bins := make([]plotter.HistogramBin, nb)
	for i := range bins {
		bins[i].Min = lo * math.Exp(step*float64(i))
		bins[i].Max = lo * math.Exp(step*float64(i+1))
	}
	for _, h := range r.Histogram {
		i := int(math.Log(math.Max(h.Seconds, lo)/lo) / step)
		i = min(max(i, 0), nb-1)
		bins[i].Weight += float64(h.Count)
	}
	p := newPlot(r.title(fmt.Sprintf("latency of the %s messages completed", count(r.Latency.Count))),
		"latency, put to delete (logarithmic)", "messages")
	h := &plotter.Histogram{Bins: bins, FillColor: palette[0], LineStyle: draw.LineStyle{Color: color.White, Width: 0.5}}
	p.Add(h)
	top := 0.0
	for _, b := range bins {
		top = math.Max(top, b.Weight)
	}
	// The median and the tail, marked where they fall.
	for _, m := range []struct {
		name string
		at   float64
		c    color.Color
	}{{"p50", r.Latency.P50, palette[2]}, {"p99", r.Latency.P99, palette[3]}} {
		if m.at <= 0 {
			continue
		}
		x := math.Min(math.Max(m.at, bins[0].Min), bins[nb-1].Max)
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.05}})
		if err != nil {
			continue
		}
		l.Color, l.Width, l.Dashes = m.c, 2, []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(m.name+" = "+secs(m.at), l)
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{}
	p.X.Min, p.X.Max = bins[0].Min, bins[nb-1].Max
	p.Y.Min = 0
	p.Y.Max = math.Max(top*1.25, 1)
	return p
}

// transactionsPlot draws the billable transactions by operation.
func (r *Report) transactionsPlot() *plot.Plot {
	t := &r.Transactions
	p := newPlot(r.title(fmt.Sprintf("storage transactions: %s, costing %s %s at %s per 10,000",
		count(t.Total), money(t.Cost), t.Currency, num(t.PerTenThousand))), "", "transactions")
	vals := make(plotter.Values, numOps)
	names := make([]string, numOps)
	for i := range numOps {
		vals[i] = float64(t.Count[i])
		names[i] = OpNames[i]
		if i == OpGet {
			names[i] = fmt.Sprintf("Get (%s empty)", short(float64(t.EmptyGets)))
		}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(40))
	if err == nil {
		bars.Color = palette[0]
		bars.LineStyle.Width = 0
		p.Add(bars)
		var xys plotter.XYLabels
		for i, v := range vals {
			xys.XYs = append(xys.XYs, plotter.XY{X: float64(i), Y: v})
			xys.Labels = append(xys.Labels, short(v))
		}
		if labels, err := plotter.NewLabels(xys); err == nil {
			for i := range labels.TextStyle {
				labels.TextStyle[i].XAlign = draw.XCenter
				labels.TextStyle[i].YAlign = draw.YBottom
				labels.TextStyle[i].Font.Size = vg.Points(10)
			}
			p.Add(labels)
		}
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(numOps)-0.5
	p.Y.Min = 0
	maxV := 0.0
	for _, v := range vals {
		maxV = math.Max(maxV, v)
	}
	p.Y.Max = math.Max(maxV*1.15, 1)
	p.Y.Tick.Marker = shortTicks{}
	return p
}

// short writes a count as 12, 3.4k, 5.6M, 7.8G.
func short(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trimZero(fmt.Sprintf("%.3g", v/1e9)) + "G"
	case a >= 1e6:
		return trimZero(fmt.Sprintf("%.3g", v/1e6)) + "M"
	case a >= 1e4:
		return trimZero(fmt.Sprintf("%.3g", v/1e3)) + "k"
	default:
		return trimZero(fmt.Sprintf("%.4g", v))
	}
}

func trimZero(s string) string {
	if strings.Contains(s, ".") && !strings.ContainsAny(s, "e") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// shortTicks are the default ticks with short labels.
type shortTicks struct{}

func (shortTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = short(ts[i].Value)
		}
	}
	return ts
}

// logTicks marks powers of ten, with 2 and 5 between them when the range
// spans few decades, labelled in one unit for the whole axis (timeUnit).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	div, suffix := timeUnit(lo, hi)
	decades := math.Log10(hi / lo)
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for _, m := range []float64{1, 2, 5} {
			v := base * m
			if v < lo || v > hi {
				continue
			}
			label := ""
			if m == 1 || decades < 3 {
				label = trimZero(fmt.Sprintf("%.4g", v/div)) + suffix
			}
			ts = append(ts, plot.Tick{Value: v, Label: label})
		}
	}
	if len(ts) < 2 {
		return plot.LogTicks{}.Ticks(lo, hi)
	}
	return ts
}

// timeUnit is the one unit a logarithmic time axis from lo to hi seconds
// is labelled in, its size in seconds and its suffix: milliseconds when
// all of it is under a second, hours when all of it is over one, else
// seconds (0.01s … 1000s), which reads across decades where minutes
// would need fractions.
func timeUnit(lo, hi float64) (div float64, suffix string) {
	switch {
	case hi < 1:
		return 1e-3, "ms"
	case lo >= 3600:
		return 3600, "h"
	default:
		return 1, "s"
	}
}

// allZero reports whether every value is zero (or not a number).
func allZero(ys []float64) bool {
	for _, y := range ys {
		if y != 0 && !math.IsNaN(y) {
			return false
		}
	}
	return true
}

// headroom starts the y axis at zero and leaves room above the data for
// the legend, which sits at the top.
func headroom(p *plot.Plot) {
	p.Y.Min = 0
	p.Y.Max = math.Max(p.Y.Max*1.25, 1) // Add has set Max to the data's
}

// timeTicks marks a time axis at whole steps of its unit that divide the
// next unit evenly (every 6 hours, every 15 minutes), five to twelve of
// them.
type timeTicks struct{}

func (timeTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	step := 1.0
	for _, s := range []float64{1, 2, 3, 5, 6, 10, 12, 15, 20, 30, 60, 120, 300, 600, 1200, 3000, 6000} {
		step = s
		if span/s <= 12 {
			break
		}
	}
	if span/step < 4 {
		step /= 4 // a short axis: quarters of the unit
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: trimZero(strconv.FormatFloat(v, 'f', 2, 64))})
	}
	return ts
}
