package azq_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/queuetest"
	"github.com/benbjohnson/clock"
)

// The in-memory queue keeps the queue contract, on a mock clock.
func TestQueueContract(t *testing.T) {
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		mock := clock.NewMock()
		q := azq.New(azq.WithClock(mock))
		t.Cleanup(func() { q.Close() })
		return queuetest.Fixture{Queue: q, Clock: mock}
	})
}

// So do the queues of a Service, which share its clock.
func TestServiceQueueContract(t *testing.T) {
	mock := clock.NewMock()
	svc := azq.NewService(azq.WithClock(mock))
	t.Cleanup(func() { svc.Close() })
	n := 0
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		n++
		q, _, err := svc.CreateQueue(context.Background(), fmt.Sprintf("contract-%d", n), nil)
		if err != nil {
			t.Fatal(err)
		}
		return queuetest.Fixture{Queue: q, Clock: mock}
	})
}

// And so do the queues of a durable Service, every change synced to disk
// before it returns.
func TestDurableQueueContract(t *testing.T) {
	mock := clock.NewMock()
	svc, err := azq.Open(t.TempDir(), azq.WithClock(mock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Error(err)
		}
	})
	n := 0
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		n++
		q, _, err := svc.CreateQueue(context.Background(), fmt.Sprintf("durable-%d", n), nil)
		if err != nil {
			t.Fatal(err)
		}
		return queuetest.Fixture{Queue: q, Clock: mock}
	})
}

// So does a queue of a Service addressed by its name.
func TestNamedQueueContract(t *testing.T) {
	mock := clock.NewMock()
	svc := azq.NewService(azq.WithClock(mock))
	t.Cleanup(func() { svc.Close() })
	n := 0
	queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
		n++
		name := fmt.Sprintf("named-%d", n)
		if _, _, err := svc.CreateQueue(context.Background(), name, nil); err != nil {
			t.Fatal(err)
		}
		return queuetest.Fixture{Queue: svc.Named(name), Clock: mock}
	})
}

// A Service keeps the service contract, in memory on a mock clock.
func TestServiceContract(t *testing.T) {
	queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
		svc := azq.NewService(azq.WithClock(clock.NewMock()))
		t.Cleanup(func() { svc.Close() })
		return svc
	})
}

// So does a durable Service, every change synced to disk before it
// returns.
func TestDurableServiceContract(t *testing.T) {
	queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
		svc, err := azq.Open(t.TempDir(), azq.WithClock(clock.NewMock()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := svc.Close(); err != nil {
				t.Error(err)
			}
		})
		return svc
	})
}
