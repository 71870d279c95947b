package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/azqlib/azq/faults"
)

// Prefix is where the admin endpoints live. "_" can start neither an
// account nor a queue name, so no Azure request has this path.
const Prefix = "/_azq/"

// UIPrefix is where Options.UI is served: give it to the web view as its
// prefix (ui.Options.Prefix).
const UIPrefix = Prefix + "ui"

// Owns reports whether a request for path is the admin endpoints' to
// answer: /_azq and everything under Prefix.
func Owns(path string) bool {
	return strings.HasPrefix(path, Prefix) || path == strings.TrimSuffix(Prefix, "/")
}

// Options say which endpoints a Handler serves and what they act on. An
// endpoint whose field is nil is off: it answers 404, saying so.
type Options struct {
	// Clock is the mock clock that GET /_azq/clock reads and POST
	// /_azq/clock/advance and /_azq/clock/set move. The health check
	// reports whether there is one (clock_control).
	Clock *Clock
	// Reset serves POST /_azq/reset: it deletes every queue of every
	// account and restores the default service properties, as
	// server.Server.Reset does, for isolation between test cases.
	Reset func(context.Context) error
	// Faults is the fault injector whose rules and throttle /_azq/faults
	// lists, adds and removes.
	Faults *faults.Injector
	// Health, if set, is asked by every GET /_azq/health: an error makes
	// the health check answer 503 with the error as its reason. Without
	// it the health check answers 200 once the Handler serves.
	Health func(context.Context) error
	// Version is the health check's version string.
	Version string
	// Metrics serves GET /_azq/metrics (metrics.Recorder.Handler). It is
	// not behind the guard: wrap it with Guard.Wrap to guard it.
	Metrics http.Handler
	// UI serves UIPrefix and everything under it, behind the guard: a web
	// view such as package ui's, whose prefix is UIPrefix.
	UI http.Handler
	// Guard decides which requests reach the endpoints but the health
	// check and the metrics. Nil means NewGuard(GuardOptions{}): clients
	// on this machine only, by IP address or localhost.
	Guard *Guard
	// Hints say how to turn on what is off, for the refusals of the
	// endpoints that are off.
	Hints Hints
}

// Hints are what the admin endpoints' refusals tell a client to do, in
// the words of the program that serves them: azqd says "start azqd with
// -clock-control". Each one that is set follows its refusal after "; "
// (Seed after ", "); one that is not leaves the refusal as it is.
type Hints struct {
	Clock  string // how to turn the clock endpoints on
	Reset  string // how to turn POST /_azq/reset on
	Faults string // how to turn /_azq/faults on
	// Seed says where the fault rules' seed is set, for the refusal of
	// a POST /_azq/faults that sets one: azqd's "by the -faults file".
	Seed string
	UI   string // how to turn the web view on
	// Endpoints, if set, replaces the list of endpoints that a request
	// for no endpoint is told to see ("see GET /_azq/health, ...").
	Endpoints string
	// Remote says how to serve clients beyond loopback (GuardOptions).
	Remote string
	// Host says how to allow a Host name (GuardOptions).
	Host string
}

// hinted is msg followed by hint, if there is one.
func hinted(msg, hint string) string {
	if hint == "" {
		return msg
	}
	return msg + "; " + hint
}

// Health is the answer of GET /_azq/health.
type Health struct {
	// Status is "ok" (200) or "unavailable" (503).
	Status string `json:"status"`
	// Reason is why the status is "unavailable".
	Reason string `json:"reason,omitempty"`
	// Version is the server's, Options.Version.
	Version string `json:"version"`
	// ClockControl reports whether the clock endpoints are on.
	ClockControl bool `json:"clock_control"`
}

// errorReply is the body of every refusal.
type errorReply struct {
	Error string `json:"error"`
}

type statusReply struct {
	Status string `json:"status"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorReply{msg})
}

// Handler is an http.Handler serving the admin endpoints under Prefix.
type Handler struct {
	opts  Options
	guard *Guard
}

// New returns the Handler of opts.
func New(opts Options) *Handler {
	g := opts.Guard
	if g == nil {
		g = NewGuard(GuardOptions{})
	}
	return &Handler{opts: opts, guard: g}
}

// Mount returns a handler that routes the requests the admin endpoints
// own (Owns) to h and every other one to next, the Azure API.
func (h *Handler) Mount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Owns(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP answers a request under Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == Prefix+"metrics" && h.opts.Metrics != nil {
		h.opts.Metrics.ServeHTTP(w, r)
		return
	}
	if p != Prefix+"health" && h.guard.refuse(w, r) {
		return
	}
	switch {
	case p == Prefix+"health":
		h.health(w, r)
	case p == Prefix+"reset":
		h.reset(w, r)
	case p == Prefix+"clock" || strings.HasPrefix(p, Prefix+"clock/"):
		if h.opts.Clock == nil {
			writeError(w, http.StatusNotFound, hinted("clock control is off", h.opts.Hints.Clock))
			return
		}
		serveClock(h.opts.Clock, w, r)
	case p == Prefix+"faults" || strings.HasPrefix(p, Prefix+"faults/"):
		if h.opts.Faults == nil {
			writeError(w, http.StatusNotFound, hinted("fault injection is off", h.opts.Hints.Faults))
			return
		}
		serveFaults(h.opts.Faults, h.opts.Hints, w, r)
	case p == UIPrefix || strings.HasPrefix(p, UIPrefix+"/"):
		if h.opts.UI == nil {
			http.Error(w, hinted("the web UI is off", h.opts.Hints.UI), http.StatusNotFound)
			return
		}
		h.opts.UI.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusNotFound, "no such endpoint; "+h.endpoints())
	}
}

// endpoints is the list a request for no endpoint is told to see.
func (h *Handler) endpoints() string {
	if h.opts.Hints.Endpoints != "" {
		return h.opts.Hints.Endpoints
	}
	list := []string{"GET " + Prefix + "health"}
	if h.opts.Metrics != nil {
		list = append(list, "GET "+Prefix+"metrics")
	}
	if h.opts.Clock != nil {
		list = append(list, "GET "+Prefix+"clock", "POST "+Prefix+"clock/advance?by=", "POST "+Prefix+"clock/set?to=")
	}
	if h.opts.Reset != nil {
		list = append(list, "POST "+Prefix+"reset")
	}
	if h.opts.Faults != nil {
		list = append(list, "GET, POST and DELETE "+Prefix+"faults")
	}
	if h.opts.UI != nil {
		list = append(list, "GET "+UIPrefix+"/")
	}
	return "see " + strings.Join(list, "; ")
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	reply := Health{Status: "ok", Version: h.opts.Version, ClockControl: h.opts.Clock != nil}
	if h.opts.Health != nil {
		if err := h.opts.Health(r.Context()); err != nil {
			reply.Status, reply.Reason = "unavailable", err.Error()
			writeJSON(w, http.StatusServiceUnavailable, reply)
			return
		}
	}
	writeJSON(w, http.StatusOK, reply)
}

func (h *Handler) reset(w http.ResponseWriter, r *http.Request) {
	if h.opts.Reset == nil {
		writeError(w, http.StatusNotFound, hinted("reset is off", h.opts.Hints.Reset))
		return
	}
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	if err := h.opts.Reset(r.Context()); err != nil {
		writeError(w, http.StatusInternalServerError, "reset: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, statusReply{Status: "reset"})
}

// allowMethod answers 405 unless r uses method (GET also allows HEAD).
func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, r.URL.Path+" takes "+method)
	return false
}
