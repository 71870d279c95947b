package postgres_test

// Producers and consumers in processes of their own on one queue, some
// killed with SIGKILL, while the server restarts: the back end's promise
// past one process. These tests are about the real clock (several
// processes cannot share a mock one): visibility timeouts are a second,
// and the checks of time compare times of the database's clock, which
// every process reads, so a busy machine slows them without failing
// them.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
)

// The environment of a process the test starts: its role (producer or
// consumer), and what it works on. The test binary, started with roleEnv
// set, runs the role instead of the tests (see TestMain).
const (
	roleEnv       = "AZQ_PGPROC_ROLE"
	roleURLEnv    = "AZQ_PGPROC_URL"
	roleSchemaEnv = "AZQ_PGPROC_SCHEMA"
	roleQueueEnv  = "AZQ_PGPROC_QUEUE"
	roleNameEnv   = "AZQ_PGPROC_NAME"
	roleHoldEnv   = "AZQ_PGPROC_HOLD" // a consumer's time between Receive and Delete
	roleTakeEnv   = "AZQ_PGPROC_TAKE" // a consumer's messages per Receive
)

// procVisibility is the visibility timeout of every Receive.
const procVisibility = time.Second

// runRole runs the role the environment names, until its standard input
// closes (or it is killed), and returns the exit code.
//
// A producer puts "<name>-<n>" for n = 0, 1, …, writing "try C" before
// each Put and "ack C" once it returned: an acknowledged Put. A consumer
// receives and writes "got C D V" for each message (D its dequeue count,
// V its next-visible time in Unix nanoseconds), waits its hold, deletes,
// and writes "del C D" once Delete returned. A failed call writes "fail
// OP CODE STATUS message" (a Delete: "fail delete CODE STATUS C D
// message") and is tried again (a Put with the next content).
// Each line is one write to a pipe, whole or not at all.
func runRole(role string) int {
	stop, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	out := func(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }
	fail := func(op string, err error) {
		var ae *azq.Error
		code, status := "none", 0
		if errors.As(err, &ae) {
			code, status = string(ae.Code), ae.StatusCode
		}
		out("fail %s %s %d %s", op, code, status, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	// Open again while the server is down at start-up.
	var s *postgres.Service
	for {
		var err error
		s, err = postgres.Open(stop, os.Getenv(roleURLEnv), &postgres.Options{Schema: os.Getenv(roleSchemaEnv)})
		if err == nil {
			break
		}
		if stop.Err() != nil {
			return 0
		}
		fail("open", err)
		time.Sleep(20 * time.Millisecond)
	}
	defer s.Close()
	q := s.Named(os.Getenv(roleQueueEnv))
	name := os.Getenv(roleNameEnv)
	switch role {
	case "producer":
		for n := 0; stop.Err() == nil; n++ {
			c := name + "-" + strconv.Itoa(n)
			out("try %s", c)
			if _, err := q.Put(context.Background(), c, nil); err != nil {
				fail("put", err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			out("ack %s", c)
			time.Sleep(2 * time.Millisecond) // a producer, not a flood
		}
	case "consumer":
		hold, _ := time.ParseDuration(os.Getenv(roleHoldEnv))
		take, _ := strconv.Atoi(os.Getenv(roleTakeEnv))
		for stop.Err() == nil {
			ms, err := q.Receive(stop, take, procVisibility)
			if stop.Err() != nil {
				break
			}
			if err != nil {
				fail("receive", err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for _, m := range ms {
				out("got %s %d %d", m.Content, m.DequeueCount, m.NextVisibleTime.UnixNano())
			}
			time.Sleep(hold)
			for _, m := range ms {
				// Not cut short by stop: a Delete that may or may not
				// have been made is what only a kill should leave.
				if err := q.Delete(context.Background(), m.ID, m.PopReceipt); err != nil {
					fail("delete", fmt.Errorf("%s %d %w", m.Content, m.DequeueCount, err))
					continue
				}
				out("del %s %d", m.Content, m.DequeueCount)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "no such role:", role)
		return 2
	}
	return 0
}

// procLine is a line a process wrote, with when the test read it.
type procLine struct {
	proc   string
	fields []string
	at     time.Time
}

// procLog is what every process wrote, in the order the test read it.
type procLog struct {
	mu      sync.Mutex
	lines   []procLine
	changed chan struct{} // closed and replaced at each line
}

func newProcLog() *procLog { return &procLog{changed: make(chan struct{})} }

func (l *procLog) add(proc, text string) {
	l.mu.Lock()
	l.lines = append(l.lines, procLine{proc: proc, fields: strings.Fields(text), at: time.Now()})
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// count counts the lines of kind (the first word) that match.
func (l *procLog) count(kind string, match func(procLine) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ln := range l.lines {
		if len(ln.fields) > 0 && ln.fields[0] == kind && (match == nil || match(ln)) {
			n++
		}
	}
	return n
}

// snapshot returns the lines so far.
func (l *procLog) snapshot() []procLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]procLine(nil), l.lines...)
}

// waitFor waits until cond holds of the log, re-checking at each line; it
// fails t after a minute, which only a hang reaches.
func (l *procLog) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// proc is a producer or consumer process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its output is read to the end and it has exited
}

// procEnv is what the processes of one test share.
type procEnv struct {
	t      *testing.T
	url    string
	schema string
	queue  string
	log    *procLog
}

// start starts a process of role, named name.
func (e *procEnv) start(role, name string, hold time.Duration, take int) *proc {
	e.t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"="+role, roleURLEnv+"="+e.url, roleSchemaEnv+"="+e.schema,
		roleQueueEnv+"="+e.queue, roleNameEnv+"="+name, roleHoldEnv+"="+hold.String(), roleTakeEnv+"="+strconv.Itoa(take))
	// It goes if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			e.log.add(name, sc.Text())
		}
		cmd.Wait()
		close(p.done)
	}()
	e.t.Cleanup(func() { p.kill() })
	return p
}

// kill kills the process with SIGKILL and waits until it is gone and its
// output read.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to stop (its standard input closes) and waits
// until it has.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop", p.name)
	}
	if st := p.cmd.ProcessState; st == nil || !st.Success() {
		t.Errorf("%s exited with %v", p.name, st)
	}
}

// procPlan is one run of the scenario.
type procPlan struct {
	producers, consumers int
	victims              int // consumers that hold what they take until killed
	producerKills        int
	restarts             int  // server restarts mid-load
	crash                bool // the last restart is an immediate shutdown, as a crash
	acksPerPhase         int  // acknowledged Puts between one event and the next
}

// TestProcessesKilledAndServerRestarted is the short scenario: two
// producers and two consumers in processes of their own on one queue; a
// consumer killed with SIGKILL holding messages it took; a producer
// killed; the server restarted mid-load.
func TestProcessesKilledAndServerRestarted(t *testing.T) {
	t.Parallel()
	runProcesses(t, procPlan{producers: 2, consumers: 2, victims: 1, producerKills: 1, restarts: 1, acksPerPhase: 40})
}

// TestProcessesKilledAndServerRestartedLong is the scenario at length:
// more of everything, and a crash of the server (an immediate shutdown,
// recovered from its write-ahead log) besides fast shutdowns. A long run.
func TestProcessesKilledAndServerRestartedLong(t *testing.T) {
	t.Parallel()
	longrun.Skip(t)
	runProcesses(t, procPlan{producers: 3, consumers: 3, victims: 4, producerKills: 4, restarts: 3, crash: true, acksPerPhase: 500})
}

func runProcesses(t *testing.T, plan procPlan) {
	if testing.Short() {
		t.Skip("starts processes and restarts a server")
	}
	// Commits wait for their write-ahead log to reach the kernel, as in
	// production, so that what was acknowledged survives the server's
	// crash; not for the disk (fsync stays off, as in every test), which
	// only a crash of the machine would need. The tests' default, commits
	// that return before their log is written, loses the last of them in
	// an immediate shutdown, as PostgreSQL documents.
	srv := pgtest.Start(t, pgtest.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	s, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: "procs"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.CreateQueue(bg, "work", nil); err != nil {
		t.Fatal(err)
	}
	e := &procEnv{t: t, url: srv.URL(), schema: "procs", queue: "work", log: newProcLog()}
	acks := func() int { return e.log.count("ack", nil) }
	// afterAcks waits until n more Puts have been acknowledged, and as
	// many deleted.
	afterAcks := func(what string, n int) {
		t.Helper()
		a, d := acks(), e.log.count("del", nil)
		e.log.waitFor(t, what, func() bool { return acks() >= a+n && e.log.count("del", nil) >= d+n })
	}

	var producers, consumers []*proc
	for i := 0; i < plan.producers; i++ {
		producers = append(producers, e.start("producer", fmt.Sprintf("p%d", i), 0, 0))
	}
	for i := 0; i < plan.consumers; i++ {
		consumers = append(consumers, e.start("consumer", fmt.Sprintf("c%d", i), 0, 8))
	}
	afterAcks("the first acknowledged and deleted messages", plan.acksPerPhase)

	var killedAt []time.Time // when each victim was killed
	for i := 0; i < plan.victims; i++ {
		name := fmt.Sprintf("v%d", i)
		v := e.start("consumer", name, time.Hour, 4)
		e.log.waitFor(t, name+" to take messages", func() bool {
			return e.log.count("got", func(l procLine) bool { return l.proc == name }) > 0
		})
		v.kill()
		killedAt = append(killedAt, time.Now())
		afterAcks("the work after "+name+" was killed", plan.acksPerPhase)
	}
	for i := 0; i < plan.producerKills; i++ {
		victim := producers[i%len(producers)]
		victim.kill()
		producers[i%len(producers)] = e.start("producer", fmt.Sprintf("p%d", len(producers)+i), 0, 0)
		afterAcks("the work after "+victim.name+" was killed", plan.acksPerPhase)
	}
	var outages [][2]int // the log's length when each outage began and ended
	for i := 0; i < plan.restarts; i++ {
		before := len(e.log.snapshot())
		down := srv.Stop
		if plan.crash && i == plan.restarts-1 {
			down = srv.Kill
		}
		if err := down(); err != nil {
			t.Fatal(err)
		}
		// Down until the processes have met it: a failed call of each
		// producer.
		e.log.waitFor(t, "the processes to meet the outage", func() bool {
			lines := e.log.snapshot()[before:]
			failed := map[string]bool{}
			for _, l := range lines {
				if l.fields[0] == "fail" {
					failed[l.proc] = true
				}
			}
			for _, p := range producers {
				if !failed[p.name] {
					return false
				}
			}
			return true
		})
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		outages = append(outages, [2]int{before, len(e.log.snapshot())})
		afterAcks("the work after the restart", plan.acksPerPhase)
	}

	for _, p := range producers {
		p.stop(t)
	}
	for _, c := range consumers {
		c.stop(t)
	}
	// What the processes left: messages nobody took yet, and those whose
	// lease a killed consumer held, visible again within a second. The
	// drain takes them, waiting for them with Receive.
	drained := map[string]bool{}
	for {
		n, err := s.Named("work").ApproximateCount(bg)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		ms, err := s.Named("work").Receive(ctx, 32, procVisibility)
		cancel()
		if err != nil {
			t.Fatalf("draining %d messages: %v", n, err)
		}
		for _, m := range ms {
			drained[m.Content] = true
			e.log.add("drain", fmt.Sprintf("got %s %d %d", m.Content, m.DequeueCount, m.NextVisibleTime.UnixNano()))
			if err := s.Named("work").Delete(bg, m.ID, m.PopReceipt); err != nil {
				t.Fatalf("draining: %v", err)
			}
		}
	}
	checkProcesses(t, e.log.snapshot(), drained, outages, killedAt)
}

// checkProcesses checks the scenario's promises in what the processes
// wrote.
func checkProcesses(t *testing.T, lines []procLine, drained map[string]bool, outages [][2]int, killedAt []time.Time) {
	t.Helper()
	tried, acked, deleted := map[string]bool{}, map[string]bool{}, map[string]int64{}
	type get struct {
		proc    string
		dequeue int64
		visible int64 // next-visible time, database clock, Unix ns
	}
	gets := map[string][]get{}
	var fails []procLine
	// Deletes that failed with 503, whose statement may have committed
	// before the connection dropped: the message is gone or not.
	maybeDeleted := map[string]bool{}
	for _, l := range lines {
		f := l.fields
		switch f[0] {
		case "try":
			tried[f[1]] = true
		case "ack":
			acked[f[1]] = true
		case "got":
			dq, _ := strconv.ParseInt(f[2], 10, 64)
			vis, _ := strconv.ParseInt(f[3], 10, 64)
			gets[f[1]] = append(gets[f[1]], get{l.proc, dq, vis})
		case "del":
			dq, _ := strconv.ParseInt(f[2], 10, 64)
			deleted[f[1]] = dq
		case "fail":
			fails = append(fails, l)
			if len(f) >= 5 && f[1] == "delete" && f[3] == "503" {
				maybeDeleted[f[4]] = true
			}
		}
	}
	// Every acknowledged Put was received and deleted, or is in the queue.
	lost, ambiguous := 0, 0
	for c := range acked {
		if _, ok := deleted[c]; !ok && !drained[c] && maybeDeleted[c] {
			ambiguous++
		}
		if _, ok := deleted[c]; !ok && !drained[c] && !maybeDeleted[c] {
			if lost++; lost <= 5 {
				var seen []string
				for _, l := range lines {
					for _, f := range l.fields {
						if f == c {
							seen = append(seen, l.proc+": "+strings.Join(l.fields, " "))
							break
						}
					}
				}
				t.Errorf("%s was acknowledged and is lost: neither deleted nor in the queue; its lines:\n%s", c, strings.Join(seen, "\n"))
			}
		}
	}
	// Nothing came that no producer put, and nothing deleted came back.
	for c, gs := range gets {
		if !tried[c] {
			t.Errorf("%s was received and no producer put it", c)
		}
		if dq, ok := deleted[c]; ok {
			for _, g := range gs {
				if g.dequeue > dq {
					t.Errorf("%s was deleted at its dequeue %d and came back to %s (dequeue %d)", c, dq, g.proc, g.dequeue)
				}
			}
			if drained[c] {
				t.Errorf("%s was deleted and is still in the queue", c)
			}
		}
	}
	// Each message a killed consumer held came back, after its visibility
	// timeout, with its dequeue count one more.
	held := 0
	for c, gs := range gets {
		for _, g := range gs {
			if !strings.HasPrefix(g.proc, "v") {
				continue
			}
			held++
			var next *get
			for i := range gs {
				if gs[i].dequeue == g.dequeue+1 {
					next = &gs[i]
				}
			}
			switch {
			case next == nil:
				t.Errorf("%s, held by %s (dequeue %d) when it was killed, never came back", c, g.proc, g.dequeue)
			case next.visible-int64(procVisibility) < g.visible:
				// The next Get's time is its next-visible time less the
				// visibility timeout: database time, as g.visible is.
				t.Errorf("%s came back to %s %v before %s's lease ended", c, next.proc,
					time.Duration(g.visible-(next.visible-int64(procVisibility))), g.proc)
			}
		}
	}
	if held == 0 {
		t.Error("no killed consumer held a message: the check of leases checked nothing")
	}
	// The outages: calls failed with 503 ServerBusy, and nothing else
	// failed, but a Delete whose lease ran out (on a machine so busy that a
	// consumer took more than a second from Receive to Delete), which
	// Azure answers so too.
	if len(outages) > 0 && len(fails) == 0 {
		t.Error("no call failed while the server was down")
	}
	for _, l := range fails {
		f := l.fields
		switch {
		case len(f) >= 4 && f[2] == "ServerBusy" && f[3] == "503":
		case len(f) >= 4 && f[1] == "delete" && f[2] == string(azq.CodeMessageNotFound) && f[3] == "404":
		default:
			t.Errorf("%s failed with %q, want 503 ServerBusy", l.proc, strings.Join(f, " "))
		}
	}
	t.Logf("%d Puts acknowledged (%d tried), %d deleted (and %d gone after a Delete whose answer the outage cut), %d left in the queue, "+
		"%d held by %d killed consumers, %d failed calls in %d outages",
		len(acked), len(tried), len(deleted), ambiguous, len(drained), held, len(killedAt), len(fails), len(outages))
}
