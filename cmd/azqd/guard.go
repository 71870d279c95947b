package main

import (
	"net"

	"github.com/azqlib/azq/server/admin"
)

// adminHosts are the Host names, besides IP addresses and localhost, that
// the admin endpoints answer to: those of -allow-host and the host of
// -addr when it is a name. The guard, the web view, which checks the
// Host itself, and on loopback the Azure API take them from here alike.
func adminHosts(cfg *config) []string {
	names := append([]string(nil), cfg.admin.allowHosts...)
	if host, _, err := net.SplitHostPort(cfg.addr); err == nil && host != "" && net.ParseIP(host) == nil {
		names = append(names, host)
	}
	return names
}

// newAdminGuard is the guard of the admin endpoints under /_azq/ (the web
// view, reset, clock, faults), and, while azqd listens on loopback only,
// of the metrics, which name the queues and their depths; the health
// check, which shows nothing of them, is not guarded. (The Azure API
// checks the Host itself, server.Options.CheckHost, with the names of
// adminHosts.) It allows the Host names of adminHosts, and clients beyond
// loopback with -admin-remote.
func newAdminGuard(cfg *config) *admin.Guard {
	return admin.NewGuard(admin.GuardOptions{Hosts: adminHosts(cfg), Remote: cfg.admin.remote, Hints: adminHints})
}
