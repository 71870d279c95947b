package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/sim"
)

const scenario = `{
	"name": "cli",
	"seed": 1,
	"duration": "30m",
	"producers": [{"arrival": {"kind": "poisson", "rate": 2}}],
	"consumers": [{"count": 5, "batchSize": 4, "processing": "1s", "listen": {"kind": "poll", "interval": "2s"}}]
}`

func writeScenario(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestRunWritesReportAndPlots(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runCmd(t, "-q", "-out", dir, "-deliveries", writeScenario(t, scenario))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "azqsim: cli") || !strings.Contains(out, "every message is accounted for") {
		t.Errorf("summary:\n%s", out)
	}
	for _, name := range []string{"report.txt", "report.json", "timeseries.csv", "timeseries.json", "latency.csv",
		"depth.png", "latency.png", "histogram.png", "transactions.png", "deliveries.csv"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.HasSuffix(name, ".png") && !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG", name)
		}
	}
	text, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	if string(text) != out {
		t.Error("report.txt differs from what was printed")
	}
	lines, _ := os.ReadFile(filepath.Join(dir, "deliveries.csv"))
	var rep struct{ Messages struct{ Deliveries int } }
	js, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(lines, []byte("\n")) - 1; n != rep.Messages.Deliveries || n == 0 {
		t.Errorf("deliveries.csv has %d deliveries, the report %d", n, rep.Messages.Deliveries)
	}
}

func TestSeedAndSet(t *testing.T) {
	sc := writeScenario(t, scenario)
	a, _, err := runCmd(t, "-q", "-no-files", "-seed", "3", sc)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := runCmd(t, "-q", "-no-files", "-seed", "3", sc)
	c, _, _ := runCmd(t, "-q", "-no-files", "-seed", "4", sc)
	if a != b || a == c {
		t.Error("-seed does not make runs reproducible and distinct")
	}
	out, _, err := runCmd(t, "-q", "-no-files", "-json", "-set", "consumers.0.count=9", "-set", "consumers.0.listen.kind=receive", sc)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Fleets       []struct{ MaxConsumers int }
		Transactions struct{ EmptyGets int }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out)
	}
	if rep.Fleets[0].MaxConsumers != 9 || rep.Transactions.EmptyGets != 0 {
		t.Errorf("-set had no effect: %+v", rep)
	}
}

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runCmd(t, "-q", "-out", dir, "-sweep", "consumers.0.visibilityTimeout=1s,10s", writeScenario(t, scenario))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "azqsim sweep: cli, consumers.0.visibilityTimeout") {
		t.Errorf("sweep table:\n%s", out)
	}
	for _, name := range []string{"sweep.txt", "sweep.csv", "sweep.json", "sweep.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "sweep.csv"))
	if n := bytes.Count(csv, []byte("\n")); n != 3 {
		t.Errorf("sweep.csv has %d lines, want a header and 2 rows", n)
	}
}

// TestSweepHasAFolderOfItsOwn: without -out, a sweep writes into
// azqsim-out/<name>-sweep-<parameter>, and a run of the same scenario
// afterwards into azqsim-out/<name>: neither folder holds the other's
// files.
func TestSweepHasAFolderOfItsOwn(t *testing.T) {
	sc := writeScenario(t, scenario)
	dir := chdirTemp(t)
	if _, _, err := runCmd(t, "-q", "-format", "svg", "-sweep", "consumers.0.count=2,3", sc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCmd(t, "-q", "-format", "svg", sc); err != nil {
		t.Fatal(err)
	}
	for folder, want := range map[string][]string{
		"cli-sweep-consumers.0.count": {"sweep.csv", "sweep.json", "sweep.svg", "sweep.txt"},
		"cli": {"depth.svg", "histogram.svg", "latency.csv", "latency.svg", "report.json", "report.txt",
			"timeseries.csv", "timeseries.json", "transactions.svg"},
	} {
		entries, err := os.ReadDir(filepath.Join(dir, "azqsim-out", folder))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("azqsim-out/%s holds %q, want %q", folder, got, want)
		}
	}
}

// chdirTemp makes the test's working directory a new temporary one, for
// the test, and returns it.
func chdirTemp(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Chdir(wd); err != nil {
			t.Fatal(err)
		}
	})
	return dir
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-format", "gif", "x.json"},
		{"-set", "novalue", writeScenario(t, scenario)},
		{"-sweep", "consumers.0.count", writeScenario(t, scenario)},
		{"-seed", "-1", writeScenario(t, scenario)},
	} {
		if _, _, err := runCmd(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	if _, _, err := runCmd(t, "-q", writeScenario(t, `{"duration": "1h"}`)); err == nil || !strings.Contains(err.Error(), "no consumers") {
		t.Errorf("bad scenario: %v", err)
	}
	// -set duration that leaves a producer starting after the end is
	// refused, not run without arrivals.
	late := `{"duration": "2h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}, "start": "1h"}], "consumers": [{"count": 1}]}`
	if _, _, err := runCmd(t, "-q", "-no-files", "-set", "duration=30m", writeScenario(t, late)); err == nil || !strings.Contains(err.Error(), "would put nothing") {
		t.Errorf("-set duration=30m before the producer's start: %v", err)
	}
	if _, _, err := runCmd(t, "-q", "-no-files", writeScenario(t, "{\n  \"duration\": 1h}")); err == nil || !strings.Contains(err.Error(), "line 2, column 16") {
		t.Errorf("JSON syntax error: %v, want its line and column", err)
	}
	if _, _, err := runCmd(t, "-q", "no/such/file.json"); err == nil {
		t.Error("a missing file was accepted")
	}
}

// TestSweepProgressIsOverall: during a sweep the bar and its percentage
// are the whole sweep's, and the line names the run and its value.
func TestSweepProgressIsOverall(t *testing.T) {
	p := &progress{run: 3, runs: 4, label: `consumers.0.count=8`}
	line := p.line(sim.Progress{Done: 30 * time.Minute, Total: time.Hour, Put: 42})
	want := "[==================            ]  62%  run 3 of 4,  50%: 30m0s of 1h0m0s  42 messages  consumers.0.count=8"
	if line != want {
		t.Errorf("line\n%q\nwant\n%q", line, want)
	}
	single := (&progress{}).line(sim.Progress{Done: 15 * time.Minute, Total: time.Hour})
	if !strings.HasPrefix(single, "[=======                       ]  25%  15m0s of 1h0m0s") {
		t.Errorf("single run: %q", single)
	}
}

// TestHelpNamesTheFormatDocs: -h says where the scenario format is
// documented, and those places exist.
func TestHelpNamesTheFormatDocs(t *testing.T) {
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"docs/simulator.md", "go doc github.com/azqlib/azq/sim.Scenario", "examples/sim/"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not mention %s:\n%s", want, stderr.String())
		}
	}
	for _, path := range []string{"../../docs/simulator.md", "../../examples/sim"} {
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		}
	}
}

// TestReadmeQuickstart runs README.md's simulator command, go run
// ./cmd/azqsim examples/sim/quickstart.json, from a fresh directory: it
// prints duplicates, latency, queue depth and storage transactions with
// their cost, and writes the time series and plots under
// azqsim-out/quickstart/, where no -out is given.
func TestReadmeQuickstart(t *testing.T) {
	scenario, err := filepath.Abs("../../examples/sim/quickstart.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := chdirTemp(t)
	out, _, err := runCmd(t, "-q", scenario)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"azqsim: quickstart", "duplicate deliveries", "latency, put to delete", "queue depth: max",
		"storage transactions at", "USD", "every message is accounted for"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"report.txt", "timeseries.csv", "depth.png", "latency.png", "transactions.png"} {
		if _, err := os.Stat(filepath.Join(dir, "azqsim-out", "quickstart", name)); err != nil {
			t.Error(err)
		}
	}
}

// TestVersionFlag: -version prints azqsim, azq's version and what the
// build recorded on one line of stdout, and needs no scenario.
func TestVersionFlag(t *testing.T) {
	out, errOut, err := runCmd(t, "-version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "azqsim "+azq.Version+" (") || !strings.HasSuffix(out, ")\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("-version printed %q, want azqsim %s (…) on one line", out, azq.Version)
	}
	if errOut != "" {
		t.Errorf("-version wrote to stderr: %q", errOut)
	}
}

// TestValuesAreCheckedBeforeRunning: a bad value of -set, of -sweep or of
// the file's sweep, and an -out that cannot take files, are reported
// before anything runs, pointing at the flag or the file as the user
// wrote it, never at a column of the JSON azqsim makes from -set.
func TestValuesAreCheckedBeforeRunning(t *testing.T) {
	sc := writeScenario(t, scenario)
	swept := writeScenario(t, `{"duration": "30m", "producers": [{"arrival": {"kind": "poisson", "rate": 2}}],
		"consumers": [{"count": 5}], "sweep": {"parameter": "consumers.0.count", "values": [1, 2, "x"]}}`)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-set", "consumers.0.cnt=1", sc}, `-set consumers.0.cnt=1: unknown field "cnt"`},
		{[]string{"-set", "consumers.0.count=x", sc}, "-set consumers.0.count=x: want a whole number, not a string"},
		{[]string{"-set", "consumers.0.count=1.5", sc}, "-set consumers.0.count=1.5: want a whole number, not the number 1.5"},
		{[]string{"-set", "consumers.0.count=0", sc}, "-set consumers.0.count=0: consumers.0 (fleet0): count must be at least 1"},
		{[]string{"-set", "consumers.3.count=1", sc}, `-set consumers.3.count=1: "3" is not an index of a list of 1`},
		{[]string{"-set", "consumers.0.visibilityTimeout=soon", sc}, `-set consumers.0.visibilityTimeout=soon: duration "soon": want e.g. 30s, 5m, 1h30m, 2d or 1d12h`},
		{[]string{"-sweep", "consumers.0.count=1,2,x", sc}, "-sweep consumers.0.count=1,2,x: value 3 of 3, x: want a whole number, not a string"},
		{[]string{"-sweep", "consumers.0.count=0,1", sc}, "-sweep consumers.0.count=0,1: value 1 of 2, 0: consumers.0 (fleet0): count must be at least 1"},
		{[]string{swept}, swept + `: sweep of consumers.0.count: value 3 of 3, "x": want a whole number, not a string`},
		{[]string{"-out", file, sc}, "-out " + file + ": a file, not a directory"},
		{[]string{"-out", filepath.Join(file, "sub"), sc}, "-out " + filepath.Join(file, "sub") + ": mkdir " + file + ": not a directory"},
		{[]string{"-sweep", "consumers.0.count=1,2", "-out", file, sc}, "-out " + file + ": a file, not a directory"},
	} {
		out, _, err := runCmd(t, append([]string{"-q"}, c.args...)...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "column") {
			t.Errorf("%q: %v points at a column", c.args, err)
		}
		if out != "" {
			t.Errorf("%q: something ran before the error:\n%s", c.args, out)
		}
	}
}
