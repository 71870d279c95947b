package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/azqlib/azq/faults"
)

type faultsJSON struct {
	Seed  uint64 `json:"seed"`
	Rules []struct {
		Name string `json:"name"`
	} `json:"rules"`
	Throttle *struct {
		Account float64 `json:"account_requests_per_second"`
	} `json:"throttle"`
	Error string `json:"error"`
}

func faultsCall(t *testing.T, h *Handler, method, target, body string, wantStatus int) faultsJSON {
	t.Helper()
	hdr := map[string]string{}
	if body != "" {
		hdr["Content-Type"] = "application/json"
	}
	status, out := call(t, h, method, target, strings.NewReader(body), hdr)
	var v faultsJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, target, err, out)
	}
	if status != wantStatus {
		t.Fatalf("%s %s: %d %s, want %d", method, target, status, v.Error, wantStatus)
	}
	return v
}

func newFaultsHandler(t *testing.T, hints Hints) (*Handler, *faults.Injector) {
	t.Helper()
	inj, err := faults.New(faults.Options{Config: faults.Config{Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Faults: inj, Hints: hints}), inj
}

// GET lists the rules, POST adds rules and sets the throttle, DELETE
// removes them; the refusals name the field, the name in use, the
// content type, and change nothing.
func TestFaultsEndpoint(t *testing.T) {
	h, inj := newFaultsHandler(t, Hints{Seed: "by the -faults file"})
	if st := faultsCall(t, h, "GET", "/_azq/faults", "", 200); st.Seed != 3 || len(st.Rules) != 0 || st.Throttle != nil {
		t.Fatalf("status %+v", st)
	}
	st := faultsCall(t, h, "POST", "/_azq/faults", `{"rules": [{"name": "lost-put", "when": {"operations": ["PutMessage"], "times": 1},
		"then": {"applied": true, "error": "InternalError"}}], "throttle": {"account_requests_per_second": 1000}}`, 200)
	if len(st.Rules) != 1 || st.Rules[0].Name != "lost-put" || st.Throttle == nil || st.Throttle.Account != 1000 || len(inj.Status().Rules) != 1 {
		t.Fatalf("after POST %+v", st)
	}
	for _, tc := range []struct {
		body, ctype string
		status      int
		want        string
	}{
		{`{"rules": [{"when": {"probability": 2}, "then": {"error": "ServerBusy"}}]}`, "application/json", 400, "rules[0].when.probability: 2: want a number in (0, 1]"},
		{`{"rules": [{"name": "lost-put", "then": {"delay": "1ms"}}]}`, "application/json", 409, `is the name of a rule already added`},
		{`{"seed": 9}`, "application/json", 400, "seed: the seed is set at start-up, by the -faults file"},
		{`{"rules": []}`, "text/plain", 415, "send the rules as JSON, with Content-Type: application/json"},
		{`{"rules": []}`, "", 415, "Content-Type: application/json"},
		{`{"rules": [` + strings.Repeat(" ", maxFaultsBody) + `]}`, "application/json", 413, "the body is over 1 MiB"},
	} {
		hdr := map[string]string{}
		if tc.ctype != "" {
			hdr["Content-Type"] = tc.ctype
		}
		status, out := call(t, h, "POST", "/_azq/faults", strings.NewReader(tc.body), hdr)
		if status != tc.status || !strings.Contains(errorOf(t, out), tc.want) {
			t.Errorf("POST %.80s: %d %s, want %d …%s…", tc.body, status, out, tc.status, tc.want)
		}
	}
	if len(inj.Status().Rules) != 1 {
		t.Fatalf("refused POSTs changed the rules: %+v", inj.Status().Rules)
	}
	status, out := call(t, h, "PUT", "/_azq/faults", nil, nil)
	if status != 405 || errorOf(t, out) != "/_azq/faults takes GET, POST or DELETE" {
		t.Fatalf("PUT: %d %s", status, out)
	}
	if status, out := call(t, h, "GET", "/_azq/faults/x", nil, nil); status != 404 || errorOf(t, out) != "no such endpoint; see GET, POST and DELETE /_azq/faults" {
		t.Fatalf("GET /_azq/faults/x: %d %s", status, out)
	}
	if st := faultsCall(t, h, "DELETE", "/_azq/faults?rule=nosuch", "", 404); st.Error != "rule: there is no rule named nosuch" {
		t.Fatalf("DELETE ?rule=nosuch: %+v", st)
	}
	if st := faultsCall(t, h, "DELETE", "/_azq/faults", "", 200); len(st.Rules) != 0 || st.Throttle != nil {
		t.Fatalf("after DELETE %+v", st)
	}
}

// Without a hint, a POST that sets the seed is refused all the same.
func TestFaultsSeedWithoutHint(t *testing.T) {
	h, _ := newFaultsHandler(t, Hints{})
	if st := faultsCall(t, h, "POST", "/_azq/faults", `{"seed": 9}`, 400); st.Error != "seed: the seed is set at start-up" {
		t.Fatalf("%+v", st)
	}
}

// DELETE /_azq/faults removes every rule only without a query: an empty
// rule name, another parameter or two names are refused, and nothing is
// removed.
func TestFaultsDeleteNamesOneRule(t *testing.T) {
	h, _ := newFaultsHandler(t, Hints{})
	faultsCall(t, h, "POST", "/_azq/faults", `{"rules": [{"name": "a", "then": {"delay": "1ms"}}, {"name": "b", "then": {"delay": "1ms"}}],
		"throttle": {"account_requests_per_second": 1000}}`, 200)
	for _, tc := range []struct{ query, want string }{
		{"?rule=", "rule: empty; name the rule to remove; DELETE /_azq/faults without a query removes every rule and the throttle"},
		{"?rule", "rule: empty; name the rule to remove"},
		{"?Rule=a", `unknown parameter "Rule": name the rule to remove with ?rule=NAME`},
		{"?all=1", `unknown parameter "all"`},
		{"?rule=a&rule=b", "rule: give one rule name"},
		{"?rule=%zz", "the query: invalid URL escape"},
		{"?&", "rule: give one rule name"},
	} {
		st := faultsCall(t, h, "DELETE", "/_azq/faults"+tc.query, "", 400)
		if !strings.Contains(st.Error, tc.want) {
			t.Errorf("DELETE %s: %q, want …%s…", tc.query, st.Error, tc.want)
		}
	}
	if st := faultsCall(t, h, "GET", "/_azq/faults", "", 200); len(st.Rules) != 2 || st.Throttle == nil {
		t.Fatalf("a refused DELETE removed something: %+v", st)
	}
	if st := faultsCall(t, h, "DELETE", "/_azq/faults?rule=a", "", 200); len(st.Rules) != 1 || st.Rules[0].Name != "b" {
		t.Fatalf("after DELETE ?rule=a %+v", st)
	}
	if st := faultsCall(t, h, "DELETE", "/_azq/faults", "", 200); len(st.Rules) != 0 || st.Throttle != nil {
		t.Fatalf("after DELETE %+v", st)
	}
}
