package sim

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// With returns a copy of sc with the parameter at path set to value, a
// JSON value. The path names fields by their JSON names and list elements
// by index, separated by dots: "consumers.0.visibilityTimeout",
// "producers.1.arrival.rate". The copy is checked as Parse checks a file,
// and has no sweep. A value the scenario does not take is a
// *ParameterError.
func (sc *Scenario) With(path string, value json.RawMessage) (*Scenario, error) {
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, err
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	bad := func(err error) error { return &ParameterError{Path: path, Value: value, Err: err} }
	var v any
	dec = json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, bad(fmt.Errorf("not a JSON value: %w", err))
	}
	if err := setPath(doc, strings.Split(path, "."), v); err != nil {
		return nil, bad(err)
	}
	delete(doc.(map[string]any), "sweep")
	b, err = json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	// The text is this function's, not the user's: its errors say what
	// is wrong with the value, never where in the text.
	one, err := decode(b)
	if err != nil {
		return nil, bad(valueProblem(err))
	}
	if err := one.check(); err != nil {
		return nil, bad(err)
	}
	return one, nil
}

// A ParameterError is a value that a scenario's parameter does not take:
// With's error, and a sweep's.
type ParameterError struct {
	Path  string          // the parameter, as With was given it
	Value json.RawMessage // the value, as With was given it
	Err   error           // what is wrong, naming neither
}

func (e *ParameterError) Error() string {
	return fmt.Sprintf("%v: %s=%s: %v", ErrInvalidScenario, e.Path, compactJSON(e.Value), e.Err)
}

// Unwrap gives ErrInvalidScenario and what is wrong.
func (e *ParameterError) Unwrap() []error { return []error{ErrInvalidScenario, e.Err} }

// valueProblem says what encoding/json found wrong with a value in the
// words of JSON, not of Go's types.
func valueProblem(err error) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		want := "another kind of value"
		switch typ.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "a whole number"
		case reflect.Float32, reflect.Float64:
			want = "a number"
		case reflect.String:
			want = "a string"
		case reflect.Bool:
			want = "true or false"
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Slice, reflect.Array:
			want = "a list"
		}
		got := typ.Value
		switch {
		case strings.HasPrefix(got, "number "):
			got = "the number " + strings.TrimPrefix(got, "number ")
		case got == "bool":
			got = "a boolean"
		case got == "array":
			got = "a list"
		case got == "object":
			got = "an object"
		case got == "string", got == "number":
			got = "a " + got
		}
		return fmt.Errorf("want %s, not %s", want, got)
	}
	if s, ok := strings.CutPrefix(err.Error(), "json: "); ok {
		return errors.New(s)
	}
	return err
}

func setPath(doc any, path []string, v any) error {
	key := path[0]
	switch d := doc.(type) {
	case map[string]any:
		if len(path) == 1 {
			d[key] = v
			return nil
		}
		next, ok := d[key]
		if !ok || next == nil {
			next = map[string]any{}
			d[key] = next
		}
		return setPath(next, path[1:], v)
	case []any:
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(d) {
			return fmt.Errorf("%q is not an index of a list of %d", key, len(d))
		}
		if len(path) == 1 {
			d[i] = v
			return nil
		}
		return setPath(d[i], path[1:], v)
	default:
		return fmt.Errorf("%q: not an object or a list", key)
	}
}

// SweepResult holds the runs of a sweep, one per value.
type SweepResult struct {
	Parameter string
	Values    []string // the values as JSON text
	Reports   []*Report
}

// RunSweep runs sc once for each value of its Sweep, in order, calling
// each, if not nil, after every run. It checks every value first, and
// runs nothing if one is not valid (a *ParameterError, with the value's
// place in the sweep). A run that loses messages does not stop the sweep;
// RunSweep then returns ErrLost with the results.
func RunSweep(ctx context.Context, sc *Scenario, opts Options, each func(i int, r *Report)) (*SweepResult, error) {
	if sc.Sweep == nil {
		return nil, fmt.Errorf("%w: no sweep", ErrInvalidScenario)
	}
	// Every value is checked before the first run, so that a bad last
	// value does not wait for the runs before it.
	runs := make([]*Scenario, len(sc.Sweep.Values))
	for i, raw := range sc.Sweep.Values {
		one, err := sc.With(sc.Sweep.Parameter, raw)
		if err != nil {
			return nil, fmt.Errorf("sweep value %d of %d: %w", i+1, len(sc.Sweep.Values), err)
		}
		runs[i] = one
	}
	res := &SweepResult{Parameter: sc.Sweep.Parameter}
	lost := false
	for i, raw := range sc.Sweep.Values {
		r, err := Run(ctx, runs[i], opts)
		switch {
		case errors.Is(err, ErrLost):
			lost = true
		case err != nil:
			return res, err
		}
		r.Parameter, r.Value = res.Parameter, compactJSON(raw)
		res.Values = append(res.Values, r.Value)
		res.Reports = append(res.Reports, r)
		if each != nil {
			each(i, r)
		}
	}
	if lost {
		return res, ErrLost
	}
	return res, nil
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	s := b.String()
	if u, err := strconv.Unquote(s); err == nil && strings.HasPrefix(s, `"`) {
		return u
	}
	return s
}

// sweepPoint is one run of a sweep as the table and the plot show it.
type sweepPoint struct {
	value                     string
	dupPct, againPct          float64
	p50, p90, p99, max        float64
	completed, expired, lost  int64
	cost                      float64
	emptyGets, tx, violations int64
}

func (s *SweepResult) points() []sweepPoint {
	var ps []sweepPoint
	for i, r := range s.Reports {
		m := &r.Messages
		first := m.Deliveries - m.Duplicates
		p := sweepPoint{value: s.Values[i], p50: r.Latency.P50, p90: r.Latency.P90, p99: r.Latency.P99,
			max: r.Latency.Max, completed: m.Completed, expired: m.Expired, lost: m.Lost,
			cost: r.Transactions.Cost, emptyGets: r.Transactions.EmptyGets, tx: r.Transactions.Total,
			violations: int64(len(r.Violations))}
		if first > 0 {
			p.dupPct = 100 * float64(m.Duplicates) / float64(first)
			p.againPct = 100 * float64(m.ProcessedAgain) / float64(first)
		}
		ps = append(ps, p)
	}
	return ps
}

// WriteText writes the sweep as a table, one row per value.
func (s *SweepResult) WriteText(w io.Writer) error {
	var b bytes.Buffer
	name := ""
	if len(s.Reports) > 0 {
		name = s.Reports[0].Name
	}
	fmt.Fprintf(&b, "azqsim sweep: %s, %s\n\n", name, s.Parameter)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, s.Parameter+"\tduplicates\tprocessed again\tp50\tp99\tmax\tcompleted\texpired\ttransactions\tcost\tlost\t")
	cur := ""
	if len(s.Reports) > 0 {
		cur = " " + s.Reports[0].Transactions.Currency
	}
	for _, p := range s.points() {
		fmt.Fprintf(tw, "%s\t%.3g %%\t%.3g %%\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.value, p.dupPct, p.againPct,
			secs(p.p50), secs(p.p99), secs(p.max), count(p.completed), count(p.expired), count(p.tx), money(p.cost)+cur, count(p.lost))
	}
	tw.Flush()
	for i, r := range s.Reports {
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "CHECK FAILED at %s: %s\n", s.Values[i], v)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteFiles writes the sweep into dir: sweep.txt (WriteText), sweep.csv,
// sweep.json (every run's report), and unless format is "" the plot
// sweep.<format> of duplicates, latency and cost against the parameter.
func (s *SweepResult) WriteFiles(dir, format string) ([]string, error) {
	write, written, err := fileWriter(dir)
	if err != nil {
		return nil, err
	}
	var text bytes.Buffer
	s.WriteText(&text)
	if err := write("sweep.txt", text.Bytes()); err != nil {
		return *written, err
	}
	var c bytes.Buffer
	cw := csv.NewWriter(&c)
	cw.Write([]string{s.Parameter, "duplicates_pct", "processed_again_pct", "latency_p50_s", "latency_p90_s",
		"latency_p99_s", "latency_max_s", "completed", "expired", "lost", "transactions", "empty_gets", "cost"})
	for _, p := range s.points() {
		cw.Write([]string{p.value, ftoa(p.dupPct), ftoa(p.againPct), ftoa(p.p50), ftoa(p.p90), ftoa(p.p99), ftoa(p.max),
			strconv.FormatInt(p.completed, 10), strconv.FormatInt(p.expired, 10), strconv.FormatInt(p.lost, 10),
			strconv.FormatInt(p.tx, 10), strconv.FormatInt(p.emptyGets, 10), ftoa(p.cost)})
	}
	cw.Flush()
	if err := write("sweep.csv", c.Bytes()); err != nil {
		return *written, err
	}
	js, err := json.MarshalIndent(s.Reports, "", "  ")
	if err != nil {
		return *written, err
	}
	if err := write("sweep.json", append(js, '\n')); err != nil {
		return *written, err
	}
	if format == "" || len(s.Reports) == 0 {
		return *written, nil
	}
	f := s.figure()
	b, err := render(f, f.w, f.h, format)
	if err != nil {
		return *written, err
	}
	err = write("sweep."+format, b)
	return *written, err
}

// figure plots duplicates, latency and cost against the parameter: on a
// numeric axis when every value is a number or a duration (logarithmic
// when they span more than a factor of 20), else one position per value.
func (s *SweepResult) figure() figure {
	ps := s.points()
	xs := make([]float64, len(ps))
	numeric := true
	for i, p := range ps {
		if d, err := ParseDuration(p.value); err == nil && d != Never {
			xs[i] = d.D().Seconds()
		} else if x, err := strconv.ParseFloat(p.value, 64); err == nil {
			xs[i] = x
		} else {
			numeric = false
		}
	}
	logX := false
	if numeric {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range xs {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		logX = lo > 0 && hi/lo > 20
	} else {
		for i := range xs {
			xs[i] = float64(i)
		}
	}
	xlabel := s.Parameter
	if logX {
		xlabel += ", logarithmic"
	}
	name := s.Reports[0].Name
	col := func(f func(p *sweepPoint) float64) []float64 {
		ys := make([]float64, len(ps))
		for i := range ps {
			ys[i] = f(&ps[i])
		}
		return ys
	}
	// A panel whose every value is zero (no duplicates in any run, no
	// message completed in an idle-cost sweep) is left out; the first
	// panel drawn carries the scenario's name.
	var rows []*plot.Plot
	heading := func(what string) string {
		if len(rows) == 0 {
			return fmt.Sprintf("%s: %s, against %s", name, what, s.Parameter)
		}
		return what
	}
	dupPct, againPct := col(func(p *sweepPoint) float64 { return p.dupPct }), col(func(p *sweepPoint) float64 { return p.againPct })
	if !allZero(dupPct) || !allZero(againPct) {
		dup := newPlot(heading("duplicate deliveries"), "", "% of messages")
		addLine(dup, "duplicate deliveries", palette[3], 2, xs, dupPct, nil)
		addLine(dup, "processed again (wasted work)", palette[1], 2, xs, againPct, nil)
		headroom(dup)
		markPoints(dup, xs, dupPct, palette[3])
		markPoints(dup, xs, againPct, palette[1])
		rows = append(rows, dup)
	}
	p50, p90, p99 := col(func(p *sweepPoint) float64 { return p.p50 }), col(func(p *sweepPoint) float64 { return p.p90 }), col(func(p *sweepPoint) float64 { return p.p99 })
	if !allZero(p99) {
		lat := newPlot(heading("latency, put to delete"), "", "latency")
		addLine(lat, "p99", palette[3], 2, xs, p99, nil)
		addLine(lat, "p90", palette[1], 2, xs, p90, nil)
		addLine(lat, "p50", palette[0], 2, xs, p50, nil)
		// Latencies span decades: a logarithmic axis shows the median
		// and the tail together, its ticks in one unit.
		if lo, hi := minPositive(p50), lat.Y.Max; lo > 0 && hi > 0 {
			lat.Y.Scale = plot.LogScale{}
			lat.Y.Tick.Marker = logTicks{}
			lat.Y.Min, lat.Y.Max = lo/1.5, hi*3
			lat.Y.Label.Text = "latency, logarithmic"
		} else {
			headroom(lat)
		}
		markPoints(lat, xs, p99, palette[3])
		markPoints(lat, xs, p90, palette[1])
		markPoints(lat, xs, p50, palette[0])
		rows = append(rows, lat)
	}
	cur := s.Reports[0].Transactions.Currency
	costs := col(func(p *sweepPoint) float64 { return p.cost })
	cost := newPlot(heading("storage transactions"), xlabel, "cost ("+cur+")")
	addLine(cost, "cost of all transactions", palette[2], 2, xs, costs, nil)
	markPoints(cost, xs, costs, palette[2])
	// Each point is labelled with its cost, and costs that differ by more
	// than ten times go on a logarithmic axis, so that a cheap choice is
	// not flattened against an expensive one.
	if lo, hi := minPositive(costs), cost.Y.Max; lo > 0 && hi/lo > 10 && !slices.Contains(costs, 0) {
		cost.Y.Scale = plot.LogScale{}
		cost.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		cost.Y.Min, cost.Y.Max = lo/2, hi*4
		cost.Y.Label.Text = "cost (" + cur + "), logarithmic"
	} else {
		headroom(cost)
	}
	labelPoints(cost, xs, costs, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " " + cur })
	rows = append(rows, cost)
	// The ticks are the values swept, written as they were given.
	var ticks plot.ConstantTicks
	for i := range ps {
		ticks = append(ticks, plot.Tick{Value: xs[i], Label: ps[i].value})
	}
	for _, p := range rows {
		if logX {
			p.X.Scale = plot.LogScale{}
		}
		p.X.Tick.Marker = ticks
		if !numeric {
			p.X.Min, p.X.Max = -0.5, float64(len(ps))-0.5
		}
	}
	return figure{name: "sweep", rows: rows, w: 9 * vg.Inch, h: vg.Length(len(rows)) * 10 / 3 * vg.Inch}
}

// labelPoints writes each point's value beside it.
func labelPoints(p *plot.Plot, xs, ys []float64, format func(float64) string) {
	xys := plotter.XYLabels{XYs: xyOf(xs, ys)}
	for _, y := range ys {
		xys.Labels = append(xys.Labels, format(y))
	}
	labels, err := plotter.NewLabels(xys)
	if err != nil {
		return
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font.Size = vg.Points(10)
		labels.TextStyle[i].YAlign = draw.YBottom
	}
	labels.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(4)}
	p.Add(labels)
}

func xyOf(xs, ys []float64) plotter.XYs {
	xy := make(plotter.XYs, len(xs))
	for i := range xs {
		xy[i] = plotter.XY{X: xs[i], Y: ys[i]}
	}
	return xy
}

// markPoints draws a dot at each measured point of a line.
func markPoints(p *plot.Plot, xs, ys []float64, c color.Color) {
	sc, err := plotter.NewScatter(xyOf(xs, ys))
	if err != nil {
		return
	}
	sc.GlyphStyle.Color = c
	sc.GlyphStyle.Radius = vg.Points(3)
	p.Add(sc)
}

func minPositive(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		if x > 0 {
			m = math.Min(m, x)
		}
	}
	if math.IsInf(m, 1) {
		return 0
	}
	return m
}
