package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// clockControl serves the endpoints that read and move the emulator's mock
// clock. mu serializes moves: clock.Mock fires due timers while it moves
// and is not meant to be moved from two goroutines at once.
type clockControl struct {
	mu  sync.Mutex
	clk *clock.Mock
	// save, if set, persists the clock's time after each move (-data).
	save func(time.Time) error
}

// maxClockTime is the last instant a Unix-nanosecond time holds,
// 2262-04-11T23:47:16.854775807Z; azq's times are Unix nanoseconds, and its
// queues read any later clock as their own last instant, 2 ns before. The
// endpoints refuse to move the clock past it rather than let time wrap.
var maxClockTime = time.Unix(0, math.MaxInt64).UTC()

type clockReply struct {
	Now time.Time `json:"now"`
}

type clockError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (c *clockControl) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c == nil {
		writeJSON(w, http.StatusNotFound, clockError{"clock control is off; start azqd with -clock-control"})
		return
	}
	var method string
	switch r.URL.Path {
	case "/_azq/clock":
		method = http.MethodGet
	case "/_azq/clock/advance", "/_azq/clock/set":
		method = http.MethodPost
	default:
		writeJSON(w, http.StatusNotFound, clockError{"no such endpoint; see GET /_azq/clock, POST /_azq/clock/advance?by=, POST /_azq/clock/set?to="})
		return
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, clockError{r.URL.Path + " takes " + method})
		return
	}
	var now time.Time
	var err *clockMoveError
	switch r.URL.Path {
	case "/_azq/clock/advance":
		d, perr := parseAdvance(r.URL.Query().Get("by"))
		if perr != nil {
			writeJSON(w, http.StatusBadRequest, clockError{perr.Error()})
			return
		}
		now, err = c.advance(d)
	case "/_azq/clock/set":
		to, perr := time.Parse(time.RFC3339Nano, r.URL.Query().Get("to"))
		if perr != nil {
			writeJSON(w, http.StatusBadRequest, clockError{"to: want an RFC 3339 time such as 2030-01-01T00:00:00Z"})
			return
		}
		now, err = c.set(to)
	default:
		now = c.now()
	}
	if err != nil {
		writeJSON(w, err.status, clockError{err.msg})
		return
	}
	writeJSON(w, http.StatusOK, clockReply{Now: now})
}

// clockMoveError is why the clock was not moved (or not saved), with the
// status the endpoints answer it with.
type clockMoveError struct {
	status int
	msg    string
}

func (e *clockMoveError) Error() string { return e.msg }

func (c *clockControl) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clk.Now().UTC()
}

// advance moves the clock forward by d, as POST /_azq/clock/advance does,
// and returns the new time. The web view's clock buttons move the clock
// through it too, so that the same bound applies and -data saves the
// move.
func (c *clockControl) advance(d time.Duration) (time.Time, *clockMoveError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	if d < 0 {
		return now.UTC(), &clockMoveError{http.StatusBadRequest, "by: the clock only moves forward"}
	}
	if d > maxClockTime.Sub(now) {
		return now.UTC(), &clockMoveError{http.StatusBadRequest, fmt.Sprintf("by: the clock cannot pass %s, the last instant azq represents; it is %s",
			maxClockTime.Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))}
	}
	return c.moveLocked(now, now.Add(d))
}

// set moves the clock to to, as POST /_azq/clock/set does.
func (c *clockControl) set(to time.Time) (time.Time, *clockMoveError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	if to.After(maxClockTime) {
		return now.UTC(), &clockMoveError{http.StatusBadRequest, fmt.Sprintf("to: the clock cannot pass %s, the last instant azq represents",
			maxClockTime.Format(time.RFC3339Nano))}
	}
	if to.Before(now) {
		return now.UTC(), &clockMoveError{http.StatusBadRequest, fmt.Sprintf("to: the clock only moves forward; it is %s", now.UTC().Format(time.RFC3339Nano))}
	}
	return c.moveLocked(now, to)
}

// moveLocked moves the clock from now to to and saves it (-data). c.mu
// is held.
func (c *clockControl) moveLocked(now, to time.Time) (time.Time, *clockMoveError) {
	if to.Equal(now) {
		return now.UTC(), nil
	}
	c.clk.Set(to)
	if c.save != nil {
		if err := c.save(c.clk.Now()); err != nil {
			return c.clk.Now().UTC(), &clockMoveError{http.StatusInternalServerError, "the clock moved but could not be saved: " + err.Error()}
		}
	}
	return c.clk.Now().UTC(), nil
}

// advanceUI is advance as the web view's Options.Advance takes it.
func (c *clockControl) advanceUI(d time.Duration) (time.Time, error) {
	t, err := c.advance(d)
	if err != nil {
		return t, err
	}
	return t, nil
}

// parseAdvance reads the by parameter: a Go duration ("168h", "1h30m") or
// a number of seconds ("3600", "0.5"). It must not be negative.
func parseAdvance(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("by: missing; want a duration such as 168h or a number of seconds")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || secs != secs || secs > float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("by: %q is neither a duration such as 168h nor a number of seconds", s)
		}
		if secs < 0 {
			return 0, fmt.Errorf("by: the clock only moves forward")
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("by: the clock only moves forward")
	}
	return d, nil
}
