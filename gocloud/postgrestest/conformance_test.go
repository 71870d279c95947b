package postgrestest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/gocloud/internal/conformance"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// gocloud's conformance suite on PostgreSQL: each harness on a schema of
// its own, with the database's clock, as in production, the subscriptions
// waiting in Receive.
func TestConformance(t *testing.T) {
	kind := conformance.Kind{Name: "postgres", QueueCheck: postgresQueue}
	conformance.Run(t, kind, func(t testing.TB) *conformance.Backend {
		srv := pgtest.Shared(t)
		svc, err := postgres.Open(context.Background(), srv.URL(), &postgres.Options{Schema: srv.NewSchema(t)})
		if err != nil {
			t.Fatal(err)
		}
		return conformance.ServiceBackend(svc)
	})
}

// postgresQueue checks that the queue a subscription exposes is the back
// end's *postgres.Queue, and not an *azq.Queue.
func postgresQueue(as func(any) bool) error {
	var q azq.MessageQueue
	if !as(&q) {
		return errors.New("Subscription.As(*azq.MessageQueue) failed")
	}
	if _, ok := q.(*postgres.Queue); !ok {
		return fmt.Errorf("Subscription.As(*azq.MessageQueue) gave a %T, want a *postgres.Queue", q)
	}
	var mq *azq.Queue
	if as(&mq) {
		return errors.New("Subscription.As(**azq.Queue) succeeded on a PostgreSQL queue")
	}
	return nil
}
