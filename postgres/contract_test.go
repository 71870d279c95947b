package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/azqlib/azq/queuetest"
	"github.com/benbjohnson/clock"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		// A producer or consumer process of processes_test.go.
		os.Exit(runRole(role))
	}
	os.Exit(pgtest.Main(m))
}

// open returns a Service on the test server, with the given options (on
// a schema of t's own unless they name one), closed when t ends.
func open(t testing.TB, opts postgres.Options) *postgres.Service {
	t.Helper()
	srv := pgtest.Shared(t)
	if opts.Schema == "" {
		opts.Schema = srv.NewSchema(t)
	}
	s, err := postgres.Open(context.Background(), srv.URL(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openMock is open with a mock clock.
func openMock(t testing.TB) (*postgres.Service, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(mock.Now().Add(1e9 * 3600 * 24 * 365 * 56)) // a time of our century, not 1970
	return open(t, postgres.Options{Clock: mock}), mock
}

// newQueue creates a queue with a fresh name in s.
func newQueue(t testing.TB, s *postgres.Service) *postgres.Queue {
	t.Helper()
	q, _, err := s.CreateQueue(context.Background(), fmt.Sprintf("queue-%d", queueNumber.Add(1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

var queueNumber atomic.Int64

// The queue contract on PostgreSQL, with a mock clock: every subtest,
// nothing skipped, times checked exactly.
func TestContract(t *testing.T) {
	t.Parallel()
	s, mock := openMock(t)
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		return queuetest.Fixture{Queue: newQueue(t, s), Clock: mock}
	})
}

// The service contract on PostgreSQL, with a mock clock: every subtest of
// queuetest's service suite, each on a schema of its own.
func TestServiceContract(t *testing.T) {
	t.Parallel()
	queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
		s, _ := openMock(t)
		return s
	})
}

// The queue contract on the database's clock, as in production: the suite
// sleeps where it would move a mock clock. A long run.
func TestContractDatabaseClock(t *testing.T) {
	t.Parallel()
	longrun.Skip(t)
	s := open(t, postgres.Options{})
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		return queuetest.Fixture{Queue: newQueue(t, s)}
	})
}
