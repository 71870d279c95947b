package faults

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

func newInjector(t *testing.T, clk clock.Clock, seed uint64, rules ...Rule) *Injector {
	t.Helper()
	in, err := New(Options{Clock: clk, Config: Config{Seed: seed, Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

var put = Request{Operation: "PutMessage", Account: "devstoreaccount1", Queue: "orders-eu", Messages: 1}

func TestEveryAndTimes(t *testing.T) {
	in := newInjector(t, nil, 0, Rule{Name: "third", When: When{Every: 3, Times: 2}, Then: Then{Error: CodeInternalError}})
	var fired []int
	for i := 1; i <= 12; i++ {
		if d := in.Decide(put); d.Fails() {
			fired = append(fired, i)
		}
	}
	if !reflect.DeepEqual(fired, []int{3, 6}) {
		t.Fatalf("fired on %v, want [3 6]", fired)
	}
	st := in.Status().Rules[0]
	if st.Hits != 2 || st.Matches != 6 || !st.Exhausted || in.Hits("third") != 2 {
		t.Fatalf("status %+v", st)
	}
}

func TestConditions(t *testing.T) {
	rule := func(w When) *Injector {
		return newInjector(t, nil, 0, Rule{When: w, Then: Then{Error: CodeInternalError}})
	}
	for _, tc := range []struct {
		name string
		when When
		req  Request
		want bool
	}{
		{"any", When{}, put, true},
		{"operation listed", When{Operations: []string{"GetMessages", "PutMessage"}}, put, true},
		{"operation not listed", When{Operations: []string{"GetMessages"}}, put, false},
		{"queue", When{Queue: "orders-eu"}, put, true},
		{"other queue", When{Queue: "orders"}, put, false},
		{"queue prefix", When{Queue: "orders-*"}, put, true},
		{"other prefix", When{Queue: "order-*"}, put, false},
		{"any queue", When{Queue: "*"}, put, true},
		{"queue rule, service operation", When{Queue: "*"}, Request{Operation: "ListQueues", Account: "devstoreaccount1"}, false},
		{"account", When{Account: "devstoreaccount1"}, put, true},
		{"other account", When{Account: "other"}, put, false},
	} {
		if got := rule(tc.when).Decide(tc.req).Fails(); got != tc.want {
			t.Errorf("%s: fails = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The same seed and requests give the same faults; another seed other
// ones; the share of hits is near the probability.
func TestProbabilityFollowsTheSeed(t *testing.T) {
	run := func(seed uint64) []bool {
		in := newInjector(t, nil, seed, Rule{When: When{Probability: 0.1}, Then: Then{Network: NetworkReset}})
		out := make([]bool, 2000)
		for i := range out {
			out[i] = in.Decide(put).Fails()
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different faults")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("another seed gave the same faults")
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	if n < 140 || n > 260 {
		t.Fatalf("%d hits of 2000 at probability 0.1", n)
	}
}

// A rule added later does not change the choices of the rules before it.
func TestRulesDrawIndependently(t *testing.T) {
	first := Rule{Name: "a", When: When{Probability: 0.5, Operations: []string{"PutMessage"}}, Then: Then{Error: CodeInternalError}}
	other := Rule{Name: "b", When: When{Probability: 0.5, Operations: []string{"GetMessages"}}, Then: Then{Error: CodeInternalError}}
	one := newInjector(t, nil, 9, first)
	two := newInjector(t, nil, 9, first, other)
	get := Request{Operation: "GetMessages", Account: "devstoreaccount1", Queue: "q", Messages: 1}
	for i := 0; i < 200; i++ {
		two.Decide(get)
		if one.Decide(put).Fails() != two.Decide(put).Fails() {
			t.Fatalf("request %d: rule a decided differently beside rule b", i)
		}
	}
}

func TestWindowOnTheInjectorsClock(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	in := newInjector(t, mock, 0,
		Rule{Name: "relative", When: When{After: time.Minute, For: time.Minute}, Then: Then{Error: CodeInternalError}},
		Rule{Name: "absolute", When: When{From: time.Date(2030, 1, 1, 0, 5, 0, 0, time.UTC), Until: time.Date(2030, 1, 1, 0, 6, 0, 0, time.UTC)},
			Then: Then{Error: CodeOperationTimedOut}})
	at := func(after time.Duration) string {
		mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(after))
		return in.Decide(put).Rule
	}
	for _, tc := range []struct {
		at   time.Duration
		want string
	}{
		{0, ""}, {59 * time.Second, ""}, {time.Minute, "relative"}, {119 * time.Second, "relative"}, {2 * time.Minute, ""},
		{5*time.Minute - 1, ""}, {5 * time.Minute, "absolute"}, {6 * time.Minute, ""},
	} {
		if got := at(tc.at); got != tc.want {
			t.Errorf("at +%v: rule %q, want %q", tc.at, got, tc.want)
		}
	}
}

// Delay-only rules add up and let the search go on; the first rule that
// fails the request ends it, and the rules after it are not tried.
func TestFirstFailureWinsDelaysAdd(t *testing.T) {
	in := newInjector(t, nil, 0,
		Rule{Name: "slow", Then: Then{Delay: 10 * time.Millisecond}},
		Rule{Name: "slower", Then: Then{Delay: 20 * time.Millisecond, MaxDelay: 30 * time.Millisecond}},
		Rule{Name: "lost", When: When{Operations: []string{"PutMessage"}}, Then: Then{Applied: true, Error: CodeOperationTimedOut}},
		Rule{Name: "never", Then: Then{Network: NetworkClose}},
	)
	for i := 0; i < 50; i++ {
		d := in.Decide(put)
		if d.Delay < 30*time.Millisecond || d.Delay > 40*time.Millisecond || d.Rule != "lost" || !d.Applied || d.Network != "" ||
			!reflect.DeepEqual(d.Error, &azq.Error{Code: CodeOperationTimedOut, StatusCode: 500, Message: "The operation could not be completed within the permitted time."}) {
			t.Fatalf("decision %+v", d)
		}
	}
	if h := in.Hits("never"); h != 0 {
		t.Fatalf("a rule after the failing one was hit %d times", h)
	}
	if d := in.Decide(Request{Operation: "GetMessages", Queue: "q", Messages: 1}); d.Rule != "never" || d.Network != NetworkClose || d.Error != nil {
		t.Fatalf("decision %+v", d)
	}
}

func TestAzureErrors(t *testing.T) {
	for _, tc := range []struct {
		then Then
		want azq.Error
	}{
		{Then{Error: "ServerBusy"}, azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "The server is currently unable to receive requests. Please retry your request."}},
		{Then{Error: "ServerBusy", Reason: ReasonOperations}, azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "Operations per second is over the account limit."}},
		{Then{Error: "ServerBusy", Reason: ReasonIngress}, azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "Ingress is over the account limit."}},
		{Then{Error: "ServerBusy", Reason: ReasonEgress}, azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "Egress is over the account limit."}},
		{Then{Error: "InternalError"}, azq.Error{Code: "InternalError", StatusCode: 500, Message: "Server encountered an internal error. Please try again after some time."}},
		{Then{Error: "OperationTimedOut"}, azq.Error{Code: "OperationTimedOut", StatusCode: 500, Message: "The operation could not be completed within the permitted time."}},
		{Then{Error: "InternalError", Message: "disk on fire"}, azq.Error{Code: "InternalError", StatusCode: 500, Message: "disk on fire"}},
		{Then{Error: "QueueBeingDeleted", Status: http.StatusConflict}, azq.Error{Code: "QueueBeingDeleted", StatusCode: 409}},
	} {
		if got := tc.then.AzureError(); !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%+v: got %+v, want %+v", tc.then, *got, tc.want)
		}
	}
}

func TestRemoveAndClear(t *testing.T) {
	in := newInjector(t, nil, 0, Rule{Then: Then{Error: CodeInternalError}}, Rule{Name: "b", Then: Then{Network: NetworkReset}})
	if names := []string{in.Status().Rules[0].Name, in.Status().Rules[1].Name}; !reflect.DeepEqual(names, []string{"rule-1", "b"}) {
		t.Fatalf("names %v", names)
	}
	if !in.Remove("rule-1") || in.Remove("rule-1") {
		t.Fatal("Remove")
	}
	if d := in.Decide(put); d.Rule != "b" {
		t.Fatalf("after Remove: %+v", d)
	}
	in.Clear()
	if d := in.Decide(put); d.Fails() || d.Delay != 0 {
		t.Fatalf("after Clear: %+v", d)
	}
}

func TestZeroInjectorDecidesNothing(t *testing.T) {
	in := newInjector(t, nil, 0)
	if d := in.Decide(put); d != (Decision{}) {
		t.Fatalf("%+v", d)
	}
}

func TestDescriptions(t *testing.T) {
	for _, tc := range []struct {
		rule       Rule
		when, then string
	}{
		{Rule{Then: Then{Error: CodeServerBusy, Reason: ReasonOperations}},
			"every operation", "503 ServerBusy (Operations per second is over the account limit.)"},
		{Rule{When: When{Operations: []string{"PutMessage", "GetMessages"}, Queue: "orders-*", Account: "acct", Every: 3, Probability: 0.1, Times: 2, After: time.Minute, For: time.Hour},
			Then: Then{Applied: true, Network: NetworkReset, Delay: 20 * time.Millisecond, MaxDelay: 80 * time.Millisecond}},
			"PutMessage, GetMessages on queues orders-* of account acct · every 3rd · 10% · at most 2 times · after 1m0s · for 1h0m0s",
			"apply the operation, then wait 20ms–80ms, then reset the connection"},
		{Rule{When: When{Queue: "jobs", Every: 12}, Then: Then{Network: NetworkTruncate}},
			"every operation on queue jobs · every 12th", "apply the operation, then cut the answer off half way"},
	} {
		if got := tc.rule.When.String(); got != tc.when {
			t.Errorf("When: %q, want %q", got, tc.when)
		}
		if got := tc.rule.Then.String(); got != tc.then {
			t.Errorf("Then: %q, want %q", got, tc.then)
		}
	}
}

// The counts of requests throttled and of rule hits never go back while
// the Injector lives: replacing or removing the throttle, removing a rule
// or clearing them all keeps what was counted.
func TestCountsNeverGoBack(t *testing.T) {
	in, _ := newThrottled(t, Throttle{QueueMessagesPerSecond: 1})
	in.Decide(put)
	for i := 0; i < 3; i++ {
		if !in.Decide(put).Throttled {
			t.Fatalf("put %d passed", i)
		}
	}
	if err := in.SetThrottle(&Throttle{QueueMessagesPerSecond: 1}); err != nil {
		t.Fatal(err)
	}
	if st := in.Status(); st.Throttled != 3 {
		t.Fatalf("after the throttle was replaced, Throttled = %d, want 3", st.Throttled)
	}
	in.Decide(put)
	in.Decide(put) // refused by the new throttle
	in.SetThrottle(nil)
	if st, tot := in.Status(), in.Totals(); st.Throttled != 4 || tot.Throttled != 4 {
		t.Fatalf("after the throttle was turned off, Status().Throttled = %d, Totals().Throttled = %d, want 4", st.Throttled, tot.Throttled)
	}

	slow := Rule{Name: "slow", Then: Then{Delay: time.Millisecond}}
	if err := in.Add(slow, Rule{Name: "other", When: When{Operations: []string{"ListQueues"}}, Then: Then{Delay: 1}}); err != nil {
		t.Fatal(err)
	}
	in.Decide(put)
	in.Decide(put)
	in.Remove("slow")
	if err := in.Add(slow); err != nil {
		t.Fatal(err)
	}
	in.Decide(put)
	want := map[string]int64{"slow": 3, "other": 0}
	if got := in.Totals().Hits; !reflect.DeepEqual(got, want) {
		t.Fatalf("Totals().Hits = %v, want %v", got, want)
	}
	if got := in.Hits("slow"); got != 1 {
		t.Fatalf("the rule added again has %d hits of its own, want 1", got)
	}
	in.Clear()
	if got := in.Totals(); !reflect.DeepEqual(got.Hits, map[string]int64{"slow": 3}) || got.Throttled != 4 {
		t.Fatalf("after Clear, Totals() = %+v", got)
	}
	if st := in.Status(); len(st.Rules) != 0 || st.Throttled != 4 {
		t.Fatalf("after Clear, Status() = %+v", st)
	}
}
