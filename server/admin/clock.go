package admin

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// MaxClockTime is the last instant a Unix-nanosecond time holds,
// 2262-04-11T23:47:16.854775807Z. azq's times are Unix nanoseconds, and
// its queues read any later clock as their own last instant, 2 ns
// before; a Clock refuses to move past it rather than let time wrap.
var MaxClockTime = time.Unix(0, math.MaxInt64).UTC()

// MinClockTime is the first instant a Unix-nanosecond time holds,
// 1677-09-21T00:12:43.145224192Z. A Clock only moves forward, so only a
// time it starts at can be before it; a saved time must not be.
var MinClockTime = time.Unix(0, math.MinInt64).UTC()

// The reasons a Clock does not move, which a ClockError wraps.
var (
	// ErrClockBackward: a move would take the clock back.
	ErrClockBackward = errors.New("the clock only moves forward")
	// ErrClockOutOfRange: a move would take the clock past MaxClockTime.
	ErrClockOutOfRange = errors.New("the clock cannot pass the last instant azq represents")
)

// A ClockError is why a Clock did not move (Err is ErrClockBackward or
// ErrClockOutOfRange), or why it moved but its time was not saved (Err
// is the save function's error). Its message names the endpoints'
// parameter, by or to, and the clock's time.
type ClockError struct {
	Err error
	msg string
}

func (e *ClockError) Error() string { return e.msg }

// Unwrap returns e.Err.
func (e *ClockError) Unwrap() error { return e.Err }

// status is the HTTP status the clock endpoints answer e with.
func (e *ClockError) status() int {
	if errors.Is(e.Err, ErrClockBackward) || errors.Is(e.Err, ErrClockOutOfRange) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// Clock moves a mock clock for the clock endpoints and for whatever else
// moves it on a client's behalf (a web view's buttons), so that the same
// bounds apply and every move is saved alike.
type Clock struct {
	// mu serializes moves, and each move with its save: clock.Mock fires
	// due timers while it moves and is not meant to be moved from two
	// goroutines at once.
	mu   sync.Mutex
	mock *clock.Mock
	save func(time.Time) error
}

// NewClock returns the Clock that moves mock. After each move that
// changes the time, save (if not nil) is called with the new time, to
// persist it; if it fails, the move stands and its error is returned.
func NewClock(mock *clock.Mock, save func(time.Time) error) *Clock {
	return &Clock{mock: mock, save: save}
}

// Now returns the clock's time, in UTC.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mock.Now().UTC()
}

// Advance moves the clock forward by d, as POST /_azq/clock/advance?by=d
// does, and returns the new time (the old one if it did not move).
func (c *Clock) Advance(d time.Duration) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.mock.Now()
	if d < 0 {
		return now.UTC(), &ClockError{ErrClockBackward, "by: the clock only moves forward"}
	}
	if d > MaxClockTime.Sub(now) {
		return now.UTC(), &ClockError{ErrClockOutOfRange, fmt.Sprintf("by: the clock cannot pass %s, the last instant azq represents; it is %s",
			MaxClockTime.Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))}
	}
	return c.moveLocked(now, now.Add(d))
}

// Set moves the clock forward to t, as POST /_azq/clock/set?to=t does,
// and returns the new time (the old one if it did not move).
func (c *Clock) Set(t time.Time) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.mock.Now()
	if t.After(MaxClockTime) {
		return now.UTC(), &ClockError{ErrClockOutOfRange, fmt.Sprintf("to: the clock cannot pass %s, the last instant azq represents",
			MaxClockTime.Format(time.RFC3339Nano))}
	}
	if t.Before(now) {
		return now.UTC(), &ClockError{ErrClockBackward, fmt.Sprintf("to: the clock only moves forward; it is %s", now.UTC().Format(time.RFC3339Nano))}
	}
	return c.moveLocked(now, t)
}

// moveLocked moves the clock from now to to and saves it. c.mu is held.
func (c *Clock) moveLocked(now, to time.Time) (time.Time, error) {
	if to.Equal(now) {
		return now.UTC(), nil
	}
	c.mock.Set(to)
	if c.save != nil {
		if err := c.save(c.mock.Now()); err != nil {
			return c.mock.Now().UTC(), &ClockError{err, "the clock moved but could not be saved: " + err.Error()}
		}
	}
	return c.mock.Now().UTC(), nil
}

type clockReply struct {
	Now time.Time `json:"now"`
}

// serveClock answers /_azq/clock and what is under it.
func serveClock(c *Clock, w http.ResponseWriter, r *http.Request) {
	var method string
	switch r.URL.Path {
	case Prefix + "clock":
		method = http.MethodGet
	case Prefix + "clock/advance", Prefix + "clock/set":
		method = http.MethodPost
	default:
		writeError(w, http.StatusNotFound, "no such endpoint; see GET /_azq/clock, POST /_azq/clock/advance?by=, POST /_azq/clock/set?to=")
		return
	}
	if !allowMethod(w, r, method) {
		return
	}
	var now time.Time
	var err error
	switch r.URL.Path {
	case Prefix + "clock/advance":
		d, perr := parseAdvance(r.URL.Query().Get("by"))
		if perr != nil {
			writeError(w, http.StatusBadRequest, perr.Error())
			return
		}
		now, err = c.Advance(d)
	case Prefix + "clock/set":
		to, perr := time.Parse(time.RFC3339Nano, r.URL.Query().Get("to"))
		if perr != nil {
			writeError(w, http.StatusBadRequest, "to: want an RFC 3339 time such as 2030-01-01T00:00:00Z")
			return
		}
		now, err = c.Set(to)
	default:
		now = c.Now()
	}
	var ce *ClockError
	if errors.As(err, &ce) {
		writeError(w, ce.status(), ce.Error())
		return
	}
	writeJSON(w, http.StatusOK, clockReply{Now: now})
}

// parseAdvance reads the by parameter: a Go duration ("168h", "1h30m") or
// a number of seconds ("3600", "0.5"). It must not be negative.
func parseAdvance(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("by: missing; want a duration such as 168h or a number of seconds")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || secs != secs || secs > float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("by: %q is neither a duration such as 168h nor a number of seconds", s)
		}
		if secs < 0 {
			return 0, errors.New("by: the clock only moves forward")
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, errors.New("by: the clock only moves forward")
	}
	return d, nil
}
