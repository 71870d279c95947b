package azq

import (
	"math"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// lastRepresentable is the latest instant Unix nanoseconds hold.
var lastRepresentable = time.Unix(0, math.MaxInt64).UTC()

// TestTimeAtTheEdge runs the core on a mock clock at and past the last
// instant Unix nanoseconds can hold (2262-04-11T23:47:16.854775807Z).
// Time stands still at azq's last instant there: a Get hides what it
// takes, Put reports an insertion time in 2262 (not in 1678), and nothing
// expires or reappears.
func TestTimeAtTheEdge(t *testing.T) {
	for _, at := range []time.Time{
		lastRepresentable,
		lastRepresentable.Add(-time.Nanosecond),
		lastRepresentable.Add(time.Nanosecond),
		lastRepresentable.Add(time.Hour),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		t.Run(at.Format(time.RFC3339Nano), func(t *testing.T) {
			clk := clock.NewMock()
			clk.Set(at)
			q := New(WithClock(clk))
			m := mustPut(t, q, "edge", nil)
			if m.InsertionTime.Year() != 2262 || m.InsertionTime.After(lastRepresentable) {
				t.Fatalf("insertion time %v, want the last instant of 2262-04-11", m.InsertionTime)
			}
			if !m.NextVisibleTime.Equal(m.InsertionTime) {
				t.Fatalf("next visible %v, want the insertion time %v", m.NextVisibleTime, m.InsertionTime)
			}
			got := mustGet(t, q, 32, time.Second)
			if len(got) != 1 || got[0].DequeueCount != 1 {
				t.Fatalf("Get(32) at the edge = %d messages %+v, want the one message once", len(got), got)
			}
			if !got[0].NextVisibleTime.After(got[0].InsertionTime) {
				t.Fatalf("a taken message is visible again at once: %+v", got[0])
			}
			if again := mustGet(t, q, 32, time.Second); len(again) != 0 {
				t.Fatalf("a hidden message came back: %+v", again)
			}
			clk.Add(time.Hour)
			if n, err := q.ApproximateCount(ctx); err != nil || n != 1 {
				t.Fatalf("count %d, %v: the message expired or was lost", n, err)
			}
			if err := q.Delete(ctx, got[0].ID, got[0].PopReceipt); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		})
	}
}

// TestHugeTimeToLiveSaturates: a time-to-live that reaches past what
// azq's clock can hold saturates: the message does not expire, and its
// expiration time reads 9999-12-31T23:59:59Z, the latest Azure writes,
// rather than wrapping into the past.
func TestHugeTimeToLiveSaturates(t *testing.T) {
	q, clk := newMockQueue(t)
	for _, ttl := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 280 * 365 * 24 * time.Hour} {
		m := mustPut(t, q, "huge", &PutOptions{TimeToLive: ttl})
		if !m.ExpirationTime.Equal(farFuture) {
			t.Fatalf("ttl %v: expiration %v, want %v", ttl, m.ExpirationTime, farFuture)
		}
	}
	// 200 years stays within range and is reported exactly.
	long := 200 * 365 * 24 * time.Hour
	m := mustPut(t, q, "long", &PutOptions{TimeToLive: long})
	if want := clk.Now().Add(long); !m.ExpirationTime.Equal(want) {
		t.Fatalf("expiration %v, want %v", m.ExpirationTime, want)
	}
	clk.Add(7 * 24 * time.Hour)
	if n, err := q.ApproximateCount(ctx); err != nil || n != 4 {
		t.Fatalf("count %d, %v; want all 4 messages alive", n, err)
	}
}
