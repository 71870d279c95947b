// Package admin serves azq's own endpoints under /_azq/, beside the Azure
// Queue REST API of package server: the endpoints that make a test run
// reproducible and observable from another process, which azqd serves
// and azqtest.NewServer mounts too.
//
//	GET  /_azq/health                 {"status":"ok",...}, or 503 with the reason
//	GET  /_azq/clock                  the mock clock's time            (Options.Clock)
//	POST /_azq/clock/advance?by=168h  move it forward by a duration    (Options.Clock)
//	POST /_azq/clock/set?to=RFC3339   move it forward to a time        (Options.Clock)
//	POST /_azq/reset                  delete every queue               (Options.Reset)
//	GET, POST, DELETE /_azq/faults    the fault rules and the throttle (Options.Faults)
//	GET  /_azq/metrics                Prometheus metrics               (Options.Metrics)
//	/_azq/ui/                         a web view                       (Options.UI)
//
// Each endpoint is on when what it needs is given; one that is off answers
// 404 saying so, followed by Hints (how to turn it on, in the words of the
// program that serves it). The health, clock, reset and fault endpoints
// answer JSON, refusals included ({"error": ...}), with the status a
// client can act on: 400 for a bad parameter, 405 with Allow for a wrong
// method, 409 for a fault rule's name in use, 413 and 415 for a body too
// large or not JSON, 500 when a reset or a save of the clock failed.
//
// The endpoints take no credentials, so a Guard decides who reaches them:
// every one but the health check (and the metrics, which the caller guards
// with Guard.Wrap when it wants) refuses a Host that does not name this
// machine (421 Misdirected Request: DNS rebinding), a state-changing
// request from another site's page (403), and a client beyond loopback
// unless GuardOptions.Remote (403). The Azure API guards its Host itself,
// with server.Options.CheckHost.
//
// The clock endpoints move a benbjohnson/clock mock clock through a Clock,
// which serializes moves, only moves the clock forward, never past the
// last instant azq represents (MaxClockTime), and can save each move.
package admin
