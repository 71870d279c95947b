package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/azqlib/azq"
)

// Duration is a time.Duration that a scenario file writes as a string:
// Go's syntax ("1h30m", "250ms") with days allowed in front ("7d",
// "1d12h"), or "never" where a time-to-live may be infinite. A bare JSON
// number is read as seconds.
type Duration time.Duration

// Never is the Duration "never": a message time-to-live that never expires.
const Never = Duration(azq.NeverExpires)

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String writes d the way ParseDuration reads it: whole days first, then
// Go's form of the rest.
func (d Duration) String() string {
	if d == Never {
		return "never"
	}
	t := time.Duration(d)
	if t < 0 {
		return "-" + Duration(-t).String()
	}
	const day = 24 * time.Hour
	days := t / day
	rest := t % day
	switch {
	case days == 0:
		return rest.String()
	case rest == 0:
		return strconv.FormatInt(int64(days), 10) + "d"
	default:
		return strconv.FormatInt(int64(days), 10) + "d" + rest.String()
	}
}

// ParseDuration reads a duration as a scenario file writes it: Go's syntax,
// optionally led by a count of days ("2d", "1d6h"), or "never".
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "never" {
		return Never, nil
	}
	neg := false
	rest := s
	if strings.HasPrefix(rest, "-") {
		neg, rest = true, rest[1:]
	}
	var days int64
	if i := strings.IndexByte(rest, 'd'); i >= 0 {
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, fmt.Errorf("duration %q: bad count of days", s)
		}
		days, rest = n, rest[i+1:]
	}
	var t time.Duration
	if rest != "" {
		var err error
		t, err = time.ParseDuration(rest)
		if err != nil || t < 0 {
			return 0, fmt.Errorf("duration %q: want e.g. 30s, 5m, 1h30m, 2d or 1d12h", s)
		}
	} else if days == 0 {
		return 0, fmt.Errorf("duration %q: empty", s)
	}
	t += time.Duration(days) * 24 * time.Hour
	if neg {
		t = -t
	}
	return Duration(t), nil
}

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a string (see ParseDuration) or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*d = v
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"30s\" or a number of seconds", b)
	}
	if math.IsNaN(secs) || math.Abs(secs) > float64(math.MaxInt64)/1e9 {
		return fmt.Errorf("duration %s: out of range", b)
	}
	*d = Duration(secs * 1e9)
	return nil
}
