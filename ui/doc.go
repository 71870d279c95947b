// Package ui serves a small web page that shows what the accounts of azq's
// service contract (azq.QueueService) hold: for each account its queues,
// with their depth, invisible count and oldest message's age; for each
// queue its oldest messages, with their dequeue count, next-visible and
// expiration times; and the clock, which the page can move forward when the
// caller gives it a way to (Options.Advance). A queue can be cleared from
// the page.
//
// The page is plain HTML from html/template, with a few lines of inline
// script that reload it every Options.Refresh (not while an input has the
// focus); there is no build step and nothing is loaded from elsewhere. It
// looks through Inspect where the queue has it (azq.NamedQueue, the queues
// of an *azq.Service), so looking changes nothing: no receipt is issued and
// no message's visibility or dequeue count moves. Of another back end's
// queues it shows what the contract gives without changing anything, the
// approximate count and the visible messages Peek returns, and says so on
// the page.
//
// The handler has no authentication of its own: it is meant for an
// emulator on a developer's machine or in a test, as azqd serves it under
// /_azq/ui with -ui. Requests that change something (clear, advance) must
// be POSTs from the page's own origin, so that other web sites cannot make
// a browser send them; and every request must name as its Host an IP
// address, localhost or one of Options.Hosts, so that a page under another
// name that resolves to this machine (DNS rebinding) cannot read it.
//
// With Options.Faults the page also lists the fault rules the server
// applies (package faults), with their hits, and its throttle.
package ui
