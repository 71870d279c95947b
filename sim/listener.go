package sim

import (
	"math/rand/v2"
	"time"

	"github.com/azqlib/azq"
)

// fleet is a group of consumers as the simulation runs it.
type fleet struct {
	e       *engine
	idx     int
	f       *Fleet
	proc    sampler
	vt      time.Duration
	vtNs    int64
	batch   int
	retry   int64 // visibility of a failed message's release; -1: leave it to lapse
	maxDQ   int64 // 0: no poison queue
	failP   float64
	crashP  float64
	restart int64
	renew   bool
	listen  byte
	every   int64 // poll interval
	bmin    int64 // back-off bounds
	bmax    int64

	members []*listener
	alive   int // consumers up, starting or restarting: what the scaler counts
	up      int // consumers up
	aliveNs int64
	busyNs  int64
	stats   FleetStats
}

// Listening models.
const (
	listenPoll byte = iota
	listenBackoff
	listenReceive
)

func newFleet(e *engine, i int, f *Fleet) *fleet {
	fl := &fleet{e: e, idx: i, f: f, proc: newSampler(f.Processing), vt: f.VisibilityTimeout.D(),
		vtNs: int64(f.VisibilityTimeout), batch: f.BatchSize, retry: -1, maxDQ: int64(f.MaxDequeueCount),
		failP: f.FailureProbability, crashP: f.CrashProbability, restart: int64(f.RestartDelay), renew: f.Renew}
	fl.stats.Name, fl.stats.Model = f.Name, f.Model
	if f.RetryDelay != nil {
		fl.retry = int64(*f.RetryDelay)
	}
	switch f.Listen.Kind {
	case "poll":
		fl.listen, fl.every = listenPoll, int64(f.Listen.Interval)
	case "backoff":
		fl.listen, fl.bmin, fl.bmax = listenBackoff, int64(f.Listen.Min), int64(f.Listen.Max)
	case "receive":
		fl.listen = listenReceive
	}
	if f.Model == "worker" {
		if e.wm == nil {
			e.wm = newWorkerModel(e)
		}
		e.wm.addFleet(fl)
	}
	return fl
}

// start schedules the fleet's first consumers, and its scaler.
func (fl *fleet) start() {
	if fl.f.Model == "worker" {
		return // the worker model starts its instances itself
	}
	for i := range fl.f.Count {
		at := int64(fl.f.Start)
		if fl.f.Count > 1 {
			at += int64(fl.f.Spread) / int64(fl.f.Count) * int64(i)
		}
		fl.launch(at)
	}
	if a := fl.f.Autoscale; a != nil {
		fl.e.schedule(int64(fl.f.Start)+int64(a.Interval), evAutoscale, int32(fl.idx), 0)
	}
}

// launch starts a consumer at time at: a stopped one if there is one,
// else a new one.
func (fl *fleet) launch(at int64) {
	var l *listener
	for _, m := range fl.members {
		if m.state == stOff {
			l = m
			break
		}
	}
	if l == nil {
		e := fl.e
		l = &listener{f: fl, e: e, idx: int32(len(e.ls)), state: stOff}
		l.rng = rand.New(rand.NewPCG(e.seed, 0x6c697374656e6572^uint64(l.idx)))
		e.ls = append(e.ls, l)
		fl.members = append(fl.members, l)
	}
	fl.alive++
	l.state = stBooting
	l.schedule(at)
}

// autoscale reads the depth and scales the fleet to it, as a scaling
// agent would: new consumers start after the start delay, and idle ones
// are stopped; busy ones are left to finish.
func (fl *fleet) autoscale() {
	e := fl.e
	a := fl.f.Autoscale
	e.m.tx[OpMetadata]++
	depth, err := e.q.ApproximateCount(e.ctx)
	if err != nil {
		e.opErr("ApproximateCount", err)
	}
	want := (depth + a.PerConsumer - 1) / a.PerConsumer
	want = min(max(want, a.Min), a.Max)
	for fl.alive < want {
		fl.launch(e.now + int64(a.StartDelay))
	}
	for i := len(fl.members) - 1; i >= 0 && fl.alive > want; i-- {
		if l := fl.members[i]; l.state == stIdle || l.state == stWaiting {
			l.retire()
		}
	}
	e.schedule(e.now+int64(a.Interval), evAutoscale, int32(fl.idx), 0)
}

// Listener states.
const (
	stOff     uint8 = iota // not running: not started yet, or stopped
	stBooting              // starting; polls when its event comes
	stPoll                 // polls when its event comes
	stBusy                 // processing a batch
	stIdle                 // idle in a poll group, without an event
	stWaiting              // waiting in Receive, without an event
	stCrashed              // crashed; restarts when its event comes
)

// listener is a consumer as a state machine: a loop that gets a batch,
// processes its messages one after another, deletes each that succeeded,
// and gets again, or waits when the queue was empty. It has at most one
// event in the simulation's queue at a time, and none while it is idle.
type listener struct {
	e     *engine
	f     *fleet
	idx   int32
	state uint8
	gen   uint32 // bumped on every (re)scheduling; older events are stale

	// while idle
	lastPoll int64 // time of the last real poll
	counted  int64 // polls since then already counted as empty Gets
	group    *pollGroup
	rng      *rand.Rand // back-off jitter
	backoff  int64      // current back-off interval; 0: at the minimum
	backoffK int        // the k of the next empty poll in a row

	// while busy
	batch     []held
	cur       int // the message being processed
	leaseEnd  int64
	nextRenew int64
	busySince int64

	aliveSince int64
}

// held is a message a listener holds, with its processing planned.
type held struct {
	id       azq.MessageID
	receipt  azq.PopReceipt
	p        *producer
	k        int64
	inserted int64
	dq       int64
	end      int64 // when its processing ends, or the crash happens
	outcome  uint8
	gone     bool // a renewal found it gone (expired)
}

// Outcomes of processing a held message.
const (
	outOK        uint8 = iota // processed; delete it
	outFail                   // processing failed
	outPoison                 // arrived above the maximum dequeue count
	outCrash                  // the consumer crashes while processing it
	outUnstarted              // after a crash in the same batch
)

func (l *listener) schedule(at int64) {
	l.gen++
	l.e.schedule(at, evListener, l.idx, l.gen)
}

// step runs the listener's due event.
func (l *listener) step() {
	e := l.e
	switch l.state {
	case stBooting, stCrashed:
		l.aliveSince = e.now
		e.m.alive++
		l.f.up++
		l.f.stats.MaxConsumers = max(l.f.stats.MaxConsumers, l.f.up)
		l.resetBackoff()
		l.poll()
	case stPoll:
		l.poll()
	case stBusy:
		l.work()
	}
}

// poll gets a batch. For a listener that waits in Receive, this is
// Receive: it returns the messages visible now, as one Get, or waits
// without a transaction.
func (l *listener) poll() {
	e, f := l.e, l.f
	msgs, err := e.q.Get(e.ctx, f.batch, f.vt)
	if err != nil {
		e.opErr("Get", err)
	}
	if len(msgs) == 0 {
		if f.listen != listenReceive {
			e.m.tx[OpGet]++
			e.m.emptyGets++
			f.stats.EmptyGets++
		}
		l.idle()
		return
	}
	e.m.tx[OpGet]++
	l.resetBackoff()
	l.startBatch(msgs)
	if len(msgs) == f.batch {
		e.wakeOne(e.now) // there may be more
	}
}

// idle waits after an empty Get, as the listening model says.
func (l *listener) idle() {
	e, f := l.e, l.f
	switch f.listen {
	case listenPoll:
		l.join(e.group(f.every))
	case listenBackoff:
		if d := l.nextBackoff(); d < f.bmax {
			l.state = stPoll
			l.schedule(e.now + d)
		} else {
			l.join(e.group(f.bmax)) // from here on it polls every max
		}
	case listenReceive:
		l.state = stWaiting
		l.gen++
		e.waiting.push(receiveWait{id: l.idx, gen: l.gen})
	}
}

// join makes l an idle member of g, having just polled.
func (l *listener) join(g *pollGroup) {
	l.gen++ // no event is pending
	l.state = stIdle
	l.lastPoll = l.e.now
	l.counted = 0
	l.group = g
	g.add(l)
}

// countIdle counts, as empty Gets, the polls l made while idle before t.
func (l *listener) countIdle(t int64) {
	n := pollsBetween(l.lastPoll, t, l.group.interval) - l.counted
	if n <= 0 {
		return
	}
	l.counted += n
	e := l.e
	e.m.tx[OpGet] += n
	e.m.emptyGets += n
	l.f.stats.EmptyGets += n
}

func (l *listener) resetBackoff() { l.backoff, l.backoffK = 0, 1 }

// nextBackoff returns the wait after one more empty Get in a row:
// Functions' randomized exponential back-off, min + min·2^(k-1)·U[0.8,1.2)
// for the k-th, until it reaches max, where it stays.
func (l *listener) nextBackoff() int64 {
	f := l.f
	if l.backoff == f.bmax {
		return f.bmax
	}
	jitter := 0.8 + 0.4*l.rng.Float64()
	step := float64(f.bmin) * jitter * float64(uint64(1)<<min(l.backoffK-1, 62))
	next := f.bmin + int64(step)
	if step >= float64(f.bmax) || next >= f.bmax || next < f.bmin {
		l.backoff = f.bmax
		return f.bmax
	}
	l.backoff = next
	l.backoffK++
	return next
}

// startBatch takes a batch and plans its processing: each message's time,
// and whether it fails or crashes the consumer, are drawn from a stream
// keyed by the message and its dequeue count.
func (l *listener) startBatch(msgs []azq.Message) {
	e, f := l.e, l.f
	l.state = stBusy
	l.busySince = e.now
	e.m.busy++
	l.batch = l.batch[:0]
	l.cur = 0
	l.leaseEnd = e.now + f.vtNs
	l.nextRenew = noTime
	if f.renew {
		l.nextRenew = e.now + f.vtNs/2
	}
	t := e.now
	crashed := false
	lapse := false
	for i := range msgs {
		m := &msgs[i]
		p, k, ok := e.decode(m.Content)
		if !ok {
			e.violation("a Get returned a message the simulation never put")
			continue
		}
		e.delivered(p, k, m.DequeueCount, f, l.idx)
		h := held{id: m.ID, receipt: m.PopReceipt, p: p, k: k,
			inserted: m.InsertionTime.UnixNano() - e.base, dq: m.DequeueCount}
		switch {
		case crashed:
			h.outcome, h.end = outUnstarted, noTime
		case f.maxDQ > 0 && h.dq > f.maxDQ:
			h.outcome, h.end = outPoison, t
		default:
			r := newKeyed(e.seed, uint64(p.idx), uint64(k), uint64(h.dq))
			d := f.proc.draw(&r)
			fail, crash, point := r.float(), r.float(), r.float()
			if crash < f.crashP {
				crashed = true
				h.outcome, h.end = outCrash, t+int64(point*float64(d))
			} else {
				h.end = t + d
				if fail < f.failP {
					h.outcome = outFail
				}
				t = h.end
			}
		}
		if h.end >= l.leaseEnd || h.outcome == outCrash || h.outcome == outUnstarted ||
			(h.outcome == outFail && f.retry < 0) {
			lapse = true
		}
		l.batch = append(l.batch, h)
	}
	e.m.addInFlight(int64(len(l.batch)))
	if len(l.batch) == 0 {
		l.endBatch(false)
		return
	}
	if lapse && !f.renew {
		// Some message will not be deleted before its lease ends: it
		// becomes visible again then.
		e.scheduleVisible(l.leaseEnd)
	}
	l.schedule(l.next())
}

// next returns the time of the listener's next step while busy.
func (l *listener) next() int64 {
	return min(l.batch[l.cur].end, l.nextRenew)
}

// work processes what is due: finished messages, then a lease renewal.
func (l *listener) work() {
	e := l.e
	for l.cur < len(l.batch) && l.batch[l.cur].end <= e.now {
		h := &l.batch[l.cur]
		switch h.outcome {
		case outCrash:
			l.crash()
			return
		case outOK:
			l.complete(h)
		case outFail:
			l.fail(h)
		case outPoison:
			l.poison(h)
		}
		l.cur++
		e.m.addInFlight(-1)
	}
	if l.cur == len(l.batch) {
		l.endBatch(len(l.batch) == l.f.batch)
		return
	}
	if e.now >= l.nextRenew {
		l.renewAll()
	}
	l.schedule(l.next())
}

// complete deletes a processed message.
func (l *listener) complete(h *held) {
	e := l.e
	e.processed(h.p, h.k)
	e.m.tx[OpDelete]++
	switch err := e.q.Delete(e.ctx, h.id, h.receipt); {
	case err == nil:
		e.completed(h.p, h.k, h.inserted, l.f)
	case isNotFound(err):
		e.m.msgs.StaleDeletes++
	default:
		e.opErr("Delete", err)
	}
}

// fail handles a failed attempt: poison, release, or leave it to lapse.
func (l *listener) fail(h *held) {
	e, f := l.e, l.f
	e.m.msgs.Failed++
	switch {
	case f.maxDQ > 0 && h.dq >= f.maxDQ:
		l.poison(h)
	case f.retry >= 0:
		e.m.tx[OpUpdate]++
		_, err := e.q.Update(e.ctx, h.id, h.receipt, time.Duration(f.retry), nil)
		switch {
		case err == nil:
			if f.retry == 0 {
				e.wakeOne(e.now)
			} else {
				e.scheduleVisible(e.now + f.retry)
			}
		case isNotFound(err):
			e.m.msgs.StaleDeletes++
		default:
			e.opErr("Update", err)
		}
	case f.renew:
		e.scheduleVisible(l.leaseEnd) // renewed until now; it lapses then
	}
}

// poison copies a message to the poison queue and deletes it, in that
// order, as Functions does.
func (l *listener) poison(h *held) {
	e := l.e
	e.m.tx[OpPut]++
	if _, err := e.pq.Put(e.ctx, h.p.contentOf(h.k), &azq.PutOptions{TimeToLive: azq.NeverExpires}); err != nil {
		e.opErr("Put to the poison queue", err)
		return
	}
	e.m.poisonPuts++
	e.m.tx[OpDelete]++
	switch err := e.q.Delete(e.ctx, h.id, h.receipt); {
	case err == nil:
		e.poisoned(h.p, h.k)
	case isNotFound(err):
		e.m.msgs.StaleDeletes++
	default:
		e.opErr("Delete", err)
	}
}

// renewAll renews the lease of every message the listener still holds.
func (l *listener) renewAll() {
	e, f := l.e, l.f
	for i := l.cur; i < len(l.batch); i++ {
		h := &l.batch[i]
		if h.gone {
			continue
		}
		e.m.tx[OpUpdate]++
		res, err := e.q.Update(e.ctx, h.id, h.receipt, f.vt, nil)
		switch {
		case err == nil:
			h.receipt = res.PopReceipt
		case isNotFound(err):
			h.gone = true
		default:
			e.opErr("Update", err)
		}
	}
	l.leaseEnd = e.now + f.vtNs
	l.nextRenew = e.now + f.vtNs/2
}

// crash drops everything the listener holds; it restarts after the delay.
func (l *listener) crash() {
	e, f := l.e, l.f
	e.m.msgs.Crashes++
	f.stats.Crashes++
	e.m.addInFlight(-int64(len(l.batch) - l.cur))
	if f.renew {
		e.scheduleVisible(l.leaseEnd) // without renewal, startBatch did
	}
	l.batch = l.batch[:0]
	l.stopBusy()
	l.stopAlive()
	l.state = stCrashed
	l.schedule(e.now + f.restart)
}

// endBatch is reached when every message of the batch is done.
func (l *listener) endBatch(full bool) {
	e, f := l.e, l.f
	l.batch = l.batch[:0]
	l.stopBusy()
	l.resetBackoff()
	if f.listen == listenBackoff && !full {
		// Functions waits its minimum interval after a batch that did
		// not fill the request: the queue is probably drained.
		l.state = stPoll
		l.schedule(e.now + f.bmin)
		return
	}
	l.poll()
}

func (l *listener) stopBusy() {
	e := l.e
	l.f.busyNs += e.now - l.busySince
	e.m.busy--
}

func (l *listener) stopAlive() {
	e := l.e
	l.f.aliveNs += e.now - l.aliveSince
	e.m.alive--
	l.f.up--
}

// retire stops an idle listener (autoscaling in).
func (l *listener) retire() {
	e := l.e
	if l.state == stIdle {
		l.countIdle(e.now)
		l.group.remove(l)
	}
	l.gen++ // a Receive wait in the queue becomes stale
	l.stopAlive()
	l.f.alive--
	l.state = stOff
}

// close settles the listener's books at the end of the run.
func (l *listener) close() {
	e := l.e
	switch l.state {
	case stIdle:
		l.countIdle(e.now)
	case stBusy:
		l.f.busyNs += e.now - l.busySince
	}
	switch l.state {
	case stOff, stBooting, stCrashed:
	default:
		l.f.aliveNs += e.now - l.aliveSince
	}
}
