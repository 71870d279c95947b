// Package guard decides which requests may reach azq's admin surface: the
// web view (package ui) and azqd's reset, clock and fault endpoints, which
// need no credentials and so must not be reachable from another site's
// page in the developer's browser. Its Host check also guards the Azure
// API of a server on loopback (server.Options.CheckHost), whose
// development key is public.
//
// Two checks make a request safe to serve. The Host it names must be an IP
// address, localhost (or a name under .localhost), or a name the operator
// allowed: a page under its own name that resolves to 127.0.0.1 (DNS
// rebinding) is same-origin to the browser, but names the wrong Host. And
// a request that changes state (any method but GET and HEAD) must come
// from the admin page's own origin, by the metadata browsers send
// (Sec-Fetch-Site, else Origin), or carry a header a cross-site page
// cannot send without a CORS preflight, which the admin surface never
// grants; a request with no browser metadata at all comes from a program,
// not a page, and may proceed.
package guard
