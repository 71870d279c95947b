package sim

import (
	"context"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

func runScenario(t *testing.T, js string) *Report {
	t.Helper()
	sc, err := Parse(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestIdleRunDrawsNoEmptyPanels: a run in which nothing is put draws the
// consumers and the transactions, and no panel of flow, depth or latency
// that would be zero throughout.
func TestIdleRunDrawsNoEmptyPanels(t *testing.T) {
	r := runScenario(t, `{"name": "idle", "duration": "1h", "consumers": [{"count": 2, "listen": {"kind": "poll", "interval": "1m"}}]}`)
	figs, err := r.plots()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range figs {
		names = append(names, f.name)
	}
	if strings.Join(names, ",") != "depth,transactions" {
		t.Fatalf("figures %v, want depth and transactions", names)
	}
	if len(figs[0].rows) != 1 || !strings.Contains(figs[0].rows[0].Title.Text, "consumers") {
		t.Errorf("depth figure has %d panels, want the consumers alone", len(figs[0].rows))
	}
}

// TestBusyRunDrawsEveryPanel: with traffic, the flow, depth and consumer
// panels, the latency over time and the histogram are all drawn.
func TestBusyRunDrawsEveryPanel(t *testing.T) {
	r := runScenario(t, `{"name": "busy", "seed": 1, "duration": "10m", "producers": [{"arrival": {"kind": "poisson", "rate": 5}}],
		"consumers": [{"count": 2, "processing": {"kind": "exponential", "mean": "100ms"}, "listen": {"kind": "poll", "interval": "1s"}}]}`)
	figs, err := r.plots()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range figs {
		names = append(names, f.name)
	}
	if strings.Join(names, ",") != "depth,latency,histogram,transactions" || len(figs[0].rows) != 3 {
		t.Fatalf("figures %v, %d depth panels", names, len(figs[0].rows))
	}
}

// TestHistogramMarksP50AndP99: the histogram draws the median and the 99th
// percentile, named in its legend with their values.
func TestHistogramMarksP50AndP99(t *testing.T) {
	r := runScenario(t, `{"name": "busy", "seed": 1, "duration": "10m", "producers": [{"arrival": {"kind": "poisson", "rate": 5}}],
		"consumers": [{"count": 2, "processing": {"kind": "exponential", "mean": "100ms"}, "listen": {"kind": "poll", "interval": "1s"}}]}`)
	h := r.histogramPlot()
	if h == nil {
		t.Fatal("no histogram")
	}
	svg, err := render(figure{rows: []*plot.Plot{h}}, 8*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p50 = " + secs(r.Latency.P50), "p99 = " + secs(r.Latency.P99)} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("histogram lacks %q", want)
		}
	}
}

// TestSweepCostAxis: costs that differ by more than ten times go on a
// logarithmic axis, and the panels that would be zero throughout
// (duplicates and latency, when nothing is put) are left out.
func TestSweepCostAxis(t *testing.T) {
	sc, err := Parse(strings.NewReader(`{"name": "idle", "duration": "2h", "consumers": [{"count": 5, "listen": {"kind": "poll", "interval": "1s", "min": "1s", "max": "5m"}}],
		"sweep": {"parameter": "consumers.0.listen.kind", "values": ["poll", "backoff"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSweep(context.Background(), sc, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := res.figure()
	if len(f.rows) != 1 {
		t.Fatalf("%d panels, want the cost alone", len(f.rows))
	}
	if _, ok := f.rows[0].Y.Scale.(plot.LogScale); !ok {
		t.Errorf("cost axis %T, want logarithmic for costs %v and %v", f.rows[0].Y.Scale,
			res.Reports[0].Transactions.Cost, res.Reports[1].Transactions.Cost)
	}
	if !strings.HasPrefix(f.rows[0].Title.Text, "idle: storage transactions, against") {
		t.Errorf("title %q does not name the scenario", f.rows[0].Title.Text)
	}
}

// TestLogTicksUseOneUnit: the ticks of a logarithmic time axis share one
// unit.
func TestLogTicksUseOneUnit(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		unit   string
	}{
		{0.05, 400, "s"}, {0.001, 0.5, "ms"}, {3600, 86400 * 3, "h"}, {2, 7200, "s"},
	} {
		for _, tk := range (logTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label == "" {
				continue
			}
			num := strings.TrimSuffix(tk.Label, c.unit)
			if num == tk.Label || strings.ContainsAny(num, "msh") {
				t.Errorf("axis %v–%v s: tick %q, want unit %s", c.lo, c.hi, tk.Label, c.unit)
			}
		}
	}
}
