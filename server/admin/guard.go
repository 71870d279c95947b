package admin

import (
	"net"
	"net/http"

	"github.com/azqlib/azq/internal/guard"
)

// GuardOptions say which requests a Guard lets through.
type GuardOptions struct {
	// Hosts are the Host names, besides IP addresses, localhost and names
	// under .localhost, that the guarded endpoints answer to (without
	// port; case and a trailing dot do not matter).
	Hosts []string
	// Remote serves clients beyond loopback too. The admin endpoints take
	// no credentials: anyone who reaches them can reset the queues, move
	// the clock and inject faults.
	Remote bool
	// Hints.Remote and Hints.Host follow the refusals of a client beyond
	// loopback and of a Host not allowed. Without them the refusals name
	// these options.
	Hints Hints
}

// Guard decides which requests reach the admin endpoints, and whatever
// else it wraps. A request must name an allowed Host (421 Misdirected
// Request otherwise: a page under another name that resolves to this
// machine, DNS rebinding, must not reach them); one that changes state
// (any method but GET and HEAD) must come from the same origin, or carry
// a header a cross-site page cannot send without a CORS preflight, or no
// browser metadata at all, as programs' requests do (403 otherwise); and
// unless GuardOptions.Remote, it must come from a loopback address (403).
type Guard struct {
	hosts  *guard.Hosts
	remote bool
	hints  Hints
}

// NewGuard returns the Guard of opts.
func NewGuard(opts GuardOptions) *Guard {
	h := opts.Hints
	if h.Remote == "" {
		h.Remote = "set admin.GuardOptions.Remote to serve them to others (they take no credentials)"
	}
	if h.Host == "" {
		h.Host = "allow a name with admin.GuardOptions.Hosts"
	}
	return &Guard{hosts: guard.NewHosts(opts.Hosts...), remote: opts.Remote, hints: h}
}

// refuse answers r and returns true if r may not pass.
func (g *Guard) refuse(w http.ResponseWriter, r *http.Request) bool {
	if !g.remote && !fromLoopback(r) {
		writeError(w, http.StatusForbidden, hinted("the admin endpoints answer clients on this machine only", g.hints.Remote))
		return true
	}
	if refusal := g.hosts.Check(r); refusal != nil {
		msg := refusal.Reason
		if refusal.Status == http.StatusMisdirectedRequest {
			msg = hinted(msg, g.hints.Host)
		}
		writeError(w, refusal.Status, msg)
		return true
	}
	return false
}

// Wrap returns h behind the guard: a request the guard refuses gets its
// JSON refusal and does not reach h. Nil stays nil.
func (g *Guard) Wrap(h http.Handler) http.Handler {
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
