// Package azqtest is for testing code that uses Azure Queue Storage,
// through the Azure SDK for Go, package azure or azq's queue contract.
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
// The suites that check a back end of azq's contracts are package
// queuetest's (queuetest.RunQueueTests, RunServiceTests, RunWorkerTests),
// which a back end's author imports without this package's Azure SDK.
package azqtest
