// Command azqload measures an Azure Queue Storage endpoint (azqd, Azurite,
// or anything else that speaks the Queue REST API) with the Go SDK
// (github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue), so that
// emulators can be compared on the same client and workload.
//
// Each of -clients goroutines runs cycles of Put Message, Get Messages
// (one message, 30 s visibility) and Delete Message on one shared queue,
// back to back, each with its own HTTP connection. After a warm-up that is
// not counted, azqload runs for -duration (and at most -cycles cycles, if
// given) and prints the cycles per second and the p50, p90 and p99
// latency of a whole cycle and of each operation. Any failed request ends
// the run with an error: a benchmark that hides errors measures nothing.
// The SDK's retries are turned off for the same reason.
//
// Usage:
//
//	go run ./cmd/azqload -endpoint http://127.0.0.1:10001/devstoreaccount1 -clients 8 -duration 10s
//	go run ./cmd/azqload -connection-string "$CONN" -clients 1 -cycles 1000
//	go run ./cmd/azqload -floor -clients 1 -duration 10s
//	go run ./cmd/azqload -raw -endpoint http://127.0.0.1:10001/devstoreaccount1
//
// -endpoint is the queue service URL of the account; -account and -key
// sign its requests (default: devstoreaccount1 and its well-known key).
// -connection-string replaces all three.
//
// -floor measures the net/http floor instead: plain GET requests, through
// the same HTTP transport, to a trivial handler that azqload serves itself
// on a loopback port (or to -endpoint, if given). Each request counts as
// one cycle.
//
// -raw sends the same Put, Get, Delete cycles as plain REST requests
// without credentials and without the SDK (the server must accept
// anonymous requests, e.g. azqd -allow-anonymous): the difference from an
// SDK run is the SDK's own client-side cost.
//
// -serve-floor host:port only serves the floor handler, for -duration, so
// that a -floor run from another process measures the floor across two
// processes, as a real server is measured:
//
//	go run ./cmd/azqload -serve-floor 127.0.0.1:10013 -duration 10m &
//	go run ./cmd/azqload -floor -endpoint http://127.0.0.1:10013/ -clients 8
//
// azqload sends traffic only to the endpoint it is given, and refuses any
// host other than a loopback address or localhost unless -allow-remote is
// set. Every run ends by itself: -duration is required to be positive.
// -json prints the result as one JSON object. -version prints the azq
// release and the VCS revision azqload was built from, as azqd -version
// does.
package main
