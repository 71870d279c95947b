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
//	azqd: in memory (queues are lost on exit; -data DIR keeps them), serving the Azure Queue REST API on http://127.0.0.1:10001
//	devstoreaccount1: DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8…;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;
//
// Requests use path-style URLs, http://HOST:PORT/ACCOUNT/QUEUE, as with
// every storage emulator. SIGINT or SIGTERM stops azqd gracefully: it stops
// accepting connections, lets in-flight requests finish (for at most
// -shutdown-timeout), and exits; a second signal exits at once. By default
// all queues live in memory and are lost on exit; with -data they survive.
//
// Flags (azqd -h lists them in groups: queue service, authentication and
// TLS, durability, operability, Azurite compatibility):
//
//	-addr host:port
//		Address to listen on (default 127.0.0.1:10001). Port 0, as in
//		127.0.0.1:0, picks a free port; the address actually bound is
//		printed. An address beyond loopback (":0", "0.0.0.0:10001") makes
//		the emulator, and its publicly known development key, reachable
//		from other machines; azqd warns on standard error when it listens
//		there.
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
//	-ui
//		Serve a web page at /_azq/ui/ that shows every account's queues
//		(depth, invisible count, oldest message's age) and each queue's
//		messages, reloads itself, clears queues, and with -clock-control
//		moves the clock. It has no authentication, like clock control.
//	-oauth
//		Accept Microsoft Entra ID (OAuth) bearer tokens, as the Azure SDKs
//		send them when given a TokenCredential. Needs -tls-cert: the SDKs
//		send tokens over HTTPS only. Each token's shape, audience, issuer
//		and nbf/exp window are checked, against the emulator's clock;
//		without -oauth-key its signature is not.
//	-oauth-key file
//		Check bearer token signatures against the public keys in file:
//		PEM public keys or certificates, or a JSON Web Key Set such as the
//		one Entra ID publishes. Implies -oauth.
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
//		quick. Each account's service properties (CORS, logging and
//		metrics settings) are kept in dir/ACCOUNT.properties.xml. With
//		-clock-control the clock's time is kept there too and resumes
//		where it stood. A failed checkpoint or a storage failure is
//		logged (on standard error even with -log-level off).
//	-read-timeout duration
//		How long a client may take to send a whole request, headers and
//		body (default 30s; the headers get at most 10s of it). A slow or
//		silent client is disconnected when it runs out.
//	-keep-alive-timeout duration
//		How long an idle keep-alive connection stays open (default 5s, as
//		in Azurite).
//	-max-connections n
//		The most connections served at once (default 1024). Further
//		clients wait to be accepted until a connection closes.
//	-print-connection-string
//		Print only the connection strings on standard output, one line per
//		account, for scripts; the other start-up lines go to standard
//		error.
//	-version
//		Print azqd's version, the azq release it belongs to, with the VCS
//		revision it was built from (and "modified" when the tree had
//		changes not committed), or its module version when go install
//		built it, or "no VCS revision" when the build recorded none
//		(-buildvcs=false); then the Go version. Then exit.
//
// # Health and logs
//
// GET /_azq/health answers {"status":"ok","version":…,"clock_control":…}
// once azqd serves, for readiness checks in scripts and containers; it is
// always on and takes no credentials. With -data, once an account's
// storage has failed (a write or sync of its log failed, after which it
// refuses every request until azqd restarts) it answers 503 with
// {"status":"unavailable","reason":…}, so that a container's health check
// restarts azqd. azqd -healthcheck URL asks that endpoint and exits 0 if
// azqd is healthy, 1 if not: the health check of the scratch image,
// which has no curl.
//
// With -log-level, each request is logged once, with its operation,
// account, queue, status, Azure error code, duration, x-ms-version and
// User-Agent: successful requests at debug level, client errors (4xx) at
// info, server errors (5xx) at error. -log-level info therefore shows just
// the requests that failed.
//
// # Azurite's flags
//
// So that command lines written for Azurite start azqd unchanged, azqd
// takes every flag of azurite-queue 3.37, and azurite's blob and table
// ones, with one dash or two; azqd -h lists them under "Azurite
// compatibility", and docs/emulator.md in the repository has the table.
// Each does what it does in Azurite: --queueHost and --queuePort are
// -addr, --location (-l) is -data, --cert and --key are -tls-cert and
// -tls-key, --oauth basic is -oauth with Azurite's token issuers, --debug (-d) writes the request log
// at debug level to its file, --queueKeepAliveTimeout is
// -keep-alive-timeout in seconds, --disableProductStyleUrl takes the
// account from the path only. Or nothing, where azqd already behaves that
// way: --inMemoryPersistence, --loose (-L), --skipApiVersionCheck,
// --silent (-s), --disableTelemetry, and --extentMemoryLimit, which azqd
// does not enforce and says so. --pwd, for PFX certificates, is refused:
// azqd reads PEM only.
//
// --blobHost, --blobPort, --tableHost and --tablePort make azqd listen
// there too (Azurite's defaults, 127.0.0.1 and ports 10000 and 10002, fill
// in the part not given) and answer every request with 501 NotImplemented
// and Azure's Error XML saying that azqd serves the Queue service only;
// nothing is stored. This is for tools that wait for all of Azurite's
// ports, such as the Testcontainers Azurite modules. Once listening, azqd
// prints Azurite's start-up line for each service, on standard output
// (standard error with -print-connection-string):
//
//	azqd: Queue service is successfully listening at http://0.0.0.0:10001
//	azqd: Blob service is successfully listening at http://0.0.0.0:10000, and refuses every request with 501 NotImplemented: azqd serves the Queue service only (port 10001)
//
// The container image (the repository's Dockerfile) also answers to
// Azurite's command names, azurite-queue and azurite; under every name the
// program is azqd and serves the Queue service only. It starts azqd as
// root with AZQD_USER=65532:65532: azqd makes the directory of --location
// or -data usable by that user, leaving Azurite's files there alone, and
// then serves as that user. A data directory that holds an Azurite
// workspace is reported at start-up: azqd cannot read Azurite's data.
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
//	POST /_azq/reset                   delete every queue of every account
//	                                   and restore the default service
//	                                   properties, for test isolation
//
// Shared access signatures are checked against this clock, not the wall
// clock: sign SAS start and expiry times from GET /_azq/clock (start a
// little before its "now", expiry after it), since a token whose times come
// from the wall clock is not yet valid, or already expired, once the
// emulator's clock has been moved. Shared Key requests, by contrast, are
// signed with the client's own clock, and under -clock-control azqd skips
// Azure's 15-minute check of their date for that reason.
//
// The clock never moves backwards: a negative advance, or a set to an
// earlier time, is refused with 400. Nor does it move past
// 2262-04-11T23:47:16.854775807Z, the last instant azq's clock holds (its
// times are Unix nanoseconds). Without -clock-control the clock and
// reset endpoints answer 404 and the emulator follows the real clock. The
// web page of -ui, under /_azq/ui/, moves the same clock through the same
// code: the same bound applies, and with -data the move is saved.
//
// # Faults, throttling and metrics
//
// azqd can have Azure's bad days on demand (docs/faults.md):
//
//	-faults file
//		Inject faults by the rules and throttle in this JSON file (package
//		faults describes it): 503 ServerBusy, 500 InternalError or
//		OperationTimedOut, connections closed, reset or cut off mid-answer,
//		delays, and operations that take effect while their answer is lost.
//		A file with an error stops start-up with the file and the field.
//		Implies -fault-control.
//	-fault-control
//		Serve /_azq/faults, to read and change the rules while azqd runs:
//
//		GET    /_azq/faults            the rules, their hits, the throttle
//		POST   /_azq/faults            add rules and set the throttle (the
//		                               file's JSON without seed, sent as
//		                               Content-Type: application/json)
//		DELETE /_azq/faults            remove every rule and the throttle
//		DELETE /_azq/faults?rule=NAME  remove one rule
//	-metrics
//		Serve Prometheus metrics at /metrics and /_azq/metrics (on by
//		default; -metrics=false turns them off): requests by operation and
//		outcome, latency, messages put and deleted, each queue's depth and
//		oldest visible message's age, fault hits (docs/metrics.md). When an
//		account is named "metrics", /metrics is its and the metrics are at
//		/_azq/metrics only.
//
// # The admin surface
//
// The web view and the reset, clock and fault endpoints take no
// credentials, so azqd guards them (the health check and the metrics,
// which change nothing and show no message, are not guarded):
//
//   - A request must name as its Host an IP address, localhost (or a name
//     under .localhost), the host name of -addr, or a name given with
//     -allow-host (repeatable); any other Host gets 421, reads included,
//     so that a page under its own name that resolves to 127.0.0.1 (DNS
//     rebinding) cannot read messages or clear queues.
//   - A request that changes state must come from azqd's own origin, by
//     the Sec-Fetch-Site or Origin header browsers send, or carry a header
//     no cross-site page can send without a CORS preflight (which azqd
//     never grants); requests without browser metadata come from programs
//     and are served. Another site's form or script gets 403.
//   - When azqd listens beyond loopback, they answer clients on this
//     machine only, unless -admin-remote is given; the start-up line says
//     which.
package main
