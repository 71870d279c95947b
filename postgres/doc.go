// Package postgres keeps azq's queue contract on PostgreSQL: the queues of
// a Service live in tables of one schema, and every Service on that
// schema, in any number of processes, serves the same queues. A message
// put through one is got through another, and a receipt issued by one
// works on all. It is for a Go service that grows past one process and
// has PostgreSQL rather than an Azure storage account.
//
// A Queue keeps the semantics of the in-memory *azq.Queue exactly, as
// package azqtest checks: Get takes messages in order of next-visible
// time, then insertion, in one statement (FOR UPDATE SKIP LOCKED);
// receipts are azq's own, versioned and random, and die when the message
// is dequeued again, updated, deleted or expires; visibility timeouts up
// to 7 days, time-to-live including never, 64 KiB messages and 32 per Get,
// with the in-memory queue's errors. Receive waits without polling, woken
// through LISTEN/NOTIFY and a timer. Service keeps azq.QueueService: the
// queues by name, with their metadata and access policies.
//
// Time comes from the Options' clock when one is given, a mock in tests,
// so a test moves a week in a microsecond; otherwise from the database's
// clock, so that replicas whose clocks disagree agree on when a message
// becomes visible or expires.
//
// A Service also keeps its account's service properties (CORS rules,
// logging and metrics settings) for azq's REST server
// (ServiceProperties, UpdateServiceProperties), so that every server on
// a schema answers with the same ones: azqd -postgres URL serves each
// account from a schema of the database, and any number of azqd on it
// serve the same queues.
//
// Every operation is bounded: by its context, whose end cancels the
// statement on the database (it rolls back); and by the statement and
// lock timeouts that Open sets on its connections (Options), past which
// it fails with 500 OperationTimedOut and takes no effect. A statement
// that failed before it reached the database, on a connection that went
// stale while the server restarted, runs once more on a live one.
//
// Open applies the embedded schema under an advisory lock, so replicas
// that start together do not race. docs/postgres.md in the repository
// says when to choose this back end, how to run it, its schema, its
// limits and its speed. Package pgtest starts a throwaway PostgreSQL
// server for tests.
package postgres
