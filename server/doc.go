// Package server serves the Azure Queue Storage REST API over azq, so that
// the official Azure SDKs and tools
// written for Azurite talk to an in-memory azq.Service unchanged.
//
// A Server is an http.Handler. Each configured Account is backed by its own
// keeper of azq's service contract, azq.QueueService: an in-memory
// *azq.Service by default, or what Options.Services gives (a durable
// *azq.Service, an *azure.Service, a PostgreSQL one). Every request goes
// through the contract (QueueService.Ref, ListQueues, DeleteQueue), so each
// back end is served alike; requests name the account path-style, as the
// emulators do
// (http://127.0.0.1:10001/devstoreaccount1/myqueue/messages), or host-style,
// as production does (http://devstoreaccount1.queue.localhost:10001/myqueue).
// "<account>-secondary" in either position addresses the read-only
// secondary endpoint of the account.
//
// Requests are authenticated with Shared Key, Shared Key Lite, account SAS
// or service SAS (including stored access policies) before they touch any
// state; Options.AllowAnonymous also accepts unsigned requests, and
// Options.OAuth accepts Microsoft Entra ID bearer tokens over HTTPS, checked
// for shape, audience, issuer and lifetime, and for their signature when
// the operator gives the signing keys (see OAuthOptions). Responses
// carry Azure's status codes, headers (x-ms-request-id, x-ms-version, Date,
// x-ms-error-code) and XML bodies, including the Error XML with Azure's
// detail elements, so code that matches on Azure's error codes behaves the
// same against the emulator.
//
// A request is served exactly as its signature covers it. One parser reads
// the query string for routing, the handlers and the verifiers; parameter
// names are read in lower case, as the Shared Key canonicalization folds
// them (so a signed "peekonly=true" replayed as "PeekOnly=true" is still a
// Peek); a repeated parameter is refused; and requests are routed on the
// path as sent, so a percent-encoded "/" stays inside its segment. Shared
// Key requests must carry x-ms-date or Date; on the real clock a date more
// than 15 minutes off is refused, as Azure does. On a mock clock that check
// is skipped, because clients sign with their own real clock.
//
// Time (the Date header, SAS validity) comes from the clock of the
// account's back end (QueueService.Clock), as message timestamps do, so
// tests can drive a whole SDK session with a mock clock.
//
// Options.Faults gives the server Azure's bad days on demand (package
// faults): each request that reaches its operation may be delayed,
// answered with 503 ServerBusy, 500 InternalError or OperationTimedOut, cut
// off or have its connection closed or reset, or take effect and then lose
// its answer, so that a client's retries meet the consequences; and it may
// be throttled past a rate per queue and per account. Options.Observe hears
// of every answered request, for metrics (package metrics). With neither
// set, serving a request costs what it did without them.
package server
