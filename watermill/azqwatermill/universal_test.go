package azqwatermill

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"go.uber.org/goleak"
)

// Goroutines that are net/http's, not this package's: a client's idle
// keep-alive connections to azq's test server, and the server's side of
// them.
var httpGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
}

// TestMain fails the run if any goroutine is left when every test and
// benchmark has ended.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, httpGoroutines...)
}

// backends are the three back ends: an in-memory Service, a durable one in
// a temporary directory, and package azure talking to azq's REST server
// over loopback.
var backends = map[string]func(t testing.TB) Account{
	"memory": func(t testing.TB) Account {
		svc := azq.NewService()
		t.Cleanup(func() { svc.Close() })
		return ServiceAccount(svc)
	},
	"durable": func(t testing.TB) Account {
		svc, err := azq.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		return ServiceAccount(svc)
	},
	"azure": func(t testing.TB) Account {
		srv := azqtest.NewServer(t)
		svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ServiceAccount(svc)
	},
}

// features are what is true of an Azure queue: messages outlive the
// publisher and subscriber that handled them (the Service or the storage
// account holds them), delivery is at least once, in no guaranteed order,
// and there are no consumer groups.
var features = tests.Features{
	ConsumerGroups:      false,
	ExactlyOnceDelivery: false,
	GuaranteedOrder:     false,
	Persistent:          true,
}

// TestUniversal runs Watermill's universal Pub/Sub suite on each back end.
func TestUniversal(t *testing.T) {
	for name, newAccount := range backends {
		t.Run(name, func(t *testing.T) {
			account := newAccount(t)
			tests.TestPubSub(t, features, func(t *testing.T) (message.Publisher, message.Subscriber) {
				pub, err := NewPublisher(account, PublisherConfig{}, testLogger)
				if err != nil {
					t.Fatal(err)
				}
				sub, err := NewSubscriber(account, SubscriberConfig{}, testLogger)
				if err != nil {
					t.Fatal(err)
				}
				return pub, sub
			}, nil)
		})
	}
}

var testLogger = watermill.NewStdLogger(false, false)
