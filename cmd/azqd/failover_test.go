package main

// A failover of the database under load: a primary and a synchronous
// standby, two azqd on a connection string that names both, producers
// and consumers in processes of their own through azqd's REST API and
// through the library; the primary killed with SIGKILL mid-load and the
// standby promoted. A test of the real clock, as the processes cannot
// share a mock one: visibility timeouts are a second, and the checks of
// time compare the database's times.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/internal/proctest"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/azqlib/azq/server"
)

// The environment of a process of the failover test: the test binary,
// started with failoverRoleEnv set, runs the role instead of the tests
// (see TestMain).
const (
	failoverRoleEnv   = "AZQD_FAILOVER_ROLE"   // lib-producer, lib-consumer, rest-producer, rest-consumer
	failoverTargetEnv = "AZQD_FAILOVER_TARGET" // the database's connection string, or azqd's
	failoverNameEnv   = "AZQD_FAILOVER_NAME"
	failoverHoldEnv   = "AZQD_FAILOVER_HOLD" // a consumer's time between Receive and Delete
	failoverTakeEnv   = "AZQD_FAILOVER_TAKE" // a consumer's messages per Receive
)

// failoverQueue is the queue of the test, in the schema failoverSchema,
// which the library opens and azqd serves as the development account's.
const (
	failoverQueue  = "work"
	failoverSchema = "azq"
)

// failoverVisibility is the visibility timeout of every Receive.
const failoverVisibility = time.Second

// failoverOutage is the least time from the primary's kill to the
// standby's promotion: longer than a visibility timeout, so that leases
// taken before the kill run out during the outage, and, as in
// production, where a failover takes seconds, callers keep meeting it
// for a while.
const failoverOutage = 1500 * time.Millisecond

// runFailoverRole runs the role the environment names until its
// standard input closes (or it is killed), and returns the exit code.
func runFailoverRole(role string) int {
	stop := proctest.StopOnStdin()
	out := proctest.Output{W: os.Stdout}
	target, name := os.Getenv(failoverTargetEnv), os.Getenv(failoverNameEnv)
	hold, _ := time.ParseDuration(os.Getenv(failoverHoldEnv))
	take, _ := strconv.Atoi(os.Getenv(failoverTakeEnv))
	var q azq.MessageQueue
	var receive func(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error)
	switch role {
	case "lib-producer", "lib-consumer":
		s, err := postgres.Open(stop, target, &postgres.Options{Schema: failoverSchema})
		if err != nil {
			fmt.Fprintln(os.Stderr, "opening the database:", err)
			return 1
		}
		defer s.Close()
		lib := libQueue{s.Named(failoverQueue)}
		q, receive = lib, lib.Receive
	case "rest-producer", "rest-consumer":
		// No retries of the SDK's: every failed try shows.
		opts := &azure.Options{ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
			Retry: policy.RetryOptions{MaxRetries: -1},
		}}}
		rq, err := azure.NewQueueFromConnectionString(target, failoverQueue, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "the REST client:", err)
			return 1
		}
		q, receive = rq, rq.Get // polls
	default:
		fmt.Fprintln(os.Stderr, "no such role:", role)
		return 2
	}
	if strings.HasSuffix(role, "-producer") {
		proctest.Produce(stop, q, name, out)
	} else {
		proctest.Consume(stop, q, proctest.Consumer{Receive: receive, Take: take, Visibility: failoverVisibility, Hold: hold}, out)
	}
	return 0
}

// libQueue is the library's queue, whose every 503 must be the back
// end's own error for an unavailable database, *postgres.DatabaseError
// with Unavailable true, as a caller tells it to retry: any other 503
// loses its code, so that the check of failures reports it.
type libQueue struct {
	*postgres.Queue
}

func (q libQueue) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	m, err := q.Queue.Put(ctx, content, opts)
	return m, unavailableOnly(err)
}

func (q libQueue) Receive(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error) {
	ms, err := q.Queue.Receive(ctx, n, visibility)
	return ms, unavailableOnly(err)
}

func (q libQueue) Delete(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt) error {
	return unavailableOnly(q.Queue.Delete(ctx, id, receipt))
}

func unavailableOnly(err error) error {
	var ae *azq.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable {
		return err
	}
	var de *postgres.DatabaseError
	if errors.As(err, &de) && de.Unavailable() {
		return err
	}
	return fmt.Errorf("a 503 that is not the back end's unavailable database: %s", err)
}

// failoverProc is a process of the test: its role, and where it works.
type failoverProc struct {
	role, name, target string
	hold               time.Duration
	take               int
}

// failoverPlan is one run of the failover scenario.
type failoverPlan struct {
	victims      int // consumers killed holding what they took, before the failover
	acksPerPhase int // acknowledged and deleted Puts before the victims, and after the failover
}

// TestFailover: two azqd and the library on a primary with a
// synchronous standby, through a connection string that names both
// with target_session_attrs=read-write, under load from processes of
// their own (producers and consumers through each azqd's REST API and
// through the library); a consumer killed holding messages it took;
// then the primary killed with SIGKILL and the standby promoted. Calls
// fail with 503 ServerBusy (over REST, and as the back end's unavailable
// error in the library) until the promotion, then every process
// succeeds again on the new primary by itself; every acknowledged Put is
// there, nothing deleted comes back, and no message has two live
// leases.
func TestFailover(t *testing.T) {
	runFailover(t, failoverPlan{victims: 1, acksPerPhase: 60})
}

// TestFailoverLong is the scenario at length: more load before and
// after the failover, and more consumers killed holding messages whose
// leases run out across it. A long run.
func TestFailoverLong(t *testing.T) {
	longrun.Skip(t)
	runFailover(t, failoverPlan{victims: 3, acksPerPhase: 600})
}

func runFailover(t *testing.T, plan failoverPlan) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers and kills one")
	}
	primary, standby := pgtest.StartReplicated(t, pgtest.ReplicatedOptions{Synchronous: true})
	dbURL := fmt.Sprintf("host=%s,%s port=%d,%d user=postgres dbname=postgres sslmode=disable target_session_attrs=read-write",
		primary.Host(), standby.Host(), primary.Port(), standby.Port())
	bg := context.Background()
	lib, err := postgres.Open(bg, dbURL, &postgres.Options{Schema: failoverSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if _, _, err := lib.CreateQueue(bg, failoverQueue, nil); err != nil {
		t.Fatal(err)
	}
	azqdArgs := []string{"-postgres", dbURL, "-postgres-schema", failoverSchema}
	daemons := startProcesses(t, azqdArgs, azqdArgs)
	acct := server.DevelopmentAccount()
	conn := func(i int) string { return acct.ConnectionString(daemons[i].base + "/" + acct.Name) }

	log := proctest.NewLog()
	start := func(p failoverProc) *proctest.Proc {
		return proctest.Start(t, log, p.name, failoverRoleEnv+"="+p.role, failoverTargetEnv+"="+p.target,
			failoverNameEnv+"="+p.name, failoverHoldEnv+"="+p.hold.String(), failoverTakeEnv+"="+strconv.Itoa(p.take))
	}
	var producers, consumers []*proctest.Proc
	for _, p := range []failoverProc{
		{role: "lib-producer", name: "lp0", target: dbURL},
		{role: "rest-producer", name: "rp0", target: conn(0)},
		{role: "rest-producer", name: "rp1", target: conn(1)},
	} {
		producers = append(producers, start(p))
	}
	for _, p := range []failoverProc{
		{role: "lib-consumer", name: "lc0", target: dbURL, take: 8},
		{role: "rest-consumer", name: "rc0", target: conn(1), take: 8},
		{role: "rest-consumer", name: "rc1", target: conn(0), take: 8},
	} {
		consumers = append(consumers, start(p))
	}
	// afterAcks waits until n more Puts have been acknowledged, and as
	// many deleted.
	afterAcks := func(what string, n int) {
		t.Helper()
		a, d := log.Count("ack", nil), log.Count("del", nil)
		log.WaitFor(t, what, func() bool { return log.Count("ack", nil) >= a+n && log.Count("del", nil) >= d+n })
	}
	afterAcks("the first acknowledged and deleted messages", plan.acksPerPhase)

	// Consumers that hold what they took when they are killed: their
	// messages come back after their leases, which run out across the
	// failover.
	for i := 0; i < plan.victims; i++ {
		name := fmt.Sprintf("v%d", i)
		victim := start(failoverProc{role: "lib-consumer", name: name, target: dbURL, hold: time.Hour, take: 4})
		log.WaitFor(t, name+" to take messages", func() bool {
			return log.Count("got", func(l proctest.Line) bool { return l.Proc == name }) > 0
		})
		victim.Kill()
	}

	// The failover: down until every process that polls met it with a
	// failed call, and for failoverOutage at least. (The library's
	// consumer waits in Receive, which need not return while it cannot
	// look.)
	before, crashed := log.Len(), time.Now()
	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range append(append([]*proctest.Proc(nil), producers...), consumers...) {
		if p.Name != "lc0" {
			names = append(names, p.Name)
		}
	}
	log.WaitFor(t, "the processes to meet the outage", func() bool { return log.FailedSince(before, names...) })
	met := time.Now()
	// No server takes writes: azqd says it is unhealthy.
	for i, d := range daemons {
		var h healthReply
		adminCall(t, "GET", d.base+"/_azq/health", http.StatusServiceUnavailable, &h)
		if h.Status != "unavailable" {
			t.Errorf("health of azqd %d in the outage: %+v", i, h)
		}
	}
	time.Sleep(failoverOutage - time.Since(crashed))
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted, promotedAt := log.Len(), time.Now()

	// Every process works again on the new primary, by itself.
	since := func(proc, kind string) bool {
		for _, l := range log.Snapshot()[promoted:] {
			if l.Proc == proc && l.Fields[0] == kind {
				return true
			}
		}
		return false
	}
	log.WaitFor(t, "every process to succeed on the new primary", func() bool {
		for _, p := range producers {
			if !since(p.Name, "ack") {
				return false
			}
		}
		for _, c := range consumers {
			if !since(c.Name, "del") {
				return false
			}
		}
		return true
	})
	recovered := time.Now()
	afterAcks("the work after the failover", plan.acksPerPhase)

	for _, p := range producers {
		p.Stop(t)
	}
	for _, c := range consumers {
		c.Stop(t)
	}
	drained := proctest.Drain(t, lib.Named(failoverQueue), failoverVisibility, log)
	lines := log.Snapshot()
	proctest.Check(t, lines, drained, proctest.Expect{
		Visibility: failoverVisibility, Outages: 1, Victims: plan.victims,
		Resolution: func(proc string) time.Duration {
			if strings.HasPrefix(proc, "r") { // REST: whole seconds
				return time.Second
			}
			return 0
		},
	})
	libFails, restFails := 0, 0
	for _, l := range lines[before:] {
		if l.Fields[0] == "fail" && strings.HasPrefix(l.Proc, "l") {
			libFails++
		} else if l.Fields[0] == "fail" && strings.HasPrefix(l.Proc, "r") {
			restFails++
		}
	}
	t.Logf("the primary killed: the polling processes failed within %v, the standby promoted %v after the kill, every process working again %v after the promotion; "+
		"failed calls from the kill on: %d of the library's processes, %d over REST",
		met.Sub(crashed).Round(time.Millisecond), promotedAt.Sub(crashed).Round(time.Millisecond), recovered.Sub(promotedAt).Round(time.Millisecond), libFails, restFails)
	// Healthy again: a connection of the pool that the crash killed and
	// no request used since may still meet the first ping.
	for i, d := range daemons {
		for try := 0; ; try++ {
			status, body := send(t, "GET", d.base+"/_azq/health", "", nil, nil)
			if status == http.StatusOK {
				break
			}
			if try == 3 {
				t.Errorf("health of azqd %d after the failover: %d %s", i, status, body)
				break
			}
		}
	}
	stopProcesses(t, daemons...)
}
