package guard

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Hosts is the set of Host names, besides IP addresses and localhost,
// that the admin surface answers to.
type Hosts struct {
	names map[string]bool
}

// NewHosts returns the Hosts allowing names (host names without port;
// case and a trailing dot do not matter).
func NewHosts(names ...string) *Hosts {
	h := &Hosts{names: map[string]bool{}}
	for _, n := range names {
		if n = normalize(n); n != "" {
			h.names[n] = true
		}
	}
	return h
}

func normalize(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// Allowed reports whether a Host header value (with or without a port)
// names this machine as the admin surface knows it: an IP literal,
// localhost or a name under .localhost (which browsers resolve to
// loopback themselves), or an allowed name. An empty Host (HTTP/1.0) is
// allowed: no browser sends one.
func (h *Hosts) Allowed(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if i := strings.IndexByte(host, '%'); i >= 0 { // IPv6 zone
		host = host[:i]
	}
	if net.ParseIP(host) != nil {
		return true
	}
	host = normalize(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return h != nil && h.names[host]
}

// SameOrigin reports whether r may change state: it comes from the admin
// page's own origin by Sec-Fetch-Site ("same-origin", or "none" for a URL
// the user typed), else by Origin; or it carries a header that a
// cross-site page cannot send without a CORS preflight (a Content-Type
// other than the three a form can send, or X-Requested-With); or it
// carries neither Sec-Fetch-Site nor Origin, as programs' requests do.
func SameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none" || nonSimple(r)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) || nonSimple(r)
	}
	return true
}

// nonSimple reports whether r has a header outside the CORS-safelisted
// ones a page may send to another origin without a preflight.
func nonSimple(r *http.Request) bool {
	if r.Header.Get("X-Requested-With") != "" {
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "application/x-www-form-urlencoded", "multipart/form-data", "text/plain":
		return false
	}
	return true
}

// Safe reports whether method only reads.
func Safe(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// Refusal is why a request may not reach the admin surface.
type Refusal struct {
	Status int
	Reason string
}

// Check returns why r may not reach the admin surface, or nil: a Host
// that is not allowed (421 Misdirected Request), or a state-changing
// request from another site (403 Forbidden).
func (h *Hosts) Check(r *http.Request) *Refusal {
	if !h.Allowed(r.Host) {
		return &Refusal{http.StatusMisdirectedRequest, "the admin surface answers to IP addresses, localhost and the names it was told it serves, not to " + truncate(r.Host, 100) + ": a page under another name that resolves to this machine must not reach it"}
	}
	if !Safe(r.Method) && !SameOrigin(r) {
		return &Refusal{http.StatusForbidden, "cross-site requests may not change the emulator"}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
