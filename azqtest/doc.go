// Package azqtest is for testing code that uses Azure Queue Storage,
// through the Azure SDK for Go, package azure or azq's queue contract, and
// for testing back ends of that contract.
//
// # A server for each test
//
// NewInProcessServer gives a test azq's REST server, Azure's behaviour
// rather than a mock's guess, with no listener and no port: the official
// SDK reaches it through the server's Transport, which hands each request
// to the handler in process. Everything else is the SDK's own: signing,
// retries, error types.
//
//	srv := azqtest.NewInProcessServer(t)
//	client, err := srv.NewServiceClient(nil) // an *azqueue.ServiceClient
//
// A client built otherwise takes the server's ConnectionString and its
// Transport as azcore.ClientOptions.Transport (package azure's Options
// take it in ClientOptions; Server.NewAzureService builds one). The test
// seeds and inspects the same queues through srv.Service, without a
// request, and moves their time with srv.Clock, a mock clock. Each server
// has its own account, clock and queues and costs about 15 µs and 4 KiB
// to make and close, so every subtest of a parallel test can have one
// (docs/testing.md shows the pattern).
//
// NewServer is the same server listening on a loopback port too, for
// clients that take only a URL or a connection string: another process,
// or an SDK whose transport cannot be set.
//
// # Bad days
//
// Server.Faults takes fault rules (package faults) and a throttle, and
// Server.SetObserve hears of what the server answered (a
// metrics.Recorder's Observe counts it; this package links no metrics
// stack of its own). Over the in-process
// transport the faults reach the client as over TCP: a closed connection
// is io.EOF, a reset one a *net.OpError of syscall.ECONNRESET, an answer
// cut short io.ErrUnexpectedEOF from its body, so the SDK's retry policy
// sees what it would see of Azure. FaultyQueue applies the same rules to
// any azq.MessageQueue in process, with the errors package azure would
// return, so that a consumer's retry and duplicate handling can be tested
// on the in-memory back end under a mock clock:
//
//	fq := azqtest.NewFaultyQueue(q, injector, azqtest.FaultyOptions{})
//	w := worker.New(fq, handle, worker.Options{Clock: mock, Poison: ...})
//
// # Which clock waits
//
// The server's queues read srv.Clock: messages become visible, leases
// lapse and messages expire only when the test moves it (Clock.Add). The
// waits of the clients are not all on it:
//
//   - The SDK's retry back-off and try timeout are real time. Keep
//     RetryDelay short in tests that meet faults.
//   - A fault rule's delay is real time; its time windows and the
//     throttle's rates are on srv.Clock.
//   - A worker on a queue that reports srv.Clock (azure.Options.Clock)
//     renews leases on it, and polls when its poll interval has passed on
//     it or in real time, whichever comes first: it polls whether or not
//     the test moves the clock. Given srv.Clock as worker.Options.Clock,
//     it waits on the clock alone and polls only when the test moves it
//     by the wait EventPollWait reports.
//   - A gocloud (azqpubsub) or Watermill (azqwatermill) subscription on
//     such a queue polls as a worker does.
//   - azq.Queue.Receive, in process, is woken by a Put or an Update, and
//     by the clock for a message that becomes visible later: on a mock
//     clock, that one waits until the test moves the clock past it.
//
// # Contract suites
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
package azqtest
