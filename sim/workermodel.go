package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/worker"
)

// The worker model runs this module's worker package itself, so that its
// real algorithm (batching, back-off, lease renewal, retries, poison
// handling) is what gets measured. A worker runs goroutines, which the
// simulation cannot step like its state machines; instead it lets them run
// while simulated time stands still, and moves time on only once every
// worker has settled: every handler is blocked in the simulated work, and
// the goroutine that fetches is waiting for its back-off timer or in
// Receive, or has no room to fetch.
//
// The simulation knows this from what it sees: the queue operations, which
// reach the queue through a source of the simulation's (and are counted,
// billed and checked there), the worker's events (OnEvent), the handlers,
// which the simulation provides, and the timers armed on the simulated
// clock. A lease-renewal timer that fires starts goroutines the simulation
// cannot see until they reach the queue, so after one it also waits until
// nothing has happened for a short while of real time.
//
// The limits are honest ones: the goroutines' order among themselves is the
// Go scheduler's, so two workers fetching at the same simulated instant may
// take messages in either order, and a run of the worker model is
// reproducible in its totals but not always message for message; and each
// step costs real microseconds, so the model suits fleets of a few
// instances over hours or days, not the week-long runs of the listener
// model.
type workerModel struct {
	e      *engine
	fleets []*workerFleet
	insts  []*workerInst

	// mu guards the engine's books while worker goroutines may run (they
	// update them under mu, between their queue operations and events),
	// and everything below.
	mu       sync.Mutex
	poke     chan struct{}          // capacity 1: something happened
	activity uint64                 // counts everything that happened
	timers   map[int32]*simTimer    // armed timers, by event id
	handlers map[int32]*handlerCall // handlers in simulated work, by event id
	nextID   int32
	waiters  []*workerInst // instances waiting in Receive, in order
	toWake   []*workerInst // woken, to be signalled when the loop settles
	wakes    int           // wakeOne calls owed for full batches
	ended    bool
}

var (
	errCrashed = errors.New("sim: the worker's process crashed")
	errEnded   = errors.New("sim: the simulation ended")
	errFailed  = errors.New("sim: processing failed")
)

// workerFleet is a fleet of the worker model.
type workerFleet struct {
	fl        *fleet
	threshold int64
	insts     []*workerInst
}

// workerInst is one worker instance, a process that crashes and restarts.
type workerInst struct {
	wm *workerModel
	wf *workerFleet
	id int32
	// gen counts restarts; crash events of an earlier life are stale.
	gen     uint32
	running bool
	down    bool // crashed or ended: the source refuses every operation
	cancel  context.CancelFunc
	done    chan struct{}

	fetched, final int64 // messages fetched, and settled (final events)
	parked         int   // handlers blocked in simulated work
	fetchObs       uint8 // what the fetching goroutine last did
	fired          bool  // a timer other than the poll wait fired
	pauseAt        int64 // when the poll wait ends (Unix ns); -1 if none
	held           map[azq.MessageID]*wheld
	recv           chan struct{} // wakes a Receive
	receiving      bool
	crashPending   bool
	aliveSince     int64
}

// What the fetching goroutine of an instance was last seen doing.
const (
	obsNone      uint8 = iota // not known: it may be about to fetch
	obsPollWait               // waiting out its back-off
	obsReceiving              // waiting in Receive
	obsFetched                // fetched a batch; fetches again when there is room
)

// wheld is a message an instance holds.
type wheld struct {
	p        *producer
	k        int64
	inserted int64
	leaseEnd int64
	deleted  bool
}

// handlerCall is a handler blocked in simulated work.
type handlerCall struct {
	inst    *workerInst
	gen     uint32
	p       *producer
	k       int64
	outcome uint8
	start   int64
	release chan error
	done    bool
}

func newWorkerModel(e *engine) *workerModel {
	return &workerModel{e: e, poke: make(chan struct{}, 1),
		timers: make(map[int32]*simTimer), handlers: make(map[int32]*handlerCall)}
}

func (wm *workerModel) addFleet(fl *fleet) {
	wf := &workerFleet{fl: fl, threshold: int64(fl.f.Worker.NewBatchThreshold)}
	for range fl.f.Count {
		inst := &workerInst{wm: wm, wf: wf, id: int32(len(wm.insts))}
		wm.insts = append(wm.insts, inst)
		wf.insts = append(wf.insts, inst)
	}
	wm.fleets = append(wm.fleets, wf)
}

// begin schedules the instances' starts.
func (wm *workerModel) begin() {
	e := wm.e
	e.clk.mu.Lock()
	e.clk.notify = wm.timerAdded
	e.clk.mu.Unlock()
	for _, wf := range wm.fleets {
		f := wf.fl.f
		for i, inst := range wf.insts {
			at := int64(f.Start)
			if f.Count > 1 {
				at += int64(f.Spread) / int64(f.Count) * int64(i)
			}
			wf.fl.alive++
			e.schedule(at, evRestart, inst.id, inst.gen)
		}
	}
}

// bump records activity and wakes the loop if it waits. wm.mu must be held.
func (wm *workerModel) bump() {
	wm.activity++
	select {
	case wm.poke <- struct{}{}:
	default:
	}
}

// timerAdded is the clock's notification of a new timer.
func (wm *workerModel) timerAdded(owner int) {
	wm.mu.Lock()
	wm.bump()
	wm.mu.Unlock()
}

// settle waits until every worker has settled (see the type's comment),
// moving the timers they armed into the event queue.
func (wm *workerModel) settle() {
	e := wm.e
	start := time.Now()
	spins := 0
	for {
		wm.mu.Lock()
		for _, t := range e.clk.takeAdded() {
			wm.addTimerLocked(t)
		}
		for _, inst := range wm.toWake {
			select {
			case inst.recv <- struct{}{}:
			default:
			}
			wm.activity++
		}
		wm.toWake = wm.toWake[:0]
		for wm.wakes > 0 {
			wm.wakes--
			e.wakeOne(e.now)
		}
		ok, quiet := wm.settledLocked()
		act := wm.activity
		wm.mu.Unlock()

		if ok && !quiet {
			return
		}
		if ok {
			// A renewal timer fired: give the goroutines it started
			// time to show themselves.
			for range 20 {
				runtime.Gosched()
			}
			time.Sleep(50 * time.Microsecond)
			wm.mu.Lock()
			if wm.activity == act {
				for _, inst := range wm.insts {
					inst.fired = false
				}
				wm.mu.Unlock()
				return
			}
			wm.mu.Unlock()
			continue
		}
		if spins < 50 {
			spins++
			runtime.Gosched()
			continue
		}
		select {
		case <-wm.poke:
		case <-time.After(time.Millisecond):
		}
		if time.Since(start) > time.Minute {
			panic("sim: the worker model did not settle within a minute: " + wm.describeLocked())
		}
	}
}

// settledLocked reports whether every running instance has settled, and
// whether a quiet period is still needed.
func (wm *workerModel) settledLocked() (ok, quiet bool) {
	for _, inst := range wm.insts {
		if !inst.running {
			continue
		}
		if int64(inst.parked) != inst.fetched-inst.final {
			return false, false
		}
		switch inst.fetchObs {
		case obsPollWait, obsReceiving:
		case obsFetched:
			if inst.fetched-inst.final <= inst.wf.threshold {
				return false, false // it will fetch again
			}
		default:
			return false, false
		}
		quiet = quiet || inst.fired
	}
	return true, quiet
}

func (wm *workerModel) describeLocked() string {
	s := ""
	for _, inst := range wm.insts {
		s += fmt.Sprintf("[instance %d running=%v parked=%d fetched=%d final=%d obs=%d fired=%v] ",
			inst.id, inst.running, inst.parked, inst.fetched, inst.final, inst.fetchObs, inst.fired)
	}
	return s
}

func (wm *workerModel) addTimerLocked(t *simTimer) {
	wm.nextID++
	wm.timers[wm.nextID] = t
	wm.e.schedule(max(t.at-wm.e.base, wm.e.now), evTimer, wm.nextID, 0)
}

// handle runs an event of the worker model. The loop has settled, so no
// worker goroutine runs: it touches the books without the lock until it
// lets goroutines go, which it does last.
func (wm *workerModel) handle(ev event) {
	e := wm.e
	switch ev.kind {
	case evTimer:
		t := wm.timers[ev.id]
		delete(wm.timers, ev.id)
		if t.owner >= 0 {
			// The poll wait's timer is told from the others by its time;
			// the fetching goroutine is about to fetch.
			inst := wm.insts[t.owner]
			if t.at == inst.pauseAt {
				inst.pauseAt = -1
				inst.fetchObs = obsNone
			} else {
				inst.fired = true
			}
		}
		t.fire(time.Unix(0, e.base+e.now))
	case evHandler:
		hc := wm.handlers[ev.id]
		delete(wm.handlers, ev.id)
		if hc == nil || hc.done {
			return
		}
		hc.done = true
		hc.inst.parked--
		e.m.busy--
		hc.inst.wf.fl.busyNs += e.now - hc.start
		var err error
		switch hc.outcome {
		case outOK:
			e.processed(hc.p, hc.k)
		case outFail:
			e.m.msgs.Failed++
			err = errFailed
		}
		hc.release <- err
	case evCrash:
		inst := wm.insts[ev.id]
		if inst.gen != ev.gen || !inst.running {
			return
		}
		e.m.msgs.Crashes++
		inst.wf.fl.stats.Crashes++
		wm.halt(inst, errCrashed)
		inst.gen++
		e.schedule(e.now+inst.wf.fl.restart, evRestart, inst.id, inst.gen)
	case evRestart:
		inst := wm.insts[ev.id]
		if inst.gen != ev.gen || inst.running || wm.ended {
			return
		}
		wm.launch(inst)
	}
}

// launch starts an instance: a new worker.Worker over a new source.
func (wm *workerModel) launch(inst *workerInst) {
	e := wm.e
	fl := inst.wf.fl
	f := fl.f
	inst.running, inst.down = true, false
	inst.fetched, inst.final, inst.parked = 0, 0, 0
	inst.fetchObs, inst.fired, inst.pauseAt = obsNone, false, -1
	inst.held = make(map[azq.MessageID]*wheld)
	inst.recv = make(chan struct{}, 1)
	inst.receiving, inst.crashPending = false, false
	inst.aliveSince = e.now
	e.m.alive++
	fl.up++
	fl.stats.MaxConsumers = max(fl.stats.MaxConsumers, fl.up)

	src := &workerSource{inst: inst}
	var q worker.Queue = src
	if fl.listen == listenReceive {
		q = &receivingSource{src}
	}
	retry := time.Duration(0)
	if fl.retry >= 0 {
		retry = time.Duration(fl.retry)
	}
	opts := worker.Options{
		BatchSize:         f.BatchSize,
		Concurrency:       f.Worker.Concurrency,
		NewBatchThreshold: f.Worker.NewBatchThreshold,
		MaxDequeueCount:   f.MaxDequeueCount,
		LeaseDuration:     fl.vt,
		RetryDelay:        retry,
		MinPollInterval:   time.Duration(fl.bmin),
		MaxPollInterval:   time.Duration(fl.bmax),
		ShutdownTimeout:   -1, // a crash gives no grace
		QueueName:         "sim",
		Poison: func(context.Context, string) (worker.Queue, error) {
			return &poisonSource{inst: inst}, nil
		},
		Clock:   clockView{c: e.clk, owner: int(inst.id)},
		Rand:    rand.New(rand.NewPCG(e.seed, 0x776f726b6572<<16^uint64(inst.id)<<8^uint64(inst.gen))),
		OnEvent: inst.onEvent,
	}
	w := worker.New(q, wm.handler(inst), opts)
	ctx, cancel := context.WithCancel(context.Background())
	inst.cancel = cancel
	inst.done = make(chan struct{})
	go func() {
		defer close(inst.done)
		if err := w.Run(ctx); err != nil {
			wm.mu.Lock()
			e.violation("worker instance %d: %v", inst.id, err)
			wm.mu.Unlock()
		}
	}()
}

// halt stops an instance's process at once, as a crash does: its source
// refuses everything from now on, its handlers return, and its messages
// are left to reappear when their leases lapse.
func (wm *workerModel) halt(inst *workerInst, why error) {
	e := wm.e
	wm.mu.Lock()
	inst.down = true
	var calls []*handlerCall
	for id, hc := range wm.handlers {
		if hc.inst == inst {
			delete(wm.handlers, id)
			if !hc.done {
				hc.done = true
				calls = append(calls, hc)
				e.m.busy--
				inst.wf.fl.busyNs += e.now - hc.start
			}
		}
	}
	inst.parked = 0
	wm.mu.Unlock()
	for _, hc := range calls {
		hc.release <- why
	}
	inst.cancel()
	select {
	case <-inst.done:
	case <-time.After(time.Minute):
		panic("sim: a worker instance did not stop within a minute")
	}
	wm.mu.Lock()
	defer wm.mu.Unlock()
	if !wm.ended {
		for _, h := range inst.held {
			if !h.deleted {
				e.scheduleVisible(h.leaseEnd)
			}
		}
		e.m.addInFlight(-int64(len(inst.held)))
	}
	inst.held = nil
	inst.running = false
	for i, w := range wm.waiters {
		if w == inst {
			wm.waiters = append(wm.waiters[:i], wm.waiters[i+1:]...)
			break
		}
	}
	e.m.alive--
	inst.wf.fl.up--
	inst.wf.fl.aliveNs += e.now - inst.aliveSince
}

// wake wakes the first instance waiting in Receive, if any, for a message
// that became visible now. The signal goes out when the loop settles.
func (wm *workerModel) wake() bool {
	for len(wm.waiters) > 0 {
		inst := wm.waiters[0]
		wm.waiters = wm.waiters[1:]
		if !inst.receiving || inst.down {
			continue
		}
		inst.receiving = false
		inst.fetchObs = obsNone
		wm.toWake = append(wm.toWake, inst)
		return true
	}
	return false
}

// finish stops every instance at the end of the run. The books are closed
// first: what the instances do while they stop does not count.
func (wm *workerModel) finish() {
	wm.mu.Lock()
	wm.ended = true
	wm.mu.Unlock()
	for _, inst := range wm.insts {
		if inst.running {
			wm.halt(inst, errEnded)
		}
	}
}

// stop ends any instance still running when the run stops early.
func (wm *workerModel) stop() {
	for _, inst := range wm.insts {
		if inst.running {
			wm.mu.Lock()
			wm.ended = true
			wm.mu.Unlock()
			wm.halt(inst, errEnded)
		}
	}
}

// handler returns the instance's handler: it blocks in simulated work for
// the message's processing time, then succeeds or fails as drawn; or the
// instance crashes part-way.
func (wm *workerModel) handler(inst *workerInst) worker.Handler {
	return func(ctx context.Context, d *worker.Delivery) error {
		e := wm.e
		fl := inst.wf.fl
		wm.mu.Lock()
		if inst.down {
			wm.mu.Unlock()
			return errCrashed
		}
		p, k, ok := e.decode(d.Message.Content)
		if !ok {
			e.violation("a worker was handed a message the simulation never put")
			wm.mu.Unlock()
			return errFailed
		}
		r := newKeyed(e.seed, uint64(p.idx), uint64(k), uint64(d.Message.DequeueCount))
		dur := fl.proc.draw(&r)
		fail, crash, point := r.float(), r.float(), r.float()
		hc := &handlerCall{inst: inst, gen: inst.gen, p: p, k: k, start: e.now, release: make(chan error, 1)}
		switch {
		case crash < fl.crashP:
			hc.outcome = outCrash
			if !inst.crashPending {
				inst.crashPending = true
				e.schedule(e.now+int64(point*float64(dur)), evCrash, inst.id, inst.gen)
			}
		case fail < fl.failP:
			hc.outcome = outFail
		}
		wm.nextID++
		wm.handlers[wm.nextID] = hc
		if hc.outcome != outCrash { // else it never finishes; the crash releases it
			e.schedule(e.now+dur, evHandler, wm.nextID, 0)
		}
		inst.parked++
		e.m.busy++
		wm.bump()
		wm.mu.Unlock()

		select {
		case err := <-hc.release:
			return err
		case <-ctx.Done():
			// The lease was lost, or the worker is stopping.
			wm.mu.Lock()
			if !hc.done {
				hc.done = true
				inst.parked--
				e.m.busy--
				fl.busyNs += e.now - hc.start
				wm.bump()
			}
			wm.mu.Unlock()
			return context.Cause(ctx)
		}
	}
}

// onEvent follows an instance's events.
func (inst *workerInst) onEvent(ev worker.Event) {
	wm := inst.wm
	e := wm.e
	wm.mu.Lock()
	defer wm.mu.Unlock()
	defer wm.bump()
	if wm.ended || !inst.running {
		return
	}
	switch ev.Kind {
	case worker.EventPollWait:
		inst.fetchObs = obsPollWait
		inst.pauseAt = e.base + e.now + int64(ev.Wait)
	case worker.EventSucceeded, worker.EventRetry, worker.EventPoisoned, worker.EventLeaseLost,
		worker.EventReleased, worker.EventAbandoned:
		inst.final++
		h := inst.held[ev.MessageID]
		if h == nil {
			return
		}
		delete(inst.held, ev.MessageID)
		e.m.addInFlight(-1)
		switch {
		case ev.Kind == worker.EventSucceeded && h.deleted:
			e.completed(h.p, h.k, h.inserted, inst.wf.fl)
		case ev.Kind == worker.EventPoisoned && h.deleted:
			e.poisoned(h.p, h.k)
		case h.deleted:
		case h.leaseEnd <= e.now:
			wm.wakes++ // released to be visible at once
		default:
			e.scheduleVisible(h.leaseEnd) // it reappears when its lease lapses or its release ends
		}
	}
}

// workerSource is the queue as a worker instance sees it: the simulated
// queue, through a layer that counts and checks every operation, and that
// refuses everything once the instance is down.
type workerSource struct {
	inst *workerInst
}

func (s *workerSource) Name() string { return "sim" }

func (s *workerSource) Get(ctx context.Context, n int, vis time.Duration) ([]azq.Message, error) {
	wm := s.inst.wm
	wm.mu.Lock()
	defer wm.mu.Unlock()
	return s.getLocked(ctx, n, vis, true)
}

// getLocked runs a Get and records it; billed says whether it is a
// transaction (a Receive that finds nothing and waits is not).
func (s *workerSource) getLocked(ctx context.Context, n int, vis time.Duration, billed bool) ([]azq.Message, error) {
	inst := s.inst
	wm := inst.wm
	e := wm.e
	if inst.down {
		return nil, errCrashed
	}
	msgs, err := e.q.Get(ctx, n, vis)
	if err != nil {
		e.opErr("worker Get", err)
		return msgs, err
	}
	wm.bump()
	if len(msgs) == 0 && !billed {
		return msgs, nil
	}
	e.m.tx[OpGet]++
	fl := inst.wf.fl
	if len(msgs) == 0 {
		e.m.emptyGets++
		fl.stats.EmptyGets++
		inst.fetchObs = obsNone // it will wait next
		return msgs, nil
	}
	inst.fetched += int64(len(msgs))
	inst.fetchObs = obsFetched
	for i := range msgs {
		m := &msgs[i]
		p, k, ok := e.decode(m.Content)
		if !ok {
			e.violation("a Get returned a message the simulation never put")
			continue
		}
		e.delivered(p, k, m.DequeueCount, fl, inst.id)
		inst.held[m.ID] = &wheld{p: p, k: k, inserted: m.InsertionTime.UnixNano() - e.base,
			leaseEnd: e.now + int64(vis)}
		e.m.addInFlight(1)
	}
	if len(msgs) == n {
		wm.wakes++ // there may be more
	}
	return msgs, nil
}

func (s *workerSource) Update(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt, vis time.Duration, content *string) (azq.UpdateResult, error) {
	inst := s.inst
	wm := inst.wm
	e := wm.e
	wm.mu.Lock()
	defer wm.mu.Unlock()
	if inst.down {
		return azq.UpdateResult{}, errCrashed
	}
	e.m.tx[OpUpdate]++
	wm.bump()
	res, err := e.q.Update(ctx, id, receipt, vis, content)
	switch {
	case err == nil:
		if h := inst.held[id]; h != nil {
			h.leaseEnd = e.now + int64(vis) // when it becomes visible, renewed or released
		}
	case isNotFound(err):
	default:
		e.opErr("worker Update", err)
	}
	return res, err
}

func (s *workerSource) Delete(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt) error {
	inst := s.inst
	wm := inst.wm
	e := wm.e
	wm.mu.Lock()
	defer wm.mu.Unlock()
	if inst.down {
		return errCrashed
	}
	e.m.tx[OpDelete]++
	wm.bump()
	err := e.q.Delete(ctx, id, receipt)
	switch {
	case err == nil:
		if h := inst.held[id]; h != nil {
			h.deleted = true
		}
	case isNotFound(err):
		e.m.msgs.StaleDeletes++
	default:
		e.opErr("worker Delete", err)
	}
	return err
}

func (s *workerSource) Put(context.Context, string, *azq.PutOptions) (azq.Message, error) {
	return azq.Message{}, errors.New("sim: workers put only to the poison queue")
}

// receivingSource adds Receive, which the worker then waits in instead of
// polling: it returns the instant a message is visible, as azq's does,
// the simulation knowing when that is.
type receivingSource struct{ *workerSource }

func (s *receivingSource) Receive(ctx context.Context, n int, vis time.Duration) ([]azq.Message, error) {
	inst := s.inst
	wm := inst.wm
	for {
		wm.mu.Lock()
		msgs, err := s.getLocked(ctx, n, vis, false)
		if err != nil || len(msgs) > 0 {
			wm.mu.Unlock()
			return msgs, err
		}
		inst.receiving = true
		inst.fetchObs = obsReceiving
		wm.waiters = append(wm.waiters, inst)
		wm.bump()
		wm.mu.Unlock()
		select {
		case <-inst.recv:
		case <-ctx.Done():
			wm.mu.Lock()
			inst.receiving = false
			wm.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// poisonSource is the poison queue as an instance sees it.
type poisonSource struct{ inst *workerInst }

func (s *poisonSource) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	wm := s.inst.wm
	e := wm.e
	wm.mu.Lock()
	defer wm.mu.Unlock()
	if s.inst.down {
		return azq.Message{}, errCrashed
	}
	e.m.tx[OpPut]++
	wm.bump()
	m, err := e.pq.Put(ctx, content, &azq.PutOptions{TimeToLive: azq.NeverExpires})
	if err != nil {
		e.opErr("poison Put", err)
		return m, err
	}
	e.m.poisonPuts++
	return m, nil
}

func (s *poisonSource) Get(context.Context, int, time.Duration) ([]azq.Message, error) {
	return nil, errors.New("sim: nothing reads the poison queue")
}

func (s *poisonSource) Update(context.Context, azq.MessageID, azq.PopReceipt, time.Duration, *string) (azq.UpdateResult, error) {
	return azq.UpdateResult{}, errors.New("sim: nothing updates the poison queue")
}

func (s *poisonSource) Delete(context.Context, azq.MessageID, azq.PopReceipt) error {
	return errors.New("sim: nothing deletes from the poison queue")
}
