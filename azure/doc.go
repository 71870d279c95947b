// Package azure runs azq's queue contract (azq.MessageQueue) on Azure Queue
// Storage itself, through the official Go SDK
// (github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue). Code written
// against azq — producers, a worker.Worker, their tests — keeps working
// when it outgrows one process: give it an *azure.Queue instead of an
// *azq.Queue. The same adapter talks to azq's own REST server (package
// server, cmd/azqd), which is how this package is tested.
//
//	q, err := azure.NewQueueFromConnectionString(conn, "orders", nil)
//	w := worker.New(q, handle, worker.Options{})
//
// # The service contract
//
// A Service keeps azq's service contract (azq.QueueService) and its Queues
// keep azq.QueueRef, so what takes a QueueService — azq's REST server
// (server.Options.Services), a worker's poison queue
// (worker.ServicePoison), the messaging drivers, the web page — runs on a
// storage account as on an in-memory *azq.Service:
//
//	svc, err := azure.NewServiceFromConnectionString(conn, nil)
//	api := server.New(server.Options{Services: map[string]azq.QueueService{"devstoreaccount1": svc}})
//
// Metadata is checked against Azure's rules before it is sent (it travels
// in headers, where names differing only in case would merge), and a
// MaxResults above 5000 is refused rather than cut; everything else the
// service decides.
//
// # Construction
//
// A Queue or Service is made from a connection string, from a URL and an
// azcore.TokenCredential (for example azidentity's
// DefaultAzureCredential), or from an SDK client you already have. The
// constructors that build the client add a pipeline policy the adapter
// needs (see PrepareClientOptions); a client built elsewhere should be
// built with PrepareClientOptions too.
//
// # Semantics
//
// The service decides; the adapter translates. Messages, pop receipts
// (carried as azq.RemotePopReceipt) and times come from the service's
// answers, and errors are mapped by Azure error code so that
// errors.Is(err, azq.ErrMessageNotFound) and the other sentinels work as
// they do in memory; errors.As also finds the SDK's
// *azcore.ResponseError, with the raw response. Durations go on the wire
// in whole seconds, rounded up; azq.NeverExpires is messagettl=-1. Update
// with nil content sends no body, which keeps the message's content, as
// the REST API defines; the SDK's UpdateMessage alone would always send
// one.
//
// # What an answer may bring, and how long a try may take
//
// The adapter does not trust the service with its memory or its time. A
// Get or Peek of n messages returns at most n, and its answer is read up
// to what n messages of the largest size take as XML (a
// *ResponseTooLargeError past that); every other answer has a bound of
// its own, and an error answer's body is read up to MaxErrorBodyBytes, so
// that neither a faulty proxy nor a hostile endpoint can make a client
// allocate without limit. Every try of a request has a deadline,
// DefaultTryTimeout (a minute) unless the SDK options' Retry.TryTimeout
// set one, after which the SDK's retry policy tries again or gives up: a
// service that takes a request and never answers stalls a worker for a
// few tries, not for as long as its context allows.
//
// # Message text encoding
//
// Azure stores message text as given; it never encodes or decodes it.
// Clients differ in what they send: the Go SDK, azq and the current .NET,
// Java, JavaScript and Python SDKs send the text as is by default
// (EncodingNone, the default here), while the Azure Functions queue
// trigger expects base64 by default, as the older .NET storage SDK sent
// it; the current .NET, Java and Python SDKs can be set to base64
// (EncodingBase64 here). Both sides of a queue must agree; see
// Options.Encoding.
//
// # Time
//
// The service keeps time; Queue.Clock reports the clock the caller's
// waits should use (Options.Clock, the real clock by default), which
// package worker picks up. Against azq's server in tests, give it the
// server's mock clock, so that worker, server and test share one time.
package azure
