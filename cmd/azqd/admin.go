package main

import (
	"net/http"
	"strings"

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
}

type healthReply struct {
	Status       string `json:"status"`
	Version      string `json:"version"`
	ClockControl bool   `json:"clock_control"`
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
