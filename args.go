package azq

import (
	"strconv"
	"time"
)

// The argument checks of every operation, against the queue's Limits, in
// the order Azure applies them. Each runs before the queue's lock is taken,
// so a bad argument costs no contention and changes nothing, and each
// builds the error with Azure's code and details.

// checkPut validates Put's content and options and returns the effective
// time-to-live (the default for zero, NeverExpires for never).
func (l *Limits) checkPut(content string, o *PutOptions) (time.Duration, error) {
	if err := l.checkContent(content); err != nil {
		return 0, err
	}
	ttl, err := l.checkTimeToLive(o.TimeToLive)
	if err != nil {
		return 0, err
	}
	if err := checkVisibility(o.VisibilityTimeout, 0, l.MaxVisibilityTimeout); err != nil {
		return 0, err
	}
	if ttl != NeverExpires && o.VisibilityTimeout >= ttl {
		return 0, newError(ErrInvalidArgument, "", "the visibility timeout must be shorter than the time-to-live",
			Detail{"QueryParameterName", "visibilitytimeout"},
			Detail{"QueryParameterValue", seconds(o.VisibilityTimeout)},
			Detail{"Reason", "messagettl must be greater than visibilitytimeout"})
	}
	return ttl, nil
}

// checkGet validates the count and visibility timeout of Get and Receive.
func (l *Limits) checkGet(n int, visibility time.Duration) error {
	if err := l.checkCount(n); err != nil {
		return err
	}
	return checkVisibility(visibility, l.MinGetVisibilityTimeout, l.MaxVisibilityTimeout)
}

// checkCount validates the number of messages Get or Peek asks for.
func (l *Limits) checkCount(n int) error {
	if n < 1 || n > l.MaxMessagesPerGet {
		return outOfRangeInt("numofmessages", n, 1, l.MaxMessagesPerGet)
	}
	return nil
}

// checkUpdate validates Update's visibility timeout and, unless nil, its
// new content.
func (l *Limits) checkUpdate(visibility time.Duration, content *string) error {
	if err := checkVisibility(visibility, 0, l.MaxVisibilityTimeout); err != nil {
		return err
	}
	if content != nil {
		return l.checkContent(*content)
	}
	return nil
}

// checkContent validates a message's size.
func (l *Limits) checkContent(content string) error {
	if len(content) > l.MaxMessageSize {
		return newError(ErrMessageTooLarge, "", "the message content is larger than the limit",
			Detail{"MaxLimit", strconv.Itoa(l.MaxMessageSize)})
	}
	return nil
}

// checkTimeToLive validates a time-to-live from PutOptions and returns the
// effective one (zero means the default; NeverExpires means never).
func (l *Limits) checkTimeToLive(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return l.DefaultTimeToLive, nil
	case ttl == NeverExpires:
		if l.MaxTimeToLive > 0 {
			return 0, outOfRange("messagettl", ttl, time.Second, l.MaxTimeToLive)
		}
		return NeverExpires, nil
	case ttl < 0:
		return 0, outOfRange("messagettl", ttl, -1, l.MaxTimeToLive)
	case l.MaxTimeToLive > 0 && ttl > l.MaxTimeToLive:
		return 0, outOfRange("messagettl", ttl, time.Second, l.MaxTimeToLive)
	}
	return ttl, nil
}

// checkVisibility validates a visibility timeout against [min, max].
func checkVisibility(v, min, max time.Duration) error {
	if v < min || v > max {
		return outOfRange("visibilitytimeout", v, min, max)
	}
	return nil
}

// outOfRange builds Azure's OutOfRangeQueryParameterValue error for a
// duration parameter, with its bounds in seconds as Azure writes them.
// A zero max means "no upper bound" and is left out.
func outOfRange(param string, v, min, max time.Duration) error {
	d := []Detail{
		{"QueryParameterName", param},
		{"QueryParameterValue", seconds(v)},
		{"MinimumAllowed", seconds(min)},
	}
	if max > 0 {
		d = append(d, Detail{"MaximumAllowed", seconds(max)})
	}
	return newError(ErrOutOfRange, "", "the value of "+param+" is out of range", d...)
}

// outOfRangeInt is outOfRange for a count parameter.
func outOfRangeInt(param string, v, min, max int) error {
	return newError(ErrOutOfRange, "", "the value of "+param+" is out of range",
		Detail{"QueryParameterName", param},
		Detail{"QueryParameterValue", strconv.Itoa(v)},
		Detail{"MinimumAllowed", strconv.Itoa(min)},
		Detail{"MaximumAllowed", strconv.Itoa(max)})
}

// seconds writes d as Azure's parameters do, in whole seconds; a
// sub-second value, possible only with custom limits, keeps its fraction.
// NeverExpires is -1, its value on the wire.
func seconds(d time.Duration) string {
	if d == NeverExpires {
		return "-1"
	}
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10)
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
