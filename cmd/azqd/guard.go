package main

import (
	"net"
	"net/http"

	"github.com/azqlib/azq/internal/guard"
)

// adminGuard decides which requests reach the admin endpoints under
// /_azq/ (the web view, reset, clock, faults), and, while azqd listens on
// loopback only, the metrics, which name the queues and their depths;
// the health check, which shows nothing of them, is not guarded. (The
// Azure API checks the Host itself, server.Options.CheckHost, with the
// names of adminHosts.)
// Every guarded request must name an allowed Host (IP addresses,
// localhost, the name -addr listens on and -allow-host's names); one
// that changes state must be same-origin (see package guard); and unless
// -admin-remote, it must come from a loopback address.
type adminGuard struct {
	hosts  *guard.Hosts
	remote bool
}

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

// newAdminGuard allows the Host names of adminHosts.
func newAdminGuard(cfg *config) *adminGuard {
	return &adminGuard{hosts: guard.NewHosts(adminHosts(cfg)...), remote: cfg.admin.remote}
}

// refuse answers r and returns true if r may not reach the admin
// endpoints.
func (g *adminGuard) refuse(w http.ResponseWriter, r *http.Request) bool {
	if !g.remote && !fromLoopback(r) {
		writeJSON(w, http.StatusForbidden, clockError{"the admin endpoints answer clients on this machine only; start azqd with -admin-remote to serve them to others (they take no credentials)"})
		return true
	}
	if refusal := g.hosts.Check(r); refusal != nil {
		msg := refusal.Reason
		if refusal.Status == http.StatusMisdirectedRequest {
			msg += "; start azqd with -allow-host NAME to allow a name"
		}
		writeJSON(w, refusal.Status, clockError{msg})
		return true
	}
	return false
}

// guarded returns h behind the guard; nil stays nil.
func (g *adminGuard) guarded(h http.Handler) http.Handler {
	if h == nil {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.refuse(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// fromLoopback reports whether r came from this machine.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
