package azqpubsub

import (
	"context"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
)

// backend is one back end of the queue contract as the harness uses it.
type backend struct {
	// create makes a new queue.
	create func(ctx context.Context, name string) (azq.MessageQueue, error)
	// remove deletes a queue create made.
	remove func(ctx context.Context, name string) error
	// missing returns a handle to a queue that does not exist.
	missing func() azq.MessageQueue
	// close releases the back end.
	close func()
}

// The three back ends: an in-memory Service, a durable one in a temporary
// directory, and package azure talking to azq's REST server over loopback.
var backends = map[string]func(t testing.TB) *backend{
	"memory": func(t testing.TB) *backend {
		return serviceBackend(azq.NewService())
	},
	"durable": func(t testing.TB) *backend {
		svc, err := azq.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return serviceBackend(svc)
	},
	"azure": func(t testing.TB) *backend {
		srv := azqtest.NewServer(t)
		svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &backend{
			create: func(ctx context.Context, name string) (azq.MessageQueue, error) {
				q, _, err := svc.CreateQueue(ctx, name, nil)
				return q, err
			},
			remove: func(ctx context.Context, name string) error { return svc.DeleteQueue(ctx, name) },
			missing: func() azq.MessageQueue {
				q, err := svc.Queue("missing")
				if err != nil {
					t.Fatal(err)
				}
				return q
			},
			close: srv.Close,
		}
	},
}

func serviceBackend(svc *azq.Service) *backend {
	return &backend{
		create: func(ctx context.Context, name string) (azq.MessageQueue, error) {
			q, _, err := svc.CreateQueue(ctx, name, nil)
			return q, err
		},
		remove:  func(ctx context.Context, name string) error { return svc.DeleteQueue(ctx, name) },
		missing: func() azq.MessageQueue { return svc.Named("missing") },
		close:   func() { svc.Close() },
	}
}
