package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/azqlib/azq"
)

// Options tune a run beyond its scenario.
type Options struct {
	// Seed replaces the scenario's seed when SetSeed is true.
	Seed    uint64
	SetSeed bool
	// Progress, if set, is called after every sample of the time series
	// with how far the run has got.
	Progress func(Progress)
	// Deliveries, if set, receives every delivery as a line of CSV:
	// simulated seconds, producer, message number, dequeue count, fleet
	// and consumer. It is written as the run goes, so it can be as long as
	// the run.
	Deliveries io.Writer
}

// Progress says how far a run has got.
type Progress struct {
	Done, Total time.Duration // simulated time
	Events      int64         // events processed so far
	Put         int64         // messages put so far
}

// Per-message state bits, one byte per message put.
const (
	msgDelivered uint8 = 1 << iota
	msgProcessed
	msgDeleted
	msgPoisoned
	msgExpired
)

// engine is one run: the queue, the event queue and everything that
// schedules events.
type engine struct {
	sc   *Scenario
	opts Options
	seed uint64
	base int64 // Unix nanoseconds of the run's start
	end  int64 // length of the run in nanoseconds
	now  int64 // nanoseconds since the start

	clk *simClock
	q   *azq.Queue // the queue under simulation
	pq  *azq.Queue // its poison queue
	ctx context.Context

	h      eventHeap
	seq    uint64
	events int64

	prods   []*producer
	fleets  []*fleet
	ls      []*listener
	groups  []*pollGroup // idle pollers, one group per interval
	waiting waitQueue    // listeners waiting in Receive
	wm      *workerModel // nil unless a fleet uses the worker model

	m          metrics
	deliveries io.Writer
	delivBuf   []byte
}

// Run simulates sc and returns its report. It returns ErrLost, with the
// report, if a message was lost or the queue broke its semantics, and an
// error wrapping ErrInvalidScenario if sc is not valid. sc is not changed:
// the run works on a copy with its defaults filled in.
func Run(ctx context.Context, sc *Scenario, opts Options) (*Report, error) {
	sc, err := sc.clone()
	if err != nil {
		return nil, err
	}
	if err := sc.Check(); err != nil {
		return nil, err
	}
	e := newEngine(sc, opts)
	if err := e.run(ctx); err != nil {
		return nil, err
	}
	rep := e.report()
	if len(rep.Violations) > 0 || rep.Messages.Lost != 0 {
		return rep, ErrLost
	}
	return rep, nil
}

// clone returns a deep copy of sc.
func (sc *Scenario) clone() (*Scenario, error) {
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	var c Scenario
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	return &c, nil
}

func newEngine(sc *Scenario, opts Options) *engine {
	e := &engine{sc: sc, opts: opts, seed: sc.Seed, deliveries: opts.Deliveries}
	if opts.SetSeed {
		e.seed = opts.Seed
	}
	e.base = sc.Start.UnixNano()
	e.end = int64(sc.Duration)
	e.clk = newSimClock(sc.Start)
	view := clockView{c: e.clk, owner: -1}
	e.q = azq.New(azq.WithClock(view))
	e.pq = azq.New(azq.WithClock(view))
	e.ctx = context.Background()
	for i := range sc.Producers {
		e.prods = append(e.prods, newProducer(e, i, &sc.Producers[i]))
	}
	for i := range sc.Consumers {
		e.fleets = append(e.fleets, newFleet(e, i, &sc.Consumers[i]))
	}
	return e
}

// schedule adds an event.
func (e *engine) schedule(at int64, kind uint8, id int32, gen uint32) {
	e.seq++
	e.h.push(event{at: at, seq: e.seq, id: id, gen: gen, kind: kind})
}

// scheduleVisible notes that messages may become visible at t.
func (e *engine) scheduleVisible(t int64) {
	if t < e.end {
		e.schedule(t, evVisible, 0, 0)
	}
}

func (e *engine) run(ctx context.Context) error {
	for _, p := range e.prods {
		p.scheduleNext()
	}
	for _, f := range e.fleets {
		f.start()
	}
	if s := int64(e.sc.Sample); s < e.end {
		e.schedule(s, evSample, 0, 0)
	}
	if e.wm != nil {
		e.wm.begin()
		defer e.wm.stop()
	}
	for {
		if e.wm != nil {
			e.wm.settle()
		}
		if e.h.len() == 0 || e.h.min().at >= e.end {
			break
		}
		ev := e.h.pop()
		e.now = ev.at
		e.clk.set(e.base + ev.at)
		e.events++
		if e.events&0xfff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch ev.kind {
		case evProducer:
			e.prods[ev.id].arrive()
		case evListener:
			if l := e.ls[ev.id]; l.gen == ev.gen {
				l.step()
			}
		case evVisible:
			e.wakeOne(e.now)
		case evSample:
			e.sample()
			if next := e.now + int64(e.sc.Sample); next < e.end {
				e.schedule(next, evSample, 0, 0)
			}
		case evAutoscale:
			e.fleets[ev.id].autoscale()
		case evTimer, evHandler, evCrash, evRestart:
			e.wm.handle(ev)
		}
	}
	e.now = e.end
	e.clk.set(e.base + e.end)
	e.finish()
	return nil
}

// wakeOne wakes the idle consumer that will be first to see a message that
// became visible at t (see idle.go).
func (e *engine) wakeOne(t int64) {
	for e.waiting.len() > 0 {
		w, _ := e.waiting.pop()
		l := e.ls[w.id]
		if l.state != stWaiting || l.gen != w.gen {
			continue
		}
		l.state = stPoll
		l.schedule(t)
		return
	}
	if e.wm != nil && e.wm.wake() {
		return
	}
	var best *pollGroup
	var bestID int32
	var bestAt int64
	for _, g := range e.groups {
		id, at, ok := g.first(t)
		if ok && (best == nil || at < bestAt || (at == bestAt && id < bestID)) {
			best, bestID, bestAt = g, id, at
		}
	}
	if best == nil {
		return
	}
	l := e.ls[bestID]
	best.remove(l)
	l.countIdle(bestAt)
	l.state = stPoll
	l.schedule(bestAt)
}

// group returns the poll group for interval, making it if needed.
func (e *engine) group(interval int64) *pollGroup {
	for _, g := range e.groups {
		if g.interval == interval {
			return g
		}
	}
	g := newPollGroup(interval)
	e.groups = append(e.groups, g)
	return g
}

// countIdleAll counts the empty polls that idle consumers made before now.
func (e *engine) countIdleAll() {
	for _, g := range e.groups {
		g.tree.Scan(func(k idleKey) bool {
			e.ls[k.id].countIdle(e.now)
			return true
		})
	}
}

// violation records a breach of the queue's semantics or of the
// simulator's accounting.
func (e *engine) violation(format string, args ...any) {
	e.m.nViolations++
	if len(e.m.violations) < 20 {
		msg := fmt.Sprintf("at %v: ", Duration(e.now)) + fmt.Sprintf(format, args...)
		e.m.violations = append(e.m.violations, msg)
	}
}

// opErr records an unexpected error from the queue.
func (e *engine) opErr(op string, err error) {
	e.violation("%s failed: %v", op, err)
}

// decode returns the producer and number of a message from its content.
func (e *engine) decode(content string) (*producer, int64, bool) {
	if len(content) != 8 {
		return nil, 0, false
	}
	pi := int(content[0]) | int(content[1])<<8
	k := int64(content[2]) | int64(content[3])<<8 | int64(content[4])<<16 |
		int64(content[5])<<24 | int64(content[6])<<32 | int64(content[7])<<40
	if pi >= len(e.prods) || k >= e.prods[pi].k {
		return nil, 0, false
	}
	return e.prods[pi], k, true
}

// delivered records one delivery of message k of p, with the dequeue count
// the queue reported, and checks it against what the simulator knows.
func (e *engine) delivered(p *producer, k int64, dequeues int64, f *fleet, consumer int32) {
	e.m.msgs.Deliveries++
	f.stats.Deliveries++
	st := p.states.at(k)
	if st == nil || *st&(msgDeleted|msgPoisoned|msgExpired) != 0 {
		e.violation("message %d:%d delivered after it was deleted, set aside or expired", p.idx, k)
		return
	}
	again := *st&msgDelivered != 0
	if again {
		e.m.msgs.Duplicates++
	}
	if again != (dequeues > 1) {
		e.violation("message %d:%d delivered with dequeue count %d, but delivered before: %v", p.idx, k, dequeues, again)
	}
	*st |= msgDelivered
	if e.deliveries != nil {
		b := e.delivBuf[:0]
		b = strconv.AppendFloat(b, float64(e.now)/1e9, 'f', 6, 64)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(p.idx), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, k, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, dequeues, 10)
		b = append(b, ',')
		b = append(b, f.f.Name...)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(consumer), 10)
		b = append(b, '\n')
		e.delivBuf = b
		if _, err := e.deliveries.Write(b); err != nil {
			e.violation("writing deliveries: %v", err)
			e.deliveries = nil
		}
	}
}

// completed records the successful delete of message k of p, put at
// inserted (ns since the start).
func (e *engine) completed(p *producer, k int64, inserted int64, f *fleet) {
	st := p.states.at(k)
	*st |= msgDeleted
	e.m.msgs.Completed++
	f.stats.Completed++
	lat := e.now - inserted
	e.m.lat.add(lat)
	e.m.latI.add(lat)
}

// processed records that message k of p was processed successfully.
func (e *engine) processed(p *producer, k int64) {
	st := p.states.at(k)
	if st == nil {
		return
	}
	if *st&msgProcessed != 0 {
		e.m.msgs.ProcessedAgain++
	}
	*st |= msgProcessed
}

// poisoned records message k of p set aside.
func (e *engine) poisoned(p *producer, k int64) {
	if st := p.states.at(k); st != nil {
		*st |= msgPoisoned
	}
	e.m.msgs.Poisoned++
}

func isNotFound(err error) bool { return errors.Is(err, azq.ErrMessageNotFound) }

// sample records a point of the time series.
func (e *engine) sample() {
	e.countIdleAll()
	for _, p := range e.prods {
		p.expire(e.now)
	}
	depth, err := e.q.ApproximateCount(e.ctx)
	if err != nil {
		e.opErr("ApproximateCount", err)
	}
	e.m.record(e.now, int64(depth))
	if e.opts.Progress != nil {
		e.opts.Progress(Progress{Done: time.Duration(e.now), Total: time.Duration(e.end),
			Events: e.events, Put: e.m.msgs.Put})
	}
}

// finish closes the books at the end of the run and checks that every
// message is accounted for.
func (e *engine) finish() {
	if e.wm != nil {
		e.wm.finish()
	}
	for _, l := range e.ls {
		l.close()
	}
	e.sample()
	e.m.msgs.InFlight = e.m.inFlight
	n, err := e.q.ApproximateCount(e.ctx)
	if err != nil {
		e.opErr("ApproximateCount", err)
	}
	e.m.msgs.InQueue = int64(n)
	mm := &e.m.msgs
	expected := mm.Put - mm.Completed - mm.Poisoned - mm.Expired
	mm.Lost = expected - mm.InQueue
	if mm.Lost > 0 {
		e.violation("%d messages lost: %d expected in the queue, %d there", mm.Lost, expected, mm.InQueue)
	} else if mm.Lost < 0 {
		e.violation("the queue holds %d messages more than were put and not yet done", -mm.Lost)
	}
	pn, err := e.pq.ApproximateCount(e.ctx)
	if err != nil {
		e.opErr("poison ApproximateCount", err)
	}
	if int64(pn) != e.m.poisonPuts {
		e.violation("the poison queue holds %d messages, %d were put there", pn, e.m.poisonPuts)
	}
}

// report builds the report from the books.
func (e *engine) report() *Report {
	sc := e.sc
	r := &Report{
		Name: sc.Name, Description: sc.Description, Seed: e.seed, Start: sc.Start,
		Duration: sc.Duration, Messages: e.m.msgs,
	}
	h := &e.m.lat
	r.Latency = Latency{Count: int64(h.n), Mean: h.mean() / 1e9, P50: h.quantile(0.5) / 1e9,
		P90: h.quantile(0.9) / 1e9, P99: h.quantile(0.99) / 1e9, Max: float64(h.max) / 1e9}
	h.buckets(func(mid float64, n uint64) {
		r.Histogram = append(r.Histogram, HistogramBin{Seconds: mid / 1e9, Count: n})
	})
	r.Throughput = float64(e.m.msgs.Completed) / (float64(e.end) / 1e9)
	t := &r.Transactions
	t.Count = e.m.tx
	t.EmptyGets = e.m.emptyGets
	for _, c := range t.Count {
		t.Total += c
	}
	t.PerTenThousand = sc.Price.PerTenThousand
	t.Currency = sc.Price.Currency
	t.Cost = float64(t.Total) / 1e4 * t.PerTenThousand
	r.Queue = QueueStats{MaxDepth: e.m.maxDepth, MaxInFlight: e.m.maxInFlight}
	if e.m.depthN > 0 {
		r.Queue.MeanDepth = e.m.depthSum / float64(e.m.depthN)
	}
	for _, f := range e.fleets {
		s := f.stats
		s.ConsumerHours = float64(f.aliveNs) / float64(time.Hour)
		if f.aliveNs > 0 {
			slots := int64(1)
			if f.f.Worker != nil {
				slots = int64(f.f.Worker.Concurrency) // handlers per instance
			}
			s.Utilisation = float64(f.busyNs) / float64(f.aliveNs*slots)
		}
		r.Fleets = append(r.Fleets, s)
	}
	r.Violations = append([]string{}, e.m.violations...)
	if extra := e.m.nViolations - len(e.m.violations); extra > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("… and %d more", extra))
	}
	r.Series = e.m.series
	return r
}

// metrics are the books of a run.
type metrics struct {
	msgs        Messages
	tx          [numOps]int64
	emptyGets   int64
	poisonPuts  int64
	lat, latI   histogram
	inFlight    int64
	maxInFlight int64
	busy, alive int64
	maxDepth    int64
	depthSum    float64
	depthN      int64

	prev struct { // cumulative counts at the last sample
		put, completed, dup, expired, empty int64
		tx                                  [numOps]int64
	}
	series      []Sample
	violations  []string
	nViolations int
}

func (m *metrics) addInFlight(n int64) {
	m.inFlight += n
	m.maxInFlight = max(m.maxInFlight, m.inFlight)
}

// record appends a sample at now.
func (m *metrics) record(now, depth int64) {
	s := Sample{T: float64(now) / 1e9, Depth: depth, InFlight: m.inFlight, Consumers: m.alive, Busy: m.busy,
		Put: m.msgs.Put - m.prev.put, Completed: m.msgs.Completed - m.prev.completed,
		Duplicates: m.msgs.Duplicates - m.prev.dup, Expired: m.msgs.Expired - m.prev.expired,
		EmptyGets: m.emptyGets - m.prev.empty}
	for i := range m.tx {
		s.Ops[i] = m.tx[i] - m.prev.tx[i]
	}
	if m.latI.n > 0 {
		s.LatencyP50 = m.latI.quantile(0.5) / 1e9
		s.LatencyP99 = m.latI.quantile(0.99) / 1e9
		s.LatencyMax = float64(m.latI.max) / 1e9
	}
	m.latI.reset()
	m.prev.put, m.prev.completed, m.prev.dup = m.msgs.Put, m.msgs.Completed, m.msgs.Duplicates
	m.prev.expired, m.prev.empty, m.prev.tx = m.msgs.Expired, m.emptyGets, m.tx
	m.series = append(m.series, s)
	m.maxDepth = max(m.maxDepth, depth)
	m.depthSum += float64(depth)
	m.depthN++
}

// producer puts messages.
type producer struct {
	e       *engine
	idx     int
	p       *Producer
	arr     *arrivals
	nextN   int // messages in the arrival scheduled next
	opts    azq.PutOptions
	delay   sampler
	delayed bool
	k       int64 // messages put so far: the next message's number

	// The expiry cursor replays the arrivals a time-to-live behind.
	ttl   int64 // -1 for messages that never expire
	exp   *arrivals
	expAt int64
	expN  int
	expOK bool
	expK  int64 // number of the next message to expire

	states stateArray

	chunk     string // contents of messages chunkBase.. chunkBase+contentChunk-1
	chunkBase int64
}

const contentChunk = 4096

func newProducer(e *engine, i int, p *Producer) *producer {
	pr := &producer{e: e, idx: i, p: p, chunkBase: -contentChunk}
	pr.arr = newArrivals(p, i, e.seed, e.sc.Start, e.end)
	ttl := time.Duration(p.TTL)
	switch {
	case p.TTL == Never:
		pr.opts.TimeToLive = azq.NeverExpires
		pr.ttl = -1
	case ttl == 0:
		ttl = 7 * 24 * time.Hour
		fallthrough
	default:
		pr.opts.TimeToLive = ttl
		pr.ttl = int64(ttl)
	}
	if pr.ttl >= 0 && pr.ttl < e.end {
		pr.exp = newArrivals(p, i, e.seed, e.sc.Start, e.end)
		pr.expAt, pr.expN, pr.expOK = pr.exp.next()
	}
	if up, _ := p.Delay.upper(); up > 0 {
		pr.delay, pr.delayed = newSampler(p.Delay), true
	}
	return pr
}

func (p *producer) scheduleNext() {
	at, n, ok := p.arr.next()
	if ok {
		p.nextN = n
		p.e.schedule(at, evProducer, int32(p.idx), 0)
	}
}

// arrive puts the messages of one arrival.
func (p *producer) arrive() {
	e := p.e
	for range p.nextN {
		p.put()
	}
	e.wakeOne(e.now)
	p.scheduleNext()
}

func (p *producer) put() {
	e := p.e
	k := p.k
	p.k++
	opts := p.opts
	if p.delayed {
		r := newKeyed(e.seed, 0x64656c6179, uint64(p.idx), uint64(k))
		d := p.delay.draw(&r) / int64(time.Second) * int64(time.Second) // Azure takes whole seconds
		opts.VisibilityTimeout = time.Duration(d)
		if d > 0 {
			e.scheduleVisible(e.now + d)
		}
	}
	p.states.grow(k)
	e.m.tx[OpPut]++
	if _, err := e.q.Put(e.ctx, p.content(k), &opts); err != nil {
		e.opErr("Put", err)
		*p.states.at(k) |= msgDeleted // never in the queue: nothing to account for
		return
	}
	e.m.msgs.Put++
}

// content returns the content of message k: the producer and the number,
// eight bytes. Contents are cut from strings made for 4096 messages at a
// time, so a message's content costs no allocation of its own.
func (p *producer) content(k int64) string {
	if k-p.chunkBase >= contentChunk {
		p.chunkBase = k
		b := make([]byte, 8*contentChunk)
		for i := range contentChunk {
			encodeContent(b[8*i:], p.idx, k+int64(i))
		}
		p.chunk = string(b)
	}
	i := int(k - p.chunkBase)
	return p.chunk[8*i : 8*i+8]
}

// contentOf returns the content of any message of p, allocating.
func (p *producer) contentOf(k int64) string {
	var b [8]byte
	encodeContent(b[:], p.idx, k)
	return string(b[:])
}

func encodeContent(b []byte, producer int, k int64) {
	b[0], b[1] = byte(producer), byte(producer>>8)
	for j := 0; j < 6; j++ {
		b[2+j] = byte(k >> (8 * j))
	}
}

// expire moves the expiry cursor to now: every message put a time-to-live
// ago or earlier and not yet done has expired.
func (p *producer) expire(now int64) {
	if p.exp == nil {
		return
	}
	m := &p.e.m
	for p.expOK && p.expAt+p.ttl <= now {
		for range p.expN {
			st := p.states.at(p.expK)
			if st != nil && *st&(msgDeleted|msgPoisoned|msgExpired) == 0 {
				*st |= msgExpired
				m.msgs.Expired++
			}
			p.expK++
		}
		p.expAt, p.expN, p.expOK = p.exp.next()
	}
	p.states.dropBelow(p.expK)
}

// stateArray holds one state byte per message, in chunks, so that the
// chunks of messages that have all expired can be freed.
type stateArray struct {
	chunks  [][]uint8
	dropped int // chunks freed from the front
}

const stateChunkBits = 16

func (s *stateArray) grow(k int64) {
	for int(k>>stateChunkBits) >= len(s.chunks) {
		s.chunks = append(s.chunks, make([]uint8, 1<<stateChunkBits))
	}
}

// at returns the state of message k, or nil if it was freed.
func (s *stateArray) at(k int64) *uint8 {
	c := int(k >> stateChunkBits)
	if c >= len(s.chunks) || s.chunks[c] == nil {
		return nil
	}
	return &s.chunks[c][k&(1<<stateChunkBits-1)]
}

// dropBelow frees the chunks that hold only messages below k.
func (s *stateArray) dropBelow(k int64) {
	for c := int(k >> stateChunkBits); s.dropped < c && s.dropped < len(s.chunks); s.dropped++ {
		s.chunks[s.dropped] = nil
	}
}

// noTime marks "never" among event times.
const noTime = math.MaxInt64
