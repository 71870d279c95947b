package main

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

// adminPrefix is where azqd's own endpoints live. "_" can start neither
// an account nor a queue name, so no Azure request has this path.
const adminPrefix = "/_azq/"

// adminHandler serves azqd's own endpoints under /_azq/: the health check,
// always; the clock endpoints and reset with -clock-control (ctl non-nil),
// which is what makes a test run reproducible; the web page with -ui (web
// non-nil).
type adminHandler struct {
	api     *server.Server
	ctl     *clockControl // nil when clock control is off
	web     http.Handler  // nil when the web page is off
	version string
	faults  *faultControl // nil when fault control is off
	metrics http.Handler  // nil when metrics are off
	guard   *adminGuard
	// storage is each durable account's storage, by name; empty without
	// -data.
	storage map[string]storageState
	// databases are the back ends that keep each account's queues in a
	// database, by name: with -postgres, every account's.
	databases map[string]pinger
}

// storageState is what the health check asks of a back end that keeps
// its queues in storage of its own: a durable azq.Service has it.
type storageState interface {
	DurableState() (azq.DurableState, bool)
}

// storageStates returns the back ends that report their storage's state,
// as the health check sees them; the others are not asked.
func storageStates(services map[string]azq.QueueService) map[string]storageState {
	m := make(map[string]storageState, len(services))
	for name, s := range services {
		if st, ok := s.(storageState); ok {
			m[name] = st
		}
	}
	return m
}

type healthReply struct {
	Status       string `json:"status"`
	Reason       string `json:"reason,omitempty"`
	Version      string `json:"version"`
	ClockControl bool   `json:"clock_control"`
}

// storageFailure returns why the storage of an account failed, or "" if
// none did. A durable Service that failed refuses every request (500)
// until azqd restarts, so the health check must say so.
func (h *adminHandler) storageFailure() string {
	names := make([]string, 0, len(h.storage))
	for name := range h.storage {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if st, ok := h.storage[name].DurableState(); ok && st.Failure != nil {
			return "account " + name + ": " + st.Failure.Error()
		}
	}
	return ""
}

// databaseFailure returns why the database of an account does not
// answer, or "" if every one does, within healthPingTimeout. Requests to
// such an account fail with 503 ServerBusy until it answers again, as
// they would in Azure while a server is busy, so the health check says so.
func (h *adminHandler) databaseFailure(ctx context.Context) string {
	names := make([]string, 0, len(h.databases))
	for name := range h.databases {
		names = append(names, name)
	}
	slices.Sort(names)
	ctx, cancel := context.WithTimeout(ctx, healthPingTimeout)
	defer cancel()
	for _, name := range names {
		if err := h.databases[name].Ping(ctx); err != nil {
			if ctx.Err() != nil {
				return "account " + name + ": the database did not answer within " + healthPingTimeout.String()
			}
			return "account " + name + ": " + err.Error()
		}
	}
	return ""
}

type statusReply struct {
	Status string `json:"status"`
}

func (h *adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == "/_azq/metrics" && h.metrics != nil {
		h.metrics.ServeHTTP(w, r)
		return
	}
	if p != "/_azq/health" && h.guard != nil && h.guard.refuse(w, r) {
		return
	}
	switch {
	case p == "/_azq/health":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		reason := h.storageFailure()
		if reason == "" {
			reason = h.databaseFailure(r.Context())
		}
		if reason != "" {
			writeJSON(w, http.StatusServiceUnavailable, healthReply{Status: "unavailable", Reason: reason, Version: h.version, ClockControl: h.ctl != nil})
			return
		}
		writeJSON(w, http.StatusOK, healthReply{Status: "ok", Version: h.version, ClockControl: h.ctl != nil})
	case p == "/_azq/reset":
		if h.ctl == nil {
			writeJSON(w, http.StatusNotFound, clockError{"reset is off; start azqd with -clock-control"})
			return
		}
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		if err := h.api.Reset(r.Context()); err != nil {
			writeJSON(w, http.StatusInternalServerError, clockError{"reset: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, statusReply{Status: "reset"})
	case p == "/_azq/clock" || strings.HasPrefix(p, "/_azq/clock/"):
		h.ctl.ServeHTTP(w, r)
	case p == "/_azq/faults" || strings.HasPrefix(p, "/_azq/faults/"):
		h.faults.ServeHTTP(w, r)
	case p == uiPrefix || strings.HasPrefix(p, uiPrefix+"/"):
		if h.web == nil {
			http.Error(w, "the web UI is off; start azqd with -ui", http.StatusNotFound)
			return
		}
		h.web.ServeHTTP(w, r)
	default:
		writeJSON(w, http.StatusNotFound, clockError{"no such endpoint; see GET /_azq/health and /_azq/metrics; with -clock-control GET /_azq/clock, POST /_azq/clock/advance?by=, POST /_azq/clock/set?to=, POST /_azq/reset; with -faults or -fault-control GET, POST and DELETE /_azq/faults"})
	}
}

// allowMethod answers 405 unless r uses method (GET also allows HEAD).
func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", method)
	writeJSON(w, http.StatusMethodNotAllowed, clockError{r.URL.Path + " takes " + method})
	return false
}
