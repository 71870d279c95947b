package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/azqlib/azq"
)

// ErrInvalidScenario wraps every problem found in a scenario: a file that is
// not valid JSON, an unknown field, or a value out of range.
var ErrInvalidScenario = errors.New("sim: invalid scenario")

// Scenario describes one simulation: how long it runs, who puts messages
// and who consumes them. It is what a scenario file holds, as JSON; see
// examples/sim in the repository for complete files. Zero fields take the
// defaults their comments give.
type Scenario struct {
	// Name labels the report and the plots.
	Name string `json:"name,omitempty"`
	// Description is free text, printed at the head of the report.
	Description string `json:"description,omitempty"`
	// Seed makes the run reproducible; the command's -seed overrides it.
	Seed uint64 `json:"seed,omitempty"`
	// Start is the simulated wall-clock time at which the run begins. It
	// places daily arrival windows and weekends. Default: Monday
	// 2024-01-01 00:00 UTC.
	Start time.Time `json:"start"`
	// Duration is how much simulated time the run covers. Required.
	Duration Duration `json:"duration"`
	// Sample is the interval of the time series. Default: Duration/500,
	// rounded to a whole second when longer than one.
	Sample Duration `json:"sample,omitempty"`
	// Producers put messages. There may be none, to measure what idle
	// consumers cost.
	Producers []Producer `json:"producers"`
	// Consumers are fleets of consumers; at least one.
	Consumers []Fleet `json:"consumers"`
	// Price is what storage transactions cost.
	Price Price `json:"price"`
	// Sweep, if set, runs the scenario once for each of a list of values
	// of one parameter.
	Sweep *Sweep `json:"sweep,omitempty"`
}

// Price is the price of storage transactions.
type Price struct {
	// PerTenThousand is the price of 10,000 transactions of any kind.
	// Default 0.01, the figure the Azure queue design guidance reasoned
	// with; set the current one for your account's region and redundancy.
	PerTenThousand float64 `json:"perTenThousand,omitempty"`
	// Currency labels the cost. Default "USD".
	Currency string `json:"currency,omitempty"`
}

// Producer puts messages into the queue.
type Producer struct {
	// Name labels the producer.
	Name string `json:"name,omitempty"`
	// Arrival is when messages come.
	Arrival Arrival `json:"arrival"`
	// Start and Stop bound the producer's activity, measured from the
	// start of the run; Stop 0 means the end of the run.
	Start Duration `json:"start,omitempty"`
	Stop  Duration `json:"stop,omitempty"`
	// Count, if positive, stops the producer after that many messages.
	Count int64 `json:"count,omitempty"`
	// TTL is the messages' time-to-live: 0 for Azure's default of 7 days,
	// "never" for messages that never expire.
	TTL Duration `json:"ttl,omitempty"`
	// Delay is the initial visibility delay of each message (Put's
	// visibility timeout); default 0, visible at once.
	Delay Dist `json:"delay"`
}

// Arrival is an arrival process.
//
//	{"kind": "constant", "rate": 10}        every 1/rate seconds
//	{"kind": "poisson", "rate": 10}         exponential gaps, mean 1/rate
//	{"kind": "burst", "size": 5000, "every": "1h"}  size messages at once,
//	                                        at Start and then every period
//	{"kind": "daily", "windows": [{"from": "09:00", "to": "17:00", "rate": 20}]}
//	                                        Poisson arrivals at each window's
//	                                        rate, every day (weekdays only
//	                                        unless weekends is true)
type Arrival struct {
	Kind     string   `json:"kind"`
	Rate     float64  `json:"rate,omitempty"`
	Size     int      `json:"size,omitempty"`
	Every    Duration `json:"every,omitempty"`
	Windows  []Window `json:"windows,omitempty"`
	Weekends bool     `json:"weekends,omitempty"`
}

// Window is a time of day, From up to To ("HH:MM" in the scenario's time
// zone, that of Start), during which messages arrive at Rate per second.
type Window struct {
	From string  `json:"from"`
	To   string  `json:"to"`
	Rate float64 `json:"rate"`
}

// Fleet is a group of identical consumers.
type Fleet struct {
	// Name labels the fleet.
	Name string `json:"name,omitempty"`
	// Model is how a consumer is simulated: "listener" (default), a
	// single-threaded consumer loop run as a state machine of the
	// simulator, or "worker", instances of this module's worker package
	// running their own code against the simulated queue.
	Model string `json:"model,omitempty"`
	// Count is the number of consumers (worker instances for the worker
	// model), at least 1; with Autoscale, the number at the start.
	Count int `json:"count"`
	// Start is when the fleet starts, from the start of the run; Spread
	// spaces its consumers' starts evenly over that much time.
	Start  Duration `json:"start,omitempty"`
	Spread Duration `json:"spread,omitempty"`
	// BatchSize is how many messages one Get asks for, 1 to 32. Default 16.
	BatchSize int `json:"batchSize,omitempty"`
	// VisibilityTimeout is the visibility timeout of Gets and lease
	// renewals (the worker's LeaseDuration). Default 30 s for listeners
	// (Azure's default) and 10 min for workers (Functions').
	VisibilityTimeout Duration `json:"visibilityTimeout,omitempty"`
	// Processing is the time one message takes. A listener processes the
	// messages of a batch one after another.
	Processing Dist `json:"processing"`
	// FailureProbability is the chance that processing a message fails.
	FailureProbability float64 `json:"failureProbability,omitempty"`
	// RetryDelay, if set, releases a failed message at once with this
	// visibility timeout (Update Message); if not, a listener leaves it to
	// reappear when its lease lapses. Workers always release (default 0).
	RetryDelay *Duration `json:"retryDelay,omitempty"`
	// MaxDequeueCount, if positive, sets a message aside in the poison
	// queue after that many failed attempts, or when it arrives with a
	// higher dequeue count. Default: none for listeners, 5 for workers.
	MaxDequeueCount int `json:"maxDequeueCount,omitempty"`
	// CrashProbability is the chance that a consumer crashes while it
	// processes a message, at a uniformly random point of the work. A
	// crashed consumer loses every message it holds (they reappear when
	// their leases lapse) and comes back after RestartDelay.
	CrashProbability float64  `json:"crashProbability,omitempty"`
	RestartDelay     Duration `json:"restartDelay,omitempty"`
	// Renew renews the lease of every held message every
	// VisibilityTimeout/2 (Update Message). Workers always renew.
	Renew bool `json:"renew,omitempty"`
	// Listen is how an idle consumer waits for work. Default: polling
	// every second for listeners, back-off for workers.
	Listen Listen `json:"listen"`
	// Autoscale, if set, adds and removes consumers by queue depth.
	Autoscale *Autoscale `json:"autoscale,omitempty"`
	// Worker tunes the worker model.
	Worker *WorkerModel `json:"worker,omitempty"`
}

// Listen is how an idle consumer waits for messages.
//
//	{"kind": "poll", "interval": "1s"}        Get every interval while empty
//	{"kind": "backoff", "min": "100ms", "max": "1m"}
//	                                         Functions' randomized exponential
//	                                         back-off: after the k-th empty
//	                                         Get in a row, wait
//	                                         min + min·2^(k-1)·U[0.8,1.2), at
//	                                         most max
//	{"kind": "receive"}                      wait in azq's Receive, woken the
//	                                         instant a message is visible
type Listen struct {
	Kind     string   `json:"kind,omitempty"`
	Interval Duration `json:"interval,omitempty"`
	Min      Duration `json:"min,omitempty"`
	Max      Duration `json:"max,omitempty"`
}

// Autoscale scales a fleet by queue depth, as a scaling agent that reads
// the queue's approximate message count (one billable Get Queue Metadata
// each time) does.
type Autoscale struct {
	// Interval is how often the depth is read. Default 1 minute.
	Interval Duration `json:"interval,omitempty"`
	// PerConsumer is the depth one consumer is meant to handle: the fleet
	// is scaled to ceil(depth/PerConsumer) consumers. Required.
	PerConsumer int `json:"perConsumer"`
	// Min and Max bound the fleet. Max is required.
	Min int `json:"min,omitempty"`
	Max int `json:"max"`
	// StartDelay is how long a new consumer takes to start (provisioning).
	StartDelay Duration `json:"startDelay,omitempty"`
}

// WorkerModel tunes the worker model's worker.Options.
type WorkerModel struct {
	// Concurrency and NewBatchThreshold as in worker.Options. Defaults:
	// Concurrency BatchSize, NewBatchThreshold Concurrency/2 (the worker's
	// own default of GOMAXPROCS-dependent values would make the result
	// depend on the machine).
	Concurrency       int `json:"concurrency,omitempty"`
	NewBatchThreshold int `json:"newBatchThreshold,omitempty"`
}

// Sweep runs a scenario once for each value of one parameter.
type Sweep struct {
	// Parameter is the path of the parameter in the scenario's JSON, with
	// dots between names and list indexes, such as
	// "consumers.0.visibilityTimeout" or "producers.0.arrival.rate".
	Parameter string `json:"parameter"`
	// Values are the parameter's values, as JSON values of the field.
	Values []json.RawMessage `json:"values"`
}

// Load reads a scenario file.
func Load(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// maxScenarioBytes bounds what Parse reads: scenario files are small.
const maxScenarioBytes = 1 << 20

// Parse reads a scenario from JSON and checks it. Unknown fields are
// errors, so that a misspelt field does not silently take its default. The
// returned scenario has its defaults filled in.
func Parse(r io.Reader) (*Scenario, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxScenarioBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxScenarioBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidScenario, maxScenarioBytes)
	}
	sc, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s%w", ErrInvalidScenario, position(b, err), err)
	}
	if err := sc.Check(); err != nil {
		return nil, err
	}
	return sc, nil
}

// decode reads a scenario from the JSON text b without checking it. Its
// errors are encoding/json's, and say nothing of where in b they are.
func decode(b []byte) (*Scenario, error) {
	var sc Scenario
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("text after the scenario object")
	}
	return &sc, nil
}

// position is "line L, column C: " for where in the JSON text b a decoding
// error is: the offset a syntax or type error carries, or the first key an
// unknown-field error names. It is empty when the error says nowhere.
func position(b []byte, err error) string {
	offset := int64(-1)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		offset = int64(len(b)) + 1 // just past the end
	default:
		const unknown = "json: unknown field "
		if name, ok := strings.CutPrefix(err.Error(), unknown); ok {
			if i := bytes.Index(b, []byte(name)); i >= 0 {
				offset = int64(i) + 1
			}
		}
	}
	if offset < 0 {
		return ""
	}
	offset = min(offset, int64(len(b))+1)
	line, col := 1, 1
	for _, c := range b[:max(offset-1, 0)] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d: ", line, col)
}

// defaultStart is a Monday at midnight, so that daily windows and
// weekends fall where a reader expects them.
var defaultStart = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// Limits on scenarios, to keep a typo from asking for a run that cannot end.
const (
	maxConsumers = 1_000_000
	maxDuration  = Duration(366 * 24 * time.Hour)
	maxRate      = 1e7 // messages per second, per producer
)

// Check validates the scenario and fills in defaults. Every problem found is
// reported, joined, and wrapped in ErrInvalidScenario.
func (sc *Scenario) Check() error {
	if err := sc.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	return nil
}

// check is Check without the wrapping in ErrInvalidScenario.
func (sc *Scenario) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if sc.Start.IsZero() {
		sc.Start = defaultStart
	}
	switch {
	case sc.Duration <= 0:
		bad("duration must be positive")
	case sc.Duration > maxDuration:
		bad("duration %v is over the limit of %v", sc.Duration, maxDuration)
	}
	if sc.Sample < 0 {
		bad("sample must not be negative")
	}
	if sc.Sample == 0 && sc.Duration > 0 {
		s := sc.Duration / 500
		if s > Duration(time.Second) {
			s = s / Duration(time.Second) * Duration(time.Second)
		}
		sc.Sample = max(s, 1)
	}
	if sc.Sample > 0 && sc.Duration > 0 && sc.Duration/sc.Sample > 100_000 {
		bad("sample %v gives more than 100000 samples", sc.Sample)
	}
	if sc.Price.PerTenThousand == 0 {
		sc.Price.PerTenThousand = 0.01
	}
	if sc.Price.PerTenThousand < 0 || math.IsNaN(sc.Price.PerTenThousand) || math.IsInf(sc.Price.PerTenThousand, 0) {
		bad("price.perTenThousand must be a non-negative number")
	}
	if sc.Price.Currency == "" {
		sc.Price.Currency = "USD"
	}

	// No producers is a scenario too: what idle listeners cost.
	for i := range sc.Producers {
		p := &sc.Producers[i]
		if p.Name == "" {
			p.Name = "producer" + strconv.Itoa(i)
		}
		for _, err := range p.check(sc.Duration) {
			bad("producers.%d (%s): %w", i, p.Name, err)
		}
	}
	if len(sc.Consumers) == 0 {
		bad("no consumers")
	}
	total := 0
	for i := range sc.Consumers {
		f := &sc.Consumers[i]
		if f.Name == "" {
			f.Name = "fleet" + strconv.Itoa(i)
		}
		for _, err := range f.check() {
			bad("consumers.%d (%s): %w", i, f.Name, err)
		}
		n := f.Count
		if f.Autoscale != nil {
			n = max(n, f.Autoscale.Max)
		}
		total += max(n, 0)
	}
	if total > maxConsumers {
		bad("%d consumers in all; the limit is %d", total, maxConsumers)
	}
	if sc.Sweep != nil {
		if sc.Sweep.Parameter == "" || len(sc.Sweep.Values) == 0 {
			bad("sweep needs a parameter and values")
		}
		if strings.HasPrefix(sc.Sweep.Parameter, "sweep") {
			bad("sweep cannot vary itself")
		}
	}
	return errors.Join(errs...)
}

func (p *Producer) check(runFor Duration) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	a := &p.Arrival
	switch a.Kind {
	case "constant", "poisson":
		if !(a.Rate > 0 && a.Rate <= maxRate) {
			bad("arrival.rate must be above 0 and at most %g per second", maxRate)
		}
	case "burst":
		if a.Size < 1 || a.Size > 10_000_000 {
			bad("arrival.size must be 1 to 10000000")
		}
		if a.Every < 0 || (a.Every > 0 && a.Every < Duration(time.Millisecond)) {
			bad("arrival.every must be 0 (one burst) or at least 1ms")
		}
	case "daily":
		if len(a.Windows) == 0 {
			bad("arrival.windows: at least one window")
		}
		for j, w := range a.Windows {
			from, err1 := parseClock(w.From)
			to, err2 := parseClock(w.To)
			switch {
			case err1 != nil || err2 != nil:
				bad("arrival.windows.%d: from and to must be times of day such as \"09:00\"", j)
			case to <= from:
				bad("arrival.windows.%d: to must be after from", j)
			case !(w.Rate >= 0 && w.Rate <= maxRate):
				bad("arrival.windows.%d: rate must be 0 to %g per second", j, maxRate)
			}
		}
	default:
		bad("arrival.kind %q: want constant, poisson, burst or daily", a.Kind)
	}
	if p.Start < 0 || p.Stop < 0 || (p.Stop > 0 && p.Stop <= p.Start) {
		bad("start and stop must be times within the run, stop after start")
	} else if runFor > 0 && p.Start >= runFor {
		// Say so rather than run a producer that never puts: a -set
		// duration=… that cuts the run short must not change the
		// question silently.
		bad("start %v is not before the end of the run (duration %v), so it would put nothing; remove the producer to simulate no arrivals", p.Start, runFor)
	}
	if p.Count < 0 {
		bad("count must not be negative")
	}
	if p.TTL < 0 && p.TTL != Never {
		bad("ttl must be positive, 0 (7 days) or \"never\"")
	}
	if err := p.Delay.check(); err != nil {
		bad("delay: %w", err)
	} else if hi, ok := p.Delay.upper(); !ok {
		bad("delay: a random delay needs max (at most 7d), as Azure allows no longer")
	} else {
		ttl := p.TTL
		if ttl == 0 {
			ttl = Duration(7 * 24 * time.Hour)
		}
		switch {
		case hi > Duration(7*24*time.Hour):
			bad("delay: at most 7d")
		case ttl != Never && hi >= ttl:
			bad("delay must be shorter than ttl")
		}
	}
	return errs
}

// parseClock reads "HH:MM" or "HH:MM:SS" as an offset into the day; "24:00"
// is the end of the day.
func parseClock(s string) (time.Duration, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("time of day %q", s)
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || len(p) > 2 {
			return 0, fmt.Errorf("time of day %q", s)
		}
		v[i] = n
	}
	if v[1] > 59 || v[2] > 59 || v[0] > 24 || (v[0] == 24 && (v[1] > 0 || v[2] > 0)) {
		return 0, fmt.Errorf("time of day %q", s)
	}
	return time.Duration(v[0])*time.Hour + time.Duration(v[1])*time.Minute + time.Duration(v[2])*time.Second, nil
}

func (f *Fleet) check() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	worker := false
	switch f.Model {
	case "", "listener":
		f.Model = "listener"
	case "worker":
		worker = true
	default:
		bad("model %q: want listener or worker", f.Model)
	}
	if f.Count < 0 || (f.Count == 0 && f.Autoscale == nil) {
		bad("count must be at least 1")
	}
	if f.Start < 0 || f.Spread < 0 {
		bad("start and spread must not be negative")
	}
	if f.BatchSize == 0 {
		f.BatchSize = 16
	}
	if f.BatchSize < 1 || f.BatchSize > 32 {
		bad("batchSize %d is outside 1..32", f.BatchSize)
	}
	if f.VisibilityTimeout == 0 {
		f.VisibilityTimeout = Duration(azq.DefaultVisibilityTimeout)
		if worker {
			f.VisibilityTimeout = Duration(10 * time.Minute)
		}
	}
	if f.VisibilityTimeout < Duration(time.Second) || f.VisibilityTimeout > Duration(7*24*time.Hour) {
		bad("visibilityTimeout %v is outside 1s..7d", f.VisibilityTimeout)
	}
	if err := f.Processing.check(); err != nil {
		bad("processing: %w", err)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"failureProbability", f.FailureProbability}, {"crashProbability", f.CrashProbability}} {
		if !(p.v >= 0 && p.v <= 1) {
			bad("%s %v is outside 0..1", p.name, p.v)
		}
	}
	if f.RetryDelay != nil && (*f.RetryDelay < 0 || *f.RetryDelay > Duration(7*24*time.Hour)) {
		bad("retryDelay must be 0 to 7d")
	}
	if f.MaxDequeueCount < 0 {
		bad("maxDequeueCount must not be negative")
	}
	if worker && f.MaxDequeueCount == 0 {
		f.MaxDequeueCount = 5
	}
	if f.RestartDelay < 0 {
		bad("restartDelay must not be negative")
	}
	l := &f.Listen
	if worker && l.Kind == "" {
		l.Kind = "backoff" // the worker's own default
	}
	switch l.Kind {
	case "", "poll":
		l.Kind = "poll"
		if worker {
			bad("listen.kind poll: the worker model polls with back-off (backoff) or waits in Receive (receive)")
		}
		if l.Interval == 0 {
			l.Interval = Duration(time.Second)
		}
		if l.Interval < Duration(time.Millisecond) {
			bad("listen.interval must be at least 1ms")
		}
	case "backoff":
		if l.Min == 0 {
			l.Min = Duration(100 * time.Millisecond)
		}
		if l.Max == 0 {
			l.Max = max(Duration(time.Minute), l.Min)
		}
		if l.Min < Duration(time.Millisecond) || l.Max < l.Min {
			bad("listen: min must be at least 1ms and max at least min")
		}
	case "receive":
	default:
		bad("listen.kind %q: want poll, backoff or receive", l.Kind)
	}
	if a := f.Autoscale; a != nil {
		if worker {
			bad("autoscale works with listeners only")
		}
		if a.Interval == 0 {
			a.Interval = Duration(time.Minute)
		}
		if a.Interval < Duration(time.Second) {
			bad("autoscale.interval must be at least 1s")
		}
		if a.PerConsumer < 1 {
			bad("autoscale.perConsumer must be at least 1")
		}
		if a.Max < 1 || a.Min < 0 || a.Min > a.Max || f.Count > a.Max {
			bad("autoscale: need 0 <= min <= count <= max, max at least 1")
		}
		if a.StartDelay < 0 {
			bad("autoscale.startDelay must not be negative")
		}
	}
	if worker {
		if f.Worker == nil {
			f.Worker = &WorkerModel{}
		}
		w := f.Worker
		if w.Concurrency == 0 {
			w.Concurrency = f.BatchSize
		}
		if w.NewBatchThreshold == 0 {
			w.NewBatchThreshold = w.Concurrency / 2
		}
		if w.Concurrency < 1 || w.Concurrency > 1024 || w.NewBatchThreshold < 0 || w.NewBatchThreshold >= w.Concurrency {
			bad("worker: need 1 <= concurrency <= 1024 and 0 <= newBatchThreshold < concurrency")
		}
		if f.Count > 64 {
			bad("the worker model runs real goroutines: at most 64 worker instances")
		}
	} else if f.Worker != nil {
		bad("worker options apply to the worker model only")
	}
	return errs
}
