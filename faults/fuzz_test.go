package faults

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics; it accepts a document or says which
// field is wrong; what it accepts, it writes back as a document it reads
// the same, and an Injector takes it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"seed": 7, "rules": []}`,
		`{"rules": [{"name": "busy", "when": {"operations": ["PutMessage"], "queue": "orders-*", "every": 3, "times": 2}, "then": {"error": "ServerBusy", "reason": "operations"}}]}`,
		`{"rules": [{"when": {"probability": 0.1, "after": "1m", "for": "10m"}, "then": {"applied": true, "network": "reset"}}]}`,
		`{"rules": [{"when": {"from": "2030-01-01T00:00:00Z", "until": "2030-01-02T00:00:00Z"}, "then": {"delay": "20ms", "max_delay": "80ms"}}]}`,
		`{"rules": [{"then": {"error": "QueueBeingDeleted", "status": 409, "message": "going"}}]}`,
		`{"rules": [{"then": {"network": "truncate"}}], "throttle": {"queue_messages_per_second": 5, "account_requests_per_second": 20}}`,
		`{"rules": [{"when": {"probability": 1e309}, "then": {"delay": "1ms"}}]}`,
		`{"rules": [{"when": {"every": 9223372036854775807}, "then": {"delay": "1ms"}}]}`,
		`{"rules": [{"then": {"delay": "1ms"}}, {"then": {"delay": "1ms"}}]}`,
		`{"Seed": 1, "RULES": [{"When": {"Times": 1}, "THEN": {"Delay": "1ms"}}]}`,
		`{"rules": [{"when": {"times": 1, "Times": 2}, "then": {"delay": "1ms"}}], "throttle": {"Queue_messages_per_second": 1}}`,
		`{"rules": [{"name": "x", "then": {"dealy": "1ms"}}]}`,
		`{"rules": [`,
		`[1, 2]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse of what Marshal wrote: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(normalize(again), normalize(c)) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, again)
		}
		in, err := New(Options{Config: c})
		if err != nil {
			t.Fatalf("New refused what Parse accepted: %v", err)
		}
		in.Decide(Request{Operation: "PutMessage", Account: "devstoreaccount1", Queue: "orders-1", Messages: 1})
	})
}

// normalize makes empty and nil operation lists alike and drops the
// monotonic clock and zone differences of times, which JSON does not keep.
func normalize(c Config) Config {
	for i := range c.Rules {
		w := &c.Rules[i].When
		if len(w.Operations) == 0 {
			w.Operations = nil
		}
		w.From, w.Until = w.From.UTC(), w.Until.UTC()
	}
	return c
}
