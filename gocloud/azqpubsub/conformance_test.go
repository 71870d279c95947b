package azqpubsub_test

import (
	"errors"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/gocloud/internal/conformance"
)

// gocloud's conformance suite on the three back ends: an in-memory
// Service, a durable one in a temporary directory, and package azure
// talking to azq's REST server over loopback. (gocloud/postgrestest runs
// it on PostgreSQL.)
func TestConformance(t *testing.T) {
	// A Service's queues are exposed as **azq.Queue too.
	azqQueue := func(as func(any) bool) error {
		var mq *azq.Queue
		if !as(&mq) || mq == nil {
			return errors.New("Subscription.As(**azq.Queue) failed")
		}
		return nil
	}
	t.Run("memory", func(t *testing.T) {
		conformance.Run(t, conformance.Kind{Name: "memory", QueueCheck: azqQueue}, func(t testing.TB) *conformance.Backend {
			return conformance.ServiceBackend(azq.NewService())
		})
	})
	t.Run("durable", func(t *testing.T) {
		conformance.Run(t, conformance.Kind{Name: "durable", QueueCheck: azqQueue}, func(t testing.TB) *conformance.Backend {
			svc, err := azq.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return conformance.ServiceBackend(svc)
		})
	})
	t.Run("azure", func(t *testing.T) {
		azureQueue := func(as func(any) bool) error {
			var aq *azure.Queue
			if !as(&aq) || aq == nil {
				return errors.New("Subscription.As(**azure.Queue) failed")
			}
			return nil
		}
		conformance.Run(t, conformance.Kind{Name: "azure", Remote: true, QueueCheck: azureQueue}, func(t testing.TB) *conformance.Backend {
			srv := azqtest.NewServer(t)
			svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, nil)
			if err != nil {
				t.Fatal(err)
			}
			b := conformance.ServiceBackend(svc)
			b.Close = srv.Close
			return b
		})
	})
}
