package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/azqlib/azq/internal/buildinfo"
	"github.com/azqlib/azq/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "azqsim:", err)
		os.Exit(1)
	}
}

// errUsage marks command-line errors, already reported on stderr.
var errUsage = errors.New("usage")

// setFlags collects repeated -set flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

type config struct {
	scenario   string
	seed       string
	out        string
	format     string
	sets       setFlags
	sweep      string
	quiet      bool
	jsonOut    bool
	deliveries bool
	noFiles    bool
	version    bool
}

// usageHead opens azqsim -h: what it does, and where the scenario format
// is written down.
const usageHead = `Usage: azqsim [flags] scenario.json

azqsim simulates a scenario of producers and consumers over an azq queue.
The scenario format: docs/simulator.md in the azq repository, or
go doc github.com/azqlib/azq/sim.Scenario; examples/sim/ has eight
scenarios, each a question. Flags:

`

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("azqsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.seed, "seed", "", "random seed, replacing the scenario's: the same seed gives the same report")
	fs.StringVar(&cfg.out, "out", "", "`directory` for the report, time series and plots (default azqsim-out/<scenario name>, for a sweep azqsim-out/<scenario name>-sweep-<parameter>)")
	fs.StringVar(&cfg.format, "format", "png", "plot format: png or svg")
	fs.Var(&cfg.sets, "set", "set a parameter, `path=value` (a JSON value or a bare string), e.g. consumers.0.count=50; repeatable")
	fs.StringVar(&cfg.sweep, "sweep", "", "run a sweep, `path=v1,v2,...`, e.g. consumers.0.visibilityTimeout=10s,30s,1m")
	fs.BoolVar(&cfg.quiet, "q", false, "no progress bar on stderr")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the report as JSON instead of text")
	fs.BoolVar(&cfg.deliveries, "deliveries", false, "also write every delivery to deliveries.csv")
	fs.BoolVar(&cfg.noFiles, "no-files", false, "print the report only; write no files")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage
	}
	if cfg.version {
		return cfg, nil
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return nil, errUsage
	}
	cfg.scenario = fs.Arg(0)
	switch cfg.format {
	case "png", "svg":
	default:
		fmt.Fprintf(stderr, "azqsim: -format %q: want png or svg\n", cfg.format)
		return nil, errUsage
	}
	return cfg, nil
}

// jsonValue reads a command-line value: JSON if it parses as JSON, else a
// string, so that -set consumers.0.visibilityTimeout=30s needs no quotes.
func jsonValue(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, "azqsim", buildinfo.Describe())
		return nil
	}
	sc, err := sim.Load(cfg.scenario)
	if err != nil {
		return err
	}
	for _, s := range cfg.sets {
		path, value, ok := strings.Cut(s, "=")
		if !ok {
			fmt.Fprintf(stderr, "azqsim: -set %q: want path=value\n", s)
			return errUsage
		}
		keep := sc.Sweep
		next, err := sc.With(path, jsonValue(value))
		if err != nil {
			return fmt.Errorf("-set %s: %w", s, problem(err))
		}
		sc, sc.Sweep = next, keep
	}
	// Where the sweep's values come from, and each as it was written
	// there, for errors about them.
	var sweepFrom string
	var written []string
	if sc.Sweep != nil {
		sweepFrom = cfg.scenario + ": sweep of " + sc.Sweep.Parameter
		for _, v := range sc.Sweep.Values {
			written = append(written, string(v))
		}
	}
	if cfg.sweep != "" {
		path, list, ok := strings.Cut(cfg.sweep, "=")
		if !ok || list == "" {
			fmt.Fprintf(stderr, "azqsim: -sweep %q: want path=v1,v2,...\n", cfg.sweep)
			return errUsage
		}
		sw := &sim.Sweep{Parameter: path}
		for _, v := range strings.Split(list, ",") {
			sw.Values = append(sw.Values, jsonValue(v))
		}
		sc.Sweep = sw
		sweepFrom, written = "-sweep "+cfg.sweep, strings.Split(list, ",")
	}
	// Every value of a sweep is checked before the first run, which may
	// take minutes.
	if sc.Sweep != nil {
		for i, v := range sc.Sweep.Values {
			if _, err := sc.With(sc.Sweep.Parameter, v); err != nil {
				return fmt.Errorf("%s: value %d of %d, %s: %w", sweepFrom, i+1, len(sc.Sweep.Values), written[i], problem(err))
			}
		}
	}
	var opts sim.Options
	if cfg.seed != "" {
		n, err := strconv.ParseUint(cfg.seed, 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "azqsim: -seed %q: want a non-negative integer\n", cfg.seed)
			return errUsage
		}
		opts.Seed, opts.SetSeed = n, true
	}
	name := sc.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(cfg.scenario), filepath.Ext(cfg.scenario))
		sc.Name = name
	}
	dir := cfg.out
	if dir == "" {
		dir = defaultOut(name, sc.Sweep)
	}
	if cfg.noFiles {
		dir = ""
	}
	if err := prepareOut(dir, cfg.out); err != nil {
		return err
	}
	format := cfg.format
	bar := newProgress(stderr, !cfg.quiet)

	if sc.Sweep != nil {
		return runSweep(ctx, sc, opts, cfg, dir, format, bar, stdout, stderr)
	}
	if cfg.deliveries && dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, "deliveries.csv"))
		if err != nil {
			return err
		}
		defer f.Close()
		w := newBufWriter(f)
		defer w.Flush()
		io.WriteString(w, "t_seconds,producer,message,dequeue_count,fleet,consumer\n")
		opts.Deliveries = w
	}
	opts.Progress = bar.update("")
	start := time.Now()
	rep, runErr := sim.Run(ctx, sc, opts)
	bar.done()
	if rep == nil {
		return runErr
	}
	if cfg.jsonOut {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		stdout.Write(append(b, '\n'))
	} else if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if !cfg.quiet {
		wall := time.Since(start)
		fmt.Fprintf(stderr, "azqsim: %v simulated in %v (%s simulated seconds per second)\n",
			sc.Duration, wall.Round(time.Millisecond), humanRate(sc.Duration.D().Seconds()/wall.Seconds()))
	}
	if dir != "" {
		files, err := rep.WriteFiles(dir, format)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "azqsim: wrote %d files to %s\n", len(files), dir)
	}
	return runErr
}

func runSweep(ctx context.Context, sc *sim.Scenario, opts sim.Options, cfg *config, dir, format string, bar *progress, stdout, stderr io.Writer) error {
	values := sc.Sweep.Values
	label := func(i int) string {
		if i >= len(values) {
			return ""
		}
		return sc.Sweep.Parameter + "=" + string(values[i])
	}
	bar.run, bar.runs = 1, len(values)
	opts.Progress = bar.update(label(0))
	res, runErr := sim.RunSweep(ctx, sc, opts, func(i int, r *sim.Report) {
		bar.run, bar.label = i+2, label(i+1)
	})
	bar.done()
	if res == nil || len(res.Reports) == 0 {
		return runErr
	}
	if cfg.jsonOut {
		b, err := json.MarshalIndent(res.Reports, "", "  ")
		if err != nil {
			return err
		}
		stdout.Write(append(b, '\n'))
	} else if err := res.WriteText(stdout); err != nil {
		return err
	}
	if dir != "" {
		files, err := res.WriteFiles(dir, format)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "azqsim: wrote %d files to %s\n", len(files), dir)
	}
	return runErr
}

// problem is what is wrong with a value given for a scenario's
// parameter, without the parameter and the value, which the caller names
// as the user gave them.
func problem(err error) error {
	var pe *sim.ParameterError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// prepareOut makes dir, where the report and plots go, and checks that
// files can be made in it, before anything runs: a simulation can take
// minutes, and an -out it cannot write to should not wait for it. out is
// -out as given, "" for the default. dir "" (-no-files) needs nothing.
func prepareOut(dir, out string) error {
	if dir == "" {
		return nil
	}
	name := "-out " + out
	if out == "" {
		name = dir + " (where the files go without -out)"
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s: a file, not a directory", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	probe, err := os.CreateTemp(dir, ".azqsim-probe-*")
	if err != nil {
		return fmt.Errorf("%s: cannot write files there: %w", name, err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// defaultOut is where the files go without -out: azqsim-out/<scenario
// name> for a run, and for a sweep a folder of its own beside it,
// azqsim-out/<scenario name>-sweep-<parameter>, so that a run and a sweep
// of the same scenario, in either order, leave each its own files and
// never one folder holding both.
func defaultOut(name string, sweep *sim.Sweep) string {
	if sweep != nil {
		return filepath.Join("azqsim-out", safeName(name)+"-sweep-"+safeName(sweep.Parameter))
	}
	return filepath.Join("azqsim-out", safeName(name))
}

// safeName turns a scenario name into a directory name.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "scenario"
	}
	return b.String()
}

func humanRate(x float64) string {
	switch {
	case x >= 1e6:
		return strconv.FormatFloat(x/1e6, 'f', 1, 64) + " M"
	case x >= 1e3:
		return strconv.FormatFloat(x/1e3, 'f', 1, 64) + " k"
	default:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
}
