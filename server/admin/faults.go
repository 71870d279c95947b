package admin

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"

	"github.com/azqlib/azq/faults"
)

// maxFaultsBody bounds a POST's body; rules are a few hundred bytes.
const maxFaultsBody = 1 << 20

// serveFaults answers /_azq/faults, the injector's rules and throttle:
//
//	GET    /_azq/faults            the rules with their hits, and the throttle
//	POST   /_azq/faults            add rules, set the throttle: a rules file's
//	                               JSON (without seed), Content-Type application/json
//	DELETE /_azq/faults            remove every rule and the throttle
//	DELETE /_azq/faults?rule=NAME  remove one rule
//
// A DELETE with any other query (an empty name, another parameter, two
// names) is refused with 400: only a DELETE without one removes all.
// Every answer that is not a refusal is the injector's Status.
func serveFaults(inj *faults.Injector, hints Hints, w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Prefix+"faults" {
		writeError(w, http.StatusNotFound, "no such endpoint; see GET, POST and DELETE /_azq/faults")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if status, msg := addFaults(inj, hints, r); status != 0 {
			writeError(w, status, msg)
			return
		}
	case http.MethodDelete:
		if status, msg := removeFaults(inj, r); status != 0 {
			writeError(w, status, msg)
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "/_azq/faults takes GET, POST or DELETE")
		return
	}
	writeJSON(w, http.StatusOK, inj.Status())
}

// removeAll says how to remove every rule, for the refusals of
// removeFaults.
const removeAll = "DELETE /_azq/faults without a query removes every rule and the throttle"

// removeFaults removes the rule a DELETE names, or every rule and the
// throttle for a DELETE without a query, or returns why not.
func removeFaults(inj *faults.Injector, r *http.Request) (int, string) {
	if r.URL.RawQuery == "" {
		inj.Clear()
		inj.SetThrottle(nil)
		return 0, ""
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return http.StatusBadRequest, "the query: " + err.Error()
	}
	for k := range query {
		if k != "rule" {
			return http.StatusBadRequest, fmt.Sprintf("unknown parameter %q: name the rule to remove with ?rule=NAME; %s", k, removeAll)
		}
	}
	names := query["rule"]
	switch {
	case len(names) != 1:
		return http.StatusBadRequest, "rule: give one rule name"
	case names[0] == "":
		return http.StatusBadRequest, "rule: empty; name the rule to remove; " + removeAll
	case !inj.Remove(names[0]):
		return http.StatusNotFound, "rule: there is no rule named " + names[0]
	}
	return 0, ""
}

// addFaults adds the rules of a POST and sets its throttle, or returns
// why not.
func addFaults(inj *faults.Injector, hints Hints, r *http.Request) (int, string) {
	// Besides saying what the body is, the JSON type is a header no
	// cross-site form can send.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "send the rules as JSON, with Content-Type: application/json"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFaultsBody+1))
	if err != nil {
		return http.StatusBadRequest, "reading the body: " + err.Error()
	}
	if len(body) > maxFaultsBody {
		return http.StatusRequestEntityTooLarge, "the body is over 1 MiB"
	}
	cfg, err := faults.Parse(body)
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}
	if cfg.Seed != 0 {
		msg := "seed: the seed is set at start-up"
		if hints.Seed != "" {
			msg += ", " + hints.Seed
		}
		return http.StatusBadRequest, msg
	}
	if err := inj.Add(cfg.Rules...); err != nil {
		// Parse checked the fields: what is left is a name in use.
		return http.StatusConflict, err.Error()
	}
	if cfg.Throttle != nil {
		if err := inj.SetThrottle(cfg.Throttle); err != nil {
			return http.StatusBadRequest, err.Error()
		}
	}
	return 0, ""
}
