// Package realclock tells the real clock from the others, for the
// consumers (worker, the gocloud and Watermill drivers) whose poll waits
// follow a queue's clock and, when that clock is not the real one, end in
// real time too: a mock clock that a test never moves (azq's test server's,
// reported by an azure.Queue) must not stall a consumer that found its
// queue empty before the first message was sent.
package realclock

import (
	"reflect"

	"github.com/benbjohnson/clock"
)

// realType is the type of clock.New's clock, which the clock package does
// not export.
var realType = reflect.TypeOf(clock.New())

// Is reports whether c is the real clock, as clock.New returns it. A nil
// clock is not.
func Is(c clock.Clock) bool {
	return c != nil && reflect.TypeOf(c) == realType
}
