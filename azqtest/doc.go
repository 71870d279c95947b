// Package azqtest is for testing code that uses azq's queue contract and
// for testing back ends of it.
//
// RunQueueTests checks that a back end keeps the semantics of Azure Queue
// Storage that a client can observe (pop receipts, visibility, dequeue
// counts, time-to-live, Peek, Clear, limits and their error codes). This
// repository runs it against the in-memory azq.Queue, against
// package azure talking to azq's REST server, and, when
// AZQ_TEST_AZURE_CONNECTION_STRING names a storage account, against Azure
// itself; a new back end runs it the same way:
//
//	func TestContract(t *testing.T) {
//		azqtest.RunQueueTests(t, func(t *testing.T) azqtest.Fixture {
//			mock := clock.NewMock()
//			return azqtest.Fixture{Queue: azq.New(azq.WithClock(mock)), Clock: mock}
//		})
//	}
//
// RunServiceTests checks the service contract, azq.QueueService, the same
// way: creation (created, not created, QueueAlreadyExists), deletion, a
// QueueRef following its queue through both, listing by prefix in pages,
// metadata and stored access policies with their limits, and the queue
// contract on a QueueRef. It runs against the in-memory and durable
// *azq.Service and package azure's Service over azq's REST server (and
// Azure itself, as above); a back end of its own, such as one on
// PostgreSQL, runs it with a function that makes a service per subtest:
//
//	func TestServiceContract(t *testing.T) {
//		azqtest.RunServiceTests(t, func(t *testing.T) azq.QueueService {
//			svc := azq.NewService(azq.WithClock(clock.NewMock()))
//			t.Cleanup(func() { svc.Close() })
//			return svc
//		})
//	}
//
// NewServer starts azq's REST server for one test, the in-process answer
// to starting an emulator in a container: code that takes a connection
// string (an Azure SDK client, an azure.Queue) talks to it, and the test
// sees the same queues through the account's *azq.Service and moves their
// time with a mock clock:
//
//	srv := azqtest.NewServer(t)
//	q, err := azure.NewQueueFromConnectionString(srv.ConnectionString, "jobs",
//		&azure.Options{Clock: srv.Clock})
//
// The server can have Azure's bad days on demand: Server.Faults takes
// fault rules (package faults) and a throttle, and Server.Metrics counts
// what it answered. FaultyQueue applies the same rules to any
// azq.MessageQueue in process, with the errors package azure would return,
// so that a consumer's retry and duplicate handling can be tested on the
// in-memory back end under a mock clock:
//
//	fq := azqtest.NewFaultyQueue(q, injector, azqtest.FaultyOptions{})
//	w := worker.New(fq, handle, worker.Options{Clock: mock, Poison: ...})
package azqtest
