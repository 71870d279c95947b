// Package queuetest checks a back end of azq's contracts: the suites that
// every back end in this repository passes, for the author of another one
// to run in the back end's own tests, as testing/fstest checks a file
// system. It links only azq, package worker and the mock clock: no Azure
// SDK, no REST server, no metrics stack.
//
// RunQueueTests checks the queue contract, azq.MessageQueue: that a back
// end keeps the semantics of Azure Queue Storage that a client can observe
// (pop receipts, visibility, dequeue counts, time-to-live, Peek, Clear,
// limits and their error codes), and that its batches (azq.PutBatch,
// azq.DeleteBatch) answer per item what its single calls answer. This repository runs it against the
// in-memory azq.Queue, against package azure talking to azq's REST server,
// against the PostgreSQL back end, and, when
// AZQ_TEST_AZURE_CONNECTION_STRING names a storage account, against Azure
// itself. A new back end runs it the same way, with a function that makes
// one empty queue per subtest:
//
//	func TestQueueContract(t *testing.T) {
//		queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
//			mock := clock.NewMock()
//			q := azq.New(azq.WithClock(mock))
//			t.Cleanup(func() { q.Close() })
//			return queuetest.Fixture{Queue: q, Clock: mock}
//		})
//	}
//
// RunServiceTests checks the service contract, azq.QueueService, the same
// way: creation (created, not created, QueueAlreadyExists), deletion, a
// QueueRef following its queue through both, listing by prefix in pages,
// metadata and stored access policies with their limits, and the queue
// contract on a QueueRef. It takes a function that makes a service per
// subtest:
//
//	func TestServiceContract(t *testing.T) {
//		queuetest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
//			svc := azq.NewService(azq.WithClock(clock.NewMock()))
//			t.Cleanup(func() { svc.Close() })
//			return svc
//		})
//	}
//
// RunWorkerTests checks that package worker keeps its promises on the back
// end, through the service contract alone: delivery, lease renewal, a
// crashed worker's message back after its lease, poison queues, shutdown,
// and a property over random runs with crashes. It needs a back end on a
// mock clock whose queues wait in Receive.
//
// A back end on a mock clock (Fixture.Clock, or a service whose queues
// report a *clock.Mock) is checked exactly: the suites move the clock. One
// on real time, as a real service is, is checked with sleeps, and times
// only against one another.
package queuetest
