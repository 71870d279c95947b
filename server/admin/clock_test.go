package admin

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

func TestParseAdvance(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"168h": 168 * time.Hour, "1h30m": 90 * time.Minute, "3600": time.Hour, "0.5": 500 * time.Millisecond, "0": 0,
	} {
		if got, err := parseAdvance(in); err != nil || got != want {
			t.Errorf("parseAdvance(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1s", "-5", "NaN", "1e300", "7d", "soon"} {
		if got, err := parseAdvance(in); err == nil {
			t.Errorf("parseAdvance(%q) = %v, want an error", in, got)
		}
	}
}

// Advance and Set, as a web view's buttons call them, only move the clock
// forward, and say why not with errors errors.Is knows.
func TestClockMoves(t *testing.T) {
	mock := clock.NewMock()
	c := NewClock(mock, nil)
	if _, err := c.Advance(-time.Second); !errors.Is(err, ErrClockBackward) || !mock.Now().Equal(time.Unix(0, 0)) {
		t.Fatalf("advance by -1s: %v, clock at %v", err, mock.Now())
	}
	if now, err := c.Advance(time.Hour); err != nil || !now.Equal(time.Unix(3600, 0)) || now.Location() != time.UTC {
		t.Fatalf("advance by 1h: %v %v", now, err)
	}
	if now, err := c.Set(time.Unix(60, 0)); !errors.Is(err, ErrClockBackward) || !now.Equal(time.Unix(3600, 0)) {
		t.Fatalf("set back: %v %v", now, err)
	}
	if _, err := c.Set(MaxClockTime.Add(time.Nanosecond)); !errors.Is(err, ErrClockOutOfRange) {
		t.Fatalf("set past the last instant: %v", err)
	}
	if now, err := c.Set(MaxClockTime); err != nil || !now.Equal(MaxClockTime) {
		t.Fatalf("set to the last instant: %v %v", now, err)
	}
	var ce *ClockError
	if _, err := c.Advance(time.Nanosecond); !errors.As(err, &ce) || !errors.Is(err, ErrClockOutOfRange) || ce.status() != 400 {
		t.Fatalf("advance past the last instant: %v", err)
	}
	if now, err := c.Advance(0); err != nil || !now.Equal(MaxClockTime) {
		t.Fatalf("advance by 0: %v %v", now, err)
	}
}

// Each move is saved; a failed save leaves the move and says so (500).
func TestClockSave(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var saved []time.Time
	diskFull := errors.New("disk full")
	var fail error
	c := NewClock(newMock(start), func(t time.Time) error {
		if fail != nil {
			return fail
		}
		saved = append(saved, t)
		return nil
	})
	h := New(Options{Clock: c})
	call(t, h, "POST", "/_azq/clock/advance?by=1h", nil, nil)
	call(t, h, "POST", "/_azq/clock/advance?by=0", nil, nil) // no move, no save
	call(t, h, "POST", "/_azq/clock/set?to=2030-02-01T00:00:00Z", nil, nil)
	if len(saved) != 2 || !saved[0].Equal(start.Add(time.Hour)) || !saved[1].Equal(time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("saved %v", saved)
	}
	fail = diskFull
	status, body := call(t, h, "POST", "/_azq/clock/advance?by=1h", nil, nil)
	if status != 500 || errorOf(t, body) != "the clock moved but could not be saved: disk full" {
		t.Fatalf("a failed save: %d %s", status, body)
	}
	if _, err := c.Advance(time.Hour); !errors.Is(err, diskFull) {
		t.Fatalf("a failed save: %v", err)
	}
	if want := time.Date(2030, 2, 1, 2, 0, 0, 0, time.UTC); !c.Now().Equal(want) {
		t.Fatalf("the clock is at %v, want %v", c.Now(), want)
	}
}

type clockJSON struct {
	Now   time.Time `json:"now"`
	Error string    `json:"error"`
}

func clockCall(t *testing.T, h *Handler, method, target string, wantStatus int) clockJSON {
	t.Helper()
	status, body := call(t, h, method, target, nil, nil)
	var v clockJSON
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, target, err, body)
	}
	if status != wantStatus {
		t.Fatalf("%s %s: %d %s, want %d", method, target, status, body, wantStatus)
	}
	return v
}

func TestClockEndpoints(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mock := newMock(t0)
	h := New(Options{Clock: NewClock(mock, nil)})
	if got := clockCall(t, h, "GET", "/_azq/clock", 200).Now; !got.Equal(t0) {
		t.Fatalf("now %v", got)
	}
	clockCall(t, h, "HEAD", "/_azq/clock", 200)
	if got := clockCall(t, h, "POST", "/_azq/clock/advance?by=168h", 200).Now; !got.Equal(t0.Add(168*time.Hour)) || !mock.Now().Equal(got) {
		t.Fatalf("advanced to %v, the mock is at %v", got, mock.Now())
	}
	if got := clockCall(t, h, "POST", "/_azq/clock/advance?by=0.5", 200).Now; !got.Equal(t0.Add(168*time.Hour + 500*time.Millisecond)) {
		t.Fatalf("advanced by 0.5 s to %v", got)
	}
	target := time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)
	if got := clockCall(t, h, "POST", "/_azq/clock/set?to="+target.Format(time.RFC3339), 200).Now; !got.Equal(target) {
		t.Fatalf("set to %v", got)
	}
	for _, tc := range []struct {
		method, target string
		status         int
		want           string
	}{
		{"POST", "/_azq/clock/set?to=" + t0.Format(time.RFC3339), 400, "to: the clock only moves forward; it is 2031-06-01T12:00:00Z"},
		{"POST", "/_azq/clock/advance?by=-1h", 400, "by: the clock only moves forward"},
		{"POST", "/_azq/clock/advance?by=soon", 400, `by: "soon" is neither a duration such as 168h nor a number of seconds`},
		{"POST", "/_azq/clock/advance", 400, "by: missing; want a duration such as 168h or a number of seconds"},
		{"POST", "/_azq/clock/set?to=tomorrow", 400, "to: want an RFC 3339 time such as 2030-01-01T00:00:00Z"},
		{"POST", "/_azq/clock/set?to=2262-04-12T00:00:00Z", 400, "to: the clock cannot pass 2262-04-11T23:47:16.854775807Z, the last instant azq represents"},
		{"POST", "/_azq/clock/advance?by=2562047h", 400, "by: the clock cannot pass 2262-04-11T23:47:16.854775807Z, the last instant azq represents; it is 2031-06-01T12:00:00Z"},
		{"GET", "/_azq/clock/advance?by=1h", 405, "/_azq/clock/advance takes POST"},
		{"POST", "/_azq/clock", 405, "/_azq/clock takes GET"},
		{"GET", "/_azq/clock/back", 404, "no such endpoint; see GET /_azq/clock, POST /_azq/clock/advance?by=, POST /_azq/clock/set?to="},
	} {
		if got := clockCall(t, h, tc.method, tc.target, tc.status); got.Error != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.target, got.Error, tc.want)
		}
	}
	if got := clockCall(t, h, "GET", "/_azq/clock", 200).Now; !got.Equal(target) || !mock.Now().Equal(target) {
		t.Fatalf("refused requests moved the clock to %v", got)
	}
	last := "2262-04-11T23:47:16.854775807Z"
	if got := clockCall(t, h, "POST", "/_azq/clock/set?to="+last, 200).Now; !got.Equal(MaxClockTime) {
		t.Fatalf("set to the last instant: now %v, want %v", got, MaxClockTime)
	}
	clockCall(t, h, "POST", "/_azq/clock/advance?by=1ns", 400)
	clockCall(t, h, "POST", "/_azq/clock/advance?by=0", 200)
}
