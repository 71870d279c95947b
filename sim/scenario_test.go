package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"2d", 48 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"250ms", 250 * time.Millisecond},
		{"never", -1},
		{"-5s", -5 * time.Second},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got.D() != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		back, err := ParseDuration(got.String())
		if err != nil || back != got {
			t.Errorf("%q: String %q does not read back (%v, %v)", tc.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "d", "5", "1x", "xd", "1d-1h", "99999d", "1.5d"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", bad)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	var v struct{ A, B, C Duration }
	if err := json.Unmarshal([]byte(`{"A": "2d", "B": 1.5, "C": "never"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A.D() != 48*time.Hour || v.B.D() != 1500*time.Millisecond || v.C != Never {
		t.Errorf("got %+v", v)
	}
	b, _ := json.Marshal(v)
	if string(b) != `{"A":"2d","B":"1.5s","C":"never"}` {
		t.Errorf("marshalled as %s", b)
	}
}

func TestDistJSON(t *testing.T) {
	var v struct{ A, B Dist }
	if err := json.Unmarshal([]byte(`{"A": "2s", "B": {"kind": "lognormal", "median": "20s", "sigma": 1}}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A.Kind != "constant" || v.A.Value.D() != 2*time.Second || v.B.Kind != "lognormal" || v.B.Median.D() != 20*time.Second || v.B.Sigma != 1 {
		t.Errorf("got %+v", v)
	}
	if err := json.Unmarshal([]byte(`{"A": {"kind": "constant", "mean": "2s", "oops": 1}}`), &v); err == nil {
		t.Error("an unknown field in a distribution was accepted")
	}
}

// Every example scenario parses, and round-trips through JSON.
func TestExamplesParse(t *testing.T) {
	// The examples are the repository's (examples/sim), outside this
	// module: a copy of the module alone, in a module cache (go test
	// all in a module that uses sim), has none to check.
	if _, err := os.Stat("../go.work"); errors.Is(err, fs.ErrNotExist) {
		t.Skip("not in a clone of the repository: its examples/sim is not here")
	}
	files, err := filepath.Glob("../examples/sim/*.json")
	if err != nil || len(files) < 5 {
		t.Fatalf("examples: %v, %v", files, err)
	}
	for _, f := range files {
		sc, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		b, err := json.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: does not parse back: %v\n%s", f, err, b)
			continue
		}
		b2, _ := json.Marshal(again)
		if !bytes.Equal(b, b2) {
			t.Errorf("%s: round trip changed it:\n%s\n%s", f, b, b2)
		}
	}
}

const minimal = `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}],
	"consumers": [{"count": 1, "processing": "1s"}]}`

func TestParseDefaults(t *testing.T) {
	sc, err := Parse(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	f := sc.Consumers[0]
	if f.Model != "listener" || f.BatchSize != 16 || f.VisibilityTimeout.D() != 30*time.Second ||
		f.Listen.Kind != "poll" || f.Listen.Interval.D() != time.Second {
		t.Errorf("fleet defaults: %+v", f)
	}
	if !sc.Start.Equal(defaultStart) || sc.Sample.D() != 7*time.Second || sc.Price.PerTenThousand != 0.01 || sc.Price.Currency != "USD" {
		t.Errorf("scenario defaults: start %v sample %v price %+v", sc.Start, sc.Sample, sc.Price)
	}
}

// Bad scenarios are refused with ErrInvalidScenario and a message that
// names the problem.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not json", `{`, "line 1, column 2: unexpected EOF"},
		{"trailing text", minimal + `{}`, "text after"},
		{"unknown field", "{\n  \"duration\": \"1h\",\n  \"oops\": 1}", `line 3, column 3: json: unknown field "oops"`},
		{"syntax", "{\n  \"duration\": \"1h\",\n  \"producers\": [}\n}", "line 3, column 17: invalid character '}'"},
		{"wrong type", "{\n\"duration\": \"1h\", \"seed\": \"one\"}", "line 2, column "},
		{"no duration", `{"producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 1}]}`, "duration must be positive"},
		{"producer after the end", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}, "start": "2h"}], "consumers": [{"count": 1}]}`, "would put nothing"},
		{"bad arrival", `{"duration": "1h", "producers": [{"arrival": {"kind": "sometimes"}}], "consumers": [{"count": 1}]}`, `arrival.kind "sometimes"`},
		{"zero rate", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson"}}], "consumers": [{"count": 1}]}`, "arrival.rate"},
		{"bad window", `{"duration": "1h", "producers": [{"arrival": {"kind": "daily", "windows": [{"from": "9", "to": "17:00", "rate": 1}]}}], "consumers": [{"count": 1}]}`, "times of day"},
		{"no consumers", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}]}`, "no consumers"},
		{"batch", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 1, "batchSize": 33}]}`, "batchSize 33"},
		{"short lease", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 1, "visibilityTimeout": "500ms"}]}`, "visibilityTimeout"},
		{"probability", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 1, "crashProbability": 2}]}`, "crashProbability"},
		{"listen", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 1, "listen": {"kind": "shout"}}]}`, `listen.kind "shout"`},
		{"lognormal", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 1, "processing": {"kind": "lognormal"}}]}`, "positive median"},
		{"delay over ttl", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}, "ttl": "1m", "delay": "2m"}], "consumers": [{"count": 1}]}`, "shorter than ttl"},
		{"unbounded delay", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}, "delay": {"kind": "exponential", "mean": "1m"}}], "consumers": [{"count": 1}]}`, "needs max"},
		{"autoscale", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 5, "autoscale": {"perConsumer": 10, "max": 2}}]}`, "autoscale"},
		{"worker poll", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"model": "worker", "count": 1, "listen": {"kind": "poll"}}]}`, "worker model polls with back-off"},
		{"too many", `{"duration": "1h", "producers": [{"arrival": {"kind": "poisson", "rate": 1}}], "consumers": [{"count": 2000000}]}`, "the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.json))
			if !errors.Is(err, ErrInvalidScenario) {
				t.Fatalf("error %v, want ErrInvalidScenario", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestNoProducers: a scenario without producers is the idle-cost
// question, and runs: each polling listener makes one empty Get per
// interval, and nothing is put.
func TestNoProducers(t *testing.T) {
	sc, err := Parse(strings.NewReader(`{"duration": "1h", "consumers": [{"count": 3, "listen": {"kind": "poll", "interval": "10s"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages.Put != 0 || len(r.Violations) != 0 {
		t.Fatalf("put %d, violations %v", r.Messages.Put, r.Violations)
	}
	// 3 listeners, one Get every 10 s for an hour: 360 each, give or
	// take the first and the last.
	if got := r.Transactions.EmptyGets; got < 3*359 || got > 3*361 {
		t.Errorf("empty Gets %d, want about %d", got, 3*360)
	}
}

func TestWith(t *testing.T) {
	sc, err := Parse(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	got, err := sc.With("consumers.0.visibilityTimeout", json.RawMessage(`"5m"`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Consumers[0].VisibilityTimeout.D() != 5*time.Minute || sc.Consumers[0].VisibilityTimeout.D() != 30*time.Second {
		t.Errorf("With changed %v and left %v", got.Consumers[0].VisibilityTimeout, sc.Consumers[0].VisibilityTimeout)
	}
	// A field left out of the JSON (a nil pointer) can be set too.
	got, err = sc.With("consumers.0.retryDelay", json.RawMessage(`"10s"`))
	if err != nil || got.Consumers[0].RetryDelay == nil || got.Consumers[0].RetryDelay.D() != 10*time.Second {
		t.Errorf("retryDelay: %v, %v", got, err)
	}
	for _, bad := range []string{"consumers.5.count", "consumers.x.count", "consumers.0.nosuch", "duration.x"} {
		if _, err := sc.With(bad, json.RawMessage(`1`)); !errors.Is(err, ErrInvalidScenario) {
			t.Errorf("With(%q): %v, want ErrInvalidScenario", bad, err)
		}
	}
	if _, err := sc.With("consumers.0.count", json.RawMessage(`-1`)); !errors.Is(err, ErrInvalidScenario) {
		t.Errorf("a bad value was accepted: %v", err)
	}
}

// TestWithErrorsNameTheParameter: With's errors are *ParameterErrors that
// say what is wrong with the value in JSON's words, and never point at a
// line or column of the text With makes, which no one wrote.
func TestWithErrorsNameTheParameter(t *testing.T) {
	sc, err := Parse(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, value, want string
	}{
		{"consumers.0.nosuch", `1`, `unknown field "nosuch"`},
		{"consumers.0.count", `"x"`, "want a whole number, not a string"},
		{"consumers.0.count", `2.5`, "want a whole number, not the number 2.5"},
		{"consumers.0.count", `[1]`, "want a whole number, not a list"},
		{"producers", `{}`, "want a list, not an object"},
		{"consumers.0.count", `-1`, "count must be at least 1"},
		{"consumers.0.count", `{`, "not a JSON value"},
	} {
		_, err := sc.With(c.path, json.RawMessage(c.value))
		var pe *ParameterError
		if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidScenario) {
			t.Errorf("With(%s, %s): %v, want a *ParameterError wrapping ErrInvalidScenario", c.path, c.value, err)
			continue
		}
		if pe.Path != c.path || string(pe.Value) != c.value || !strings.Contains(pe.Err.Error(), c.want) {
			t.Errorf("With(%s, %s): %+v, want the path, the value and %q", c.path, c.value, pe, c.want)
		}
		if strings.Contains(err.Error(), "column") || strings.Contains(err.Error(), "line ") {
			t.Errorf("With(%s, %s): %v points into With's own text", c.path, c.value, err)
		}
	}
}

// TestRunSweepChecksEveryValueFirst: a bad value anywhere in a sweep stops
// it before the first run.
func TestRunSweepChecksEveryValueFirst(t *testing.T) {
	sc, err := Parse(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	sc.Sweep = &Sweep{Parameter: "consumers.0.count", Values: []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`2`), json.RawMessage(`"x"`)}}
	runs := 0
	res, err := RunSweep(context.Background(), sc, Options{}, func(int, *Report) { runs++ })
	var pe *ParameterError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "sweep value 3 of 3") {
		t.Errorf("RunSweep: %v, want a *ParameterError for value 3 of 3", err)
	}
	if runs != 0 || res != nil {
		t.Errorf("RunSweep ran %d values (%v) before refusing the third", runs, res)
	}
}

// FuzzParse: whatever the input, Parse does not panic, and what it accepts
// it writes out in a form that reads back the same.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/sim/*.json")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(minimal))
	f.Add([]byte(`{"duration": 3600, "producers": [{"arrival": {"kind": "burst", "size": 3, "every": "1m"}}], "consumers": [{"count": 1, "processing": {"kind": "empirical", "values": ["1s", 2], "weights": [1, 0]}}]}`))
	f.Add([]byte(`{"duration": "1d", "producers": [{"arrival": {"kind": "daily", "windows": [{"from": "23:00", "to": "24:00", "rate": 0}]}}], "consumers": [{"count": 1, "listen": {"kind": "backoff", "min": "1ms", "max": "1ms"}}]}`))
	f.Add([]byte(`{"duration": "-1h"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := Parse(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrInvalidScenario) {
				t.Fatalf("error %v is not ErrInvalidScenario", err)
			}
			return
		}
		out, err := json.Marshal(sc)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Parse(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("accepted %s but not its own output %s: %v", b, out, err)
		}
		out2, _ := json.Marshal(again)
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed\n%s\nto\n%s", out, out2)
		}
	})
}
