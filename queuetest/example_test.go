package queuetest_test

import (
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/queuetest"
	"github.com/benbjohnson/clock"
)

// The back end under test keeps the contracts: the compiler checks the
// types, the suites the behaviour. Here it is azq's in-memory one.
var (
	_ azq.MessageQueue = (*azq.Queue)(nil)
	_ azq.QueueRef     = azq.NamedQueue{}
	_ azq.QueueService = (*azq.Service)(nil)
)

// newMemoryQueue makes one empty queue of the back end, on a mock clock
// the suite moves, and closes it when the subtest ends.
func newMemoryQueue(t *testing.T) queuetest.Fixture {
	mock := clock.NewMock()
	q := azq.New(azq.WithClock(mock))
	t.Cleanup(func() { q.Close() })
	return queuetest.Fixture{Queue: q, Clock: mock}
}

// newMemoryService makes one empty service of the back end.
func newMemoryService(t *testing.T) azq.QueueService {
	svc := azq.NewService(azq.WithClock(clock.NewMock()))
	t.Cleanup(func() { svc.Close() })
	return svc
}

// newMemoryWorkerFixture makes one empty service of the back end and
// hands the worker's suite its mock clock.
func newMemoryWorkerFixture(t *testing.T) queuetest.WorkerFixture {
	mock := clock.NewMock()
	svc := azq.NewService(azq.WithClock(mock))
	t.Cleanup(func() { svc.Close() })
	return queuetest.WorkerFixture{Service: svc, Clock: mock}
}

// A back end's tests run each suite with a function that makes a fresh
// back end per subtest; this package's own tests run these on the
// in-memory back end (TestQueueContractOnMemory, TestWorkerOnMemory,
// and the unbroken service of TestServiceSuiteCatchesBrokenBackEnds). In
// the back end's _test.go file:
//
//	func TestQueueContract(t *testing.T)   { queuetest.RunQueueTests(t, newMemoryQueue) }
//	func TestServiceContract(t *testing.T) { queuetest.RunServiceTests(t, newMemoryService) }
//	func TestWorkerContract(t *testing.T) {
//		queuetest.RunWorkerTests(t, newMemoryWorkerFixture, queuetest.WorkerOptions{})
//	}
//
// The suites need the test's *testing.T, which an Example does not get,
// so this one is compiled, not run.
func Example() {
	suites := map[string]func(t *testing.T){
		"TestQueueContract":   func(t *testing.T) { queuetest.RunQueueTests(t, newMemoryQueue) },
		"TestServiceContract": func(t *testing.T) { queuetest.RunServiceTests(t, newMemoryService) },
		"TestWorkerContract": func(t *testing.T) {
			queuetest.RunWorkerTests(t, newMemoryWorkerFixture, queuetest.WorkerOptions{})
		},
	}
	_ = suites
}
