// Package faults describes the failures of Azure Queue Storage on a bad
// day, so that code that talks to a queue can be tested against them: 503
// ServerBusy past a scalability target, 500 InternalError and
// OperationTimedOut, a connection closed, reset or cut off mid-answer,
// slow answers, and, worst, an operation that took effect while its
// answer was lost, so that the client's retry puts a second copy of a
// message or gets 404 for a Delete that succeeded.
//
// A Rule pairs a condition (When: operations, queue name or prefix,
// account, every n-th match, a probability, at most k times, a window of
// time) with a result (Then: an Azure error, a network failure, a delay,
// and whether the operation is applied first). A Throttle refuses requests
// past a rate per queue and per account, as Azure does past its targets.
// An Injector holds both and decides, request by request, what happens;
// it counts each rule's hits, and its random choices follow a seed.
//
// The same Injector serves azq's REST server (server.Options.Faults, and
// azqd's -faults FILE and /_azq/faults endpoint) and, through
// azqtest.FaultyQueue, any azq.MessageQueue in process:
//
//	in, err := faults.New(faults.Options{Clock: mock, Config: faults.Config{
//		Seed: 1,
//		Rules: []faults.Rule{{
//			Name: "lost-delete",
//			When: faults.When{Operations: []string{"DeleteMessage"}, Times: 1},
//			Then: faults.Then{Applied: true, Error: faults.CodeInternalError},
//		}},
//	}})
//
// Rules files are JSON (see Config); Load and Parse check every field and
// name the file and the field of the first one that is wrong.
package faults
