package postgres_test

// Producers and consumers in processes of their own on one queue, some
// killed with SIGKILL, while the server restarts: the back end's promise
// past one process. These tests are about the real clock (several
// processes cannot share a mock one): visibility timeouts are a second,
// and the checks of time compare times of the database's clock, which
// every process reads, so a busy machine slows them without failing
// them.

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/internal/proctest"
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
// closes (or it is killed), and returns the exit code: a producer
// (proctest.Produce) or a consumer (proctest.Consume, with Receive).
func runRole(role string) int {
	stop := proctest.StopOnStdin()
	out := proctest.Output{W: os.Stdout}
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
		out.Fail("open", err)
		time.Sleep(20 * time.Millisecond)
	}
	defer s.Close()
	q := s.Named(os.Getenv(roleQueueEnv))
	switch role {
	case "producer":
		proctest.Produce(stop, q, os.Getenv(roleNameEnv), out)
	case "consumer":
		hold, _ := time.ParseDuration(os.Getenv(roleHoldEnv))
		take, _ := strconv.Atoi(os.Getenv(roleTakeEnv))
		proctest.Consume(stop, q, proctest.Consumer{Receive: q.Receive, Take: take, Visibility: procVisibility, Hold: hold}, out)
	default:
		fmt.Fprintln(os.Stderr, "no such role:", role)
		return 2
	}
	return 0
}

// procEnv is what the processes of one test share.
type procEnv struct {
	t      *testing.T
	url    string
	schema string
	queue  string
	log    *proctest.Log
}

// start starts a process of role, named name.
func (e *procEnv) start(role, name string, hold time.Duration, take int) *proctest.Proc {
	e.t.Helper()
	return proctest.Start(e.t, e.log, name, roleEnv+"="+role, roleURLEnv+"="+e.url, roleSchemaEnv+"="+e.schema,
		roleQueueEnv+"="+e.queue, roleNameEnv+"="+name, roleHoldEnv+"="+hold.String(), roleTakeEnv+"="+strconv.Itoa(take))
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
	e := &procEnv{t: t, url: srv.URL(), schema: "procs", queue: "work", log: proctest.NewLog()}
	acks := func() int { return e.log.Count("ack", nil) }
	// afterAcks waits until n more Puts have been acknowledged, and as
	// many deleted.
	afterAcks := func(what string, n int) {
		t.Helper()
		a, d := acks(), e.log.Count("del", nil)
		e.log.WaitFor(t, what, func() bool { return acks() >= a+n && e.log.Count("del", nil) >= d+n })
	}

	var producers, consumers []*proctest.Proc
	for i := 0; i < plan.producers; i++ {
		producers = append(producers, e.start("producer", fmt.Sprintf("p%d", i), 0, 0))
	}
	for i := 0; i < plan.consumers; i++ {
		consumers = append(consumers, e.start("consumer", fmt.Sprintf("c%d", i), 0, 8))
	}
	afterAcks("the first acknowledged and deleted messages", plan.acksPerPhase)

	for i := 0; i < plan.victims; i++ {
		name := fmt.Sprintf("v%d", i)
		v := e.start("consumer", name, time.Hour, 4)
		e.log.WaitFor(t, name+" to take messages", func() bool {
			return e.log.Count("got", func(l proctest.Line) bool { return l.Proc == name }) > 0
		})
		v.Kill()
		afterAcks("the work after "+name+" was killed", plan.acksPerPhase)
	}
	for i := 0; i < plan.producerKills; i++ {
		victim := producers[i%len(producers)]
		victim.Kill()
		producers[i%len(producers)] = e.start("producer", fmt.Sprintf("p%d", len(producers)+i), 0, 0)
		afterAcks("the work after "+victim.Name+" was killed", plan.acksPerPhase)
	}
	outages := 0
	for i := 0; i < plan.restarts; i++ {
		before := e.log.Len()
		down := srv.Stop
		if plan.crash && i == plan.restarts-1 {
			down = srv.Kill
		}
		if err := down(); err != nil {
			t.Fatal(err)
		}
		// Down until the processes have met it: a failed call of each
		// producer.
		var names []string
		for _, p := range producers {
			names = append(names, p.Name)
		}
		e.log.WaitFor(t, "the processes to meet the outage", func() bool { return e.log.FailedSince(before, names...) })
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		outages++
		afterAcks("the work after the restart", plan.acksPerPhase)
	}

	for _, p := range producers {
		p.Stop(t)
	}
	for _, c := range consumers {
		c.Stop(t)
	}
	// What the processes left: messages nobody took yet, and those whose
	// lease a killed consumer held, visible again within a second.
	drained := proctest.Drain(t, s.Named("work"), procVisibility, e.log)
	proctest.Check(t, e.log.Snapshot(), drained, proctest.Expect{Visibility: procVisibility, Outages: outages, Victims: plan.victims})
}
