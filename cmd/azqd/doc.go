// Command azqd is a standalone Azure Queue Storage emulator: it serves the
// Azure Queue REST API over azq's in-memory queues, so that programs in any
// language, through any Azure SDK, can use it as they would use Azurite or
// a real storage account.
//
// Usage:
//
//	go run github.com/azqlib/azq/cmd/azqd [flags]
//
// With no flags, azqd listens on 127.0.0.1:10001 (Azurite's queue port),
// answers for the development account devstoreaccount1 with its well-known
// key, and prints one connection string per account on standard output:
//
//	azqd: serving the Azure Queue REST API on http://127.0.0.1:10001
//	devstoreaccount1: DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8…;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;
//
// Requests use path-style URLs, http://HOST:PORT/ACCOUNT/QUEUE, as with
// every storage emulator. SIGINT or SIGTERM stops azqd gracefully: it stops
// accepting connections, lets in-flight requests finish (for at most
// -shutdown-timeout), and exits; a second signal exits at once. By default
// all queues live in memory and are lost on exit; with -data they survive.
//
// Flags:
//
//	-addr host:port
//		Address to listen on (default 127.0.0.1:10001). Port 0 picks a
//		free port; the address actually bound is printed.
//	-account name:key
//		An account and one of its base64 keys. Repeat the flag for more
//		accounts, or with the same name for a second key (key rotation).
//		Given accounts replace devstoreaccount1.
//	-tls-cert file, -tls-key file
//		Serve HTTPS with this PEM certificate and key (both or neither).
//	-allow-anonymous
//		Accept requests that carry no credentials. Requests that do carry
//		a signature or SAS are still verified.
//	-strict-version
//		Reject x-ms-version values azq does not know, as Azure does,
//		instead of accepting any version.
//	-clock-control
//		Run the emulator on a controllable clock and serve the clock
//		endpoints below. Off by default.
//	-log-level off|debug|info|warn|error
//		Structured request logging (log/slog) on standard error; off by
//		default.
//	-log-format text|json
//		Format of the log records (default text).
//	-shutdown-timeout duration
//		How long a graceful shutdown waits for in-flight requests
//		(default 10s).
//	-data dir
//		Keep queues, metadata, access policies and messages in dir, one
//		subdirectory per account, with azq's durable mode (azq.Open):
//		every request that succeeded is on disk before it is answered,
//		and survives a crash. Start-up replays the directory and reports
//		how many queues and messages it recovered and how long that took;
//		a graceful shutdown writes a checkpoint so the next start-up is
//		quick. With -clock-control the clock's time is kept there too
//		and resumes where it stood.
//
// # Clock control
//
// With -clock-control the emulator's clock starts at the real current time
// and then stands still: it moves only when a test moves it, so that
// visibility timeouts, time-to-live and SAS expiry can be tested without
// waiting. The endpoints live under /_azq/, which can be neither an
// account nor a queue name and so is outside the Azure URL space. They
// take no credentials and answer JSON, {"now":"<RFC 3339 time, UTC>"}:
//
//	GET  /_azq/clock                   the emulator's current time
//	POST /_azq/clock/advance?by=168h   move forward by a Go duration
//	                                   ("90s", "1h30m") or by seconds ("3600")
//	POST /_azq/clock/set?to=2030-01-01T00:00:00Z
//	                                   move forward to an RFC 3339 time
//
// The clock never moves backwards: a negative advance, or a set to an
// earlier time, is refused with 400. Without -clock-control every /_azq/
// path answers 404 and the emulator follows the real clock.
package main
