package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseExample(t *testing.T) {
	c, err := Parse([]byte(`{
	  "seed": 7,
	  "rules": [
	    {"name": "busy-puts",
	     "when": {"operations": ["PutMessage"], "queue": "orders-*", "every": 3, "times": 2},
	     "then": {"error": "ServerBusy", "reason": "operations"}},
	    {"name": "lost-delete",
	     "when": {"operations": ["DeleteMessage"], "probability": 0.1, "after": "1m", "for": "10m"},
	     "then": {"applied": true, "network": "reset"}},
	    {"when": {"from": "2030-01-01T00:00:00Z", "until": "2030-01-02T00:00:00Z"},
	     "then": {"delay": "20ms", "max_delay": "80ms"}},
	    {"then": {"error": "QueueBeingDeleted", "status": 409, "message": "going"}}
	  ],
	  "throttle": {"queue_messages_per_second": 2000, "account_requests_per_second": 20000}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Seed: 7, Rules: []Rule{
		{Name: "busy-puts", When: When{Operations: []string{"PutMessage"}, Queue: "orders-*", Every: 3, Times: 2},
			Then: Then{Error: "ServerBusy", Reason: ReasonOperations}},
		{Name: "lost-delete", When: When{Operations: []string{"DeleteMessage"}, Probability: 0.1, After: time.Minute, For: 10 * time.Minute},
			Then: Then{Applied: true, Network: NetworkReset}},
		{When: When{From: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)},
			Then: Then{Delay: 20 * time.Millisecond, MaxDelay: 80 * time.Millisecond}},
		{Then: Then{Error: "QueueBeingDeleted", Status: 409, Message: "going"}},
	}, Throttle: &AzureTargets}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	// What MarshalJSON writes, Parse reads back the same.
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b)
	if err != nil || !reflect.DeepEqual(again, c) {
		t.Fatalf("round trip: %v\n%s\n%+v", err, b, again)
	}
}

// Every field is checked, and the error names it.
func TestParseNamesTheField(t *testing.T) {
	rule := func(when, then string) string {
		return `{"rules": [{"then": {"delay": "1ms"}}, {"when": {` + when + `}, "then": {` + then + `}}]}`
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"rules": [`, `line 1, column 12: the JSON text ends early`},
		{`[]`, `want an object, got a JSON array`},
		{`{"rule": []}`, `unknown field "rule"; did you mean "rules"?`},
		{`{"seed": -1}`, `seed: want a number, got a JSON number -1`},
		{`{"rules": {}}`, `rules: want an array, got a JSON object`},
		{`{"rules": [{"when": {}, "then": {"delay": "1ms"}, "extra": 1}]}`, `rules[0]: unknown field "extra"; the fields are name, when, then`},
		{rule(`"probabilty": 0.5`, `"error": "ServerBusy"`), `rules[1].when: unknown field "probabilty"; did you mean "probability"?`},
		// Field names are matched exactly, case and all.
		{`{"Seed": 1}`, `unknown field "Seed"; did you mean "seed"?`},
		{`{"rules": [{"Then": {"delay": "1ms"}}]}`, `rules[0]: unknown field "Then"; did you mean "then"?`},
		{rule(`"Operations": ["PutMessage"]`, `"error": "ServerBusy"`), `rules[1].when: unknown field "Operations"; did you mean "operations"?`},
		{rule(``, `"error": "Teapot", "Status": 418`), `rules[1].then: unknown field "Status"; did you mean "status"?`},
		{rule(``, `"error": "ServerBusy", "maxDelay": "1s"`), `rules[1].then: unknown field "maxDelay"; did you mean "max_delay"?`},
		{`{"throttle": {"Queue_Messages_Per_Second": 5}}`, `throttle: unknown field "Queue_Messages_Per_Second"; did you mean "queue_messages_per_second"?`},
		{`{"rules": [{"when": {"times": 1, "TIMES": 2}, "then": {"delay": "1ms"}}]}`, `rules[0].when: unknown field "TIMES"; did you mean "times"?`},
		{rule(`"operations": ["PutMessages"]`, `"error": "ServerBusy"`), `rules[1].when.operations[0]: "PutMessages" is not an operation; did you mean PutMessage? want one of ListQueues,`},
		{rule(`"operations": "PutMessage"`, `"error": "ServerBusy"`), `rules[1].when.operations: want an array, got a JSON string`},
		{rule(`"queue": "Orders"`, `"error": "ServerBusy"`), `rules[1].when.queue: "Orders": queue names have lower-case letters, digits and '-' only`},
		{rule(`"queue": "a*b*"`, `"error": "ServerBusy"`), `rules[1].when.queue: "a*b*": want a queue name, or a prefix ending in *`},
		{rule(`"account": "ab"`, `"error": "ServerBusy"`), `rules[1].when.account: "ab": an account name has 3 to 24 characters`},
		{rule(`"account": "Dev"`, `"error": "ServerBusy"`), `rules[1].when.account: "Dev": account names have lower-case letters and digits only`},
		{rule(`"every": -2`, `"error": "ServerBusy"`), `rules[1].when.every: -2: want 1 or more`},
		{rule(`"every": 1.5`, `"error": "ServerBusy"`), `rules[1].when.every: want a number, got a JSON number 1.5`},
		{rule(`"probability": 1.5`, `"error": "ServerBusy"`), `rules[1].when.probability: 1.5: want a number in (0, 1]`},
		{rule(`"probability": -0.1`, `"error": "ServerBusy"`), `rules[1].when.probability: -0.1: want a number in (0, 1]`},
		{rule(`"probability": "10%"`, `"error": "ServerBusy"`), `rules[1].when.probability: want a number, got a JSON string`},
		{rule(`"times": -1`, `"error": "ServerBusy"`), `rules[1].when.times: -1: want 1 or more`},
		{rule(`"from": "tomorrow"`, `"error": "ServerBusy"`), `rules[1].when.from: "tomorrow": want an RFC 3339 time`},
		{rule(`"until": "2030-01-01"`, `"error": "ServerBusy"`), `rules[1].when.until: "2030-01-01": want an RFC 3339 time`},
		{rule(`"from": "2030-01-02T00:00:00Z", "until": "2030-01-01T00:00:00Z"`, `"error": "ServerBusy"`), `rules[1].when.until: 2030-01-01T00:00:00Z is not after from`},
		{rule(`"after": "soon"`, `"error": "ServerBusy"`), `rules[1].when.after: "soon": want a duration such as 250ms or 2s`},
		{rule(`"after": "-1s"`, `"error": "ServerBusy"`), `rules[1].when.after: -1s: want a positive duration`},
		{rule(`"for": "-1s"`, `"error": "ServerBusy"`), `rules[1].when.for: -1s: want a positive duration`},
		{rule(`"from": "2030-01-01T00:00:00Z", "after": "1s"`, `"error": "ServerBusy"`), `rules[1].when.after: give from or after, not both`},
		{rule(`"until": "2030-01-01T00:00:00Z", "for": "1s"`, `"error": "ServerBusy"`), `rules[1].when.for: give until or for, not both`},
		{rule(``, ``), `rules[1].then: a rule needs a result: error, network, or delay`},
		{rule(``, `"error": "Server Busy"`), `rules[1].then.error: "Server Busy": want an Azure error code`},
		{rule(``, `"error": "QueueBeingDeleted"`), `rules[1].then.status: missing: give the HTTP status Azure answers QueueBeingDeleted with`},
		{rule(``, `"error": "ServerBusy", "status": 500`), `rules[1].then.status: 500: Azure answers ServerBusy with 503`},
		{rule(``, `"error": "Teapot", "status": 418`), ``},
		{rule(``, `"error": "Weird", "status": 200`), `rules[1].then.status: 200: want an error status, 400 to 599`},
		{rule(``, `"error": "InternalError", "reason": "operations"`), `rules[1].then.reason: only ServerBusy has a reason`},
		{rule(``, `"error": "ServerBusy", "reason": "tired"`), `rules[1].then.reason: "tired": want busy, operations, ingress or egress`},
		{rule(``, `"error": "ServerBusy", "network": "reset"`), `rules[1].then.network: give error or network, not both`},
		{rule(``, `"network": "unplug"`), `rules[1].then.network: "unplug": want close, reset or truncate`},
		{rule(``, `"delay": "1 second"`), `rules[1].then.delay: "1 second": want a duration`},
		{rule(``, `"delay": "2h"`), `rules[1].then.delay: 2h0m0s: at most 10m0s`},
		{rule(``, `"delay": "2s", "max_delay": "1s"`), `rules[1].then.max_delay: 1s is less than delay (2s)`},
		{rule(``, `"delay": "1s", "applied": true`), `rules[1].then.applied: an applied operation needs an error or a network failure`},
		{rule(``, `"delay": "1s", "status": 500`), `rules[1].then.status: a status needs an error code`},
		{rule(``, `"delay": "1s", "message": "x"`), `rules[1].then.message: a message needs an error code`},
		{rule(``, `"applied": "yes", "error": "InternalError"`), `rules[1].then.applied: want true or false, got a JSON string`},
		{`{"rules": [{"name": "a b", "then": {"delay": "1ms"}}]}`, `rules[0].name: "a b": want 1 to 64 letters`},
		{`{"rules": [{"name": "x", "then": {"delay": "1ms"}}, {"name": "x", "then": {"delay": "1ms"}}]}`, `rules[1].name: "x" is the name of rules[0] too`},
		{`{"throttle": {"queue_messages_per_second": -5}}`, `throttle.queue_messages_per_second: -5: want a rate from 0`},
		{`{"throttle": {"account_requests": 5}}`, `throttle: unknown field "account_requests"; did you mean "account_requests_per_second"?`},
		{`{"rules": []} {}`, `text after the JSON value`},
	} {
		_, err := Parse([]byte(tc.doc))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.doc, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s…", tc.doc, err, tc.want)
		}
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(file, []byte(`{"rules": [{"when": {"times": -1}, "then": {"error": "InternalError"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(file)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.File != file || fe.Field != "rules[0].when.times" || !strings.HasPrefix(err.Error(), file+": rules[0].when.times: -1") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// Load refuses what is not a regular file of at most 1 MiB before
// reading it: /dev/zero and a named pipe never end (the pipe is tested in
// config_unix_test.go), a directory is not rules, and a long file is not
// read to be refused.
func TestLoadRefusesWhatIsNotARulesFile(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.json")
	if err := os.WriteFile(long, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(long, 10<<20); err != nil { // sparse: 10 MB of holes
		t.Fatal(err)
	}
	cases := []struct{ file, want string }{
		{dir, dir + ": a directory, not a file"},
		{long, long + ": longer than 1048576 bytes (1 MiB)"},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct{ file, want string }{"/dev/zero", "/dev/zero: a device, not a regular file"})
	}
	for _, tc := range cases {
		_, err := Load(tc.file)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.File != tc.file || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want %s…", tc.file, err, tc.want)
		}
	}
	// A file of exactly 1 MiB is read, and Parse judges it.
	exact := filepath.Join(dir, "exact.json")
	doc := append([]byte(`{"rules": []}`), bytes.Repeat([]byte(" "), maxConfig-13)...)
	if err := os.WriteFile(exact, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(exact); err != nil {
		t.Fatalf("a rules file of 1 MiB: %v", err)
	}
}

// Rules built in Go are checked as the file's are, relative to the
// rules passed.
func TestAddChecksRules(t *testing.T) {
	in, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = in.Add(Rule{Then: Then{Delay: time.Millisecond}}, Rule{Then: Then{Error: "ServerBusy", Status: 500}})
	if err == nil || err.Error() != "rules[1].then.status: 500: Azure answers ServerBusy with 503" {
		t.Fatalf("err = %v", err)
	}
	if len(in.Status().Rules) != 0 {
		t.Fatal("a rule of a refused batch was added")
	}
	if err := in.Add(Rule{Name: "x", Then: Then{Delay: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := in.Add(Rule{Name: "x", Then: Then{Delay: 1}}); err == nil || !strings.Contains(err.Error(), `"x" is the name of a rule already added`) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, err := New(Options{Config: Config{Throttle: &Throttle{AccountRequestsPerSecond: -1}}}); err == nil ||
		!strings.HasPrefix(err.Error(), "throttle.account_requests_per_second: -1") {
		t.Fatalf("throttle: %v", err)
	}
}

// Status's JSON, as the admin endpoint shows it, carries each rule in the
// rules file's form beside its counters, and the throttle in its form.
func TestStatusJSON(t *testing.T) {
	rules := []Rule{
		{Name: "busy-puts", When: When{Operations: []string{"PutMessage"}, Queue: "orders-*", Every: 3, Times: 1},
			Then: Then{Error: "ServerBusy", Reason: ReasonOperations}},
		{Name: "lost-delete", When: When{Operations: []string{"DeleteMessage"}, Probability: 0.1, After: time.Minute, For: 10 * time.Minute},
			Then: Then{Applied: true, Network: NetworkReset, Delay: 20 * time.Millisecond, MaxDelay: 80 * time.Millisecond}},
	}
	in, err := New(Options{Config: Config{Seed: 7, Rules: rules, Throttle: &AzureTargets}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		in.Decide(put)
	}
	b, err := json.Marshal(in.Status())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Seed      uint64
		Rules     []map[string]json.RawMessage
		Throttle  json.RawMessage
		Throttled int64
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Seed != 7 || got.Throttled != 0 || len(got.Rules) != len(rules) {
		t.Fatalf("status %s", b)
	}
	for i, fields := range got.Rules {
		counters := map[string]string{}
		for _, k := range []string{"added", "matches", "hits", "exhausted"} {
			counters[k] = string(fields[k])
			delete(fields, k)
		}
		want := map[string]string{"matches": "3", "hits": "1", "exhausted": "true"}
		if i == 1 {
			want = map[string]string{"matches": "0", "hits": "0", "exhausted": ""}
		}
		if counters["added"] == "" {
			t.Errorf("rules[%d] has no added time: %s", i, b)
		}
		delete(counters, "added")
		if !reflect.DeepEqual(counters, want) {
			t.Errorf("rules[%d] counters %v, want %v", i, counters, want)
		}
		rb, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := ParseRule(rb); err != nil || !reflect.DeepEqual(r, rules[i]) {
			t.Errorf("rules[%d] reads back as %+v (%v), want %+v", i, r, err, rules[i])
		}
	}
	c, err := Parse([]byte(`{"rules": [], "throttle": ` + string(got.Throttle) + `}`))
	if err != nil || !reflect.DeepEqual(c.Throttle, &AzureTargets) {
		t.Fatalf("throttle %s reads back as %+v (%v)", got.Throttle, c.Throttle, err)
	}
}
