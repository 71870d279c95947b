package proctest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// Expect is what Check expects of a run besides the promises every run
// keeps.
type Expect struct {
	// Visibility is the visibility timeout of every Receive.
	Visibility time.Duration
	// Resolution returns how finely the next-visible times of a
	// process's "got" lines tell time: 0 for exactly (the library's
	// answers), time.Second for a process on the REST API, which gives
	// whole seconds. The check of leases compares the times of two Gets
	// cut to the coarser of their processes'. Nil: every time is exact.
	Resolution func(proc string) time.Duration
	// Outages is the number of outages of the database the run staged:
	// with any, some call must have failed.
	Outages int
	// Victims is the number of consumers killed while they held what
	// they took (those named "v…"): with any, one must have held a
	// message.
	Victims int
}

// Counts are what Check counted, for the test's log and its report.
type Counts struct {
	Tried, Acked   int // Puts tried, and acknowledged
	Gets, Deleted  int // messages received (a message once per Get), and deleted
	Ambiguous      int // acknowledged, and gone after a Delete whose answer an outage cut
	Drained        int // left in the queue at the end
	Held           int // taken by a killed consumer
	Failed         int // failed calls
	Lost           int // acknowledged, and neither deleted nor in the queue
	Resurrected    int // deleted, and received or in the queue after
	OverlapLeases  int // received while another Get's lease on it was live
	UnexpectedFail int // failed with anything but 503 ServerBusy (or a Delete's 404 after its lease)
}

// Check checks the promises of a run in what its processes wrote, lines,
// and what was left in the queue, drained (by content), and returns what
// it counted:
//
//   - every acknowledged Put was deleted, or is in the queue;
//   - nothing came that no producer put, and nothing deleted came back;
//   - no message was received while another Get's lease on it was live:
//     each Get of a message, by dequeue count, began once the lease of
//     the one before had ended, and no two Gets had one dequeue count;
//   - each message a killed consumer held came back;
//   - every failed call failed with 503 ServerBusy, but a Delete whose
//     lease ran out (on a machine so busy that a consumer took longer
//     than the visibility timeout from Receive to Delete), which Azure
//     answers with 404 MessageNotFound too.
//
// A Delete that failed with 503 may have committed before its connection
// dropped: its message counts as deleted or not.
func Check(t testing.TB, lines []Line, drained map[string]bool, want Expect) Counts {
	t.Helper()
	var n Counts
	tried, acked, deleted := map[string]bool{}, map[string]bool{}, map[string]int64{}
	type get struct {
		proc    string
		dequeue int64
		visible int64 // next-visible time, database clock, Unix ns
	}
	gets := map[string][]get{}
	var fails []Line
	maybeDeleted := map[string]bool{}
	for _, l := range lines {
		f := l.Fields
		switch f[0] {
		case "try":
			tried[f[1]] = true
		case "ack":
			acked[f[1]] = true
		case "got":
			dq, _ := strconv.ParseInt(f[2], 10, 64)
			vis, _ := strconv.ParseInt(f[3], 10, 64)
			gets[f[1]] = append(gets[f[1]], get{l.Proc, dq, vis})
			n.Gets++
		case "del":
			dq, _ := strconv.ParseInt(f[2], 10, 64)
			deleted[f[1]] = dq
		case "fail":
			fails = append(fails, l)
			if len(f) >= 5 && f[1] == "delete" && f[3] == "503" {
				maybeDeleted[f[4]] = true
			}
		}
	}
	n.Tried, n.Acked, n.Deleted, n.Drained, n.Failed = len(tried), len(acked), len(deleted), len(drained), len(fails)

	linesOf := func(c string) string {
		var seen []string
		for _, l := range lines {
			for _, f := range l.Fields {
				if f == c {
					seen = append(seen, l.Proc+": "+strings.Join(l.Fields, " "))
					break
				}
			}
		}
		return strings.Join(seen, "\n")
	}
	for c := range acked {
		if _, ok := deleted[c]; ok || drained[c] {
			continue
		}
		if maybeDeleted[c] {
			n.Ambiguous++
			continue
		}
		if n.Lost++; n.Lost <= 5 {
			t.Errorf("%s was acknowledged and is lost: neither deleted nor in the queue; its lines:\n%s", c, linesOf(c))
		}
	}

	resolution := func(a, b string) int64 {
		if want.Resolution == nil {
			return 1
		}
		return max(int64(want.Resolution(a)), int64(want.Resolution(b)), 1)
	}
	for c, gs := range gets {
		if !tried[c] {
			t.Errorf("%s was received and no producer put it", c)
		}
		if dq, ok := deleted[c]; ok {
			back := drained[c]
			for _, g := range gs {
				if g.dequeue > dq {
					back = true
					t.Errorf("%s was deleted at its dequeue %d and came back to %s (dequeue %d)", c, dq, g.proc, g.dequeue)
				}
			}
			if drained[c] {
				t.Errorf("%s was deleted and is still in the queue", c)
			}
			if back {
				n.Resurrected++
			}
		}
		byDequeue := map[int64]get{}
		for _, g := range gs {
			if other, ok := byDequeue[g.dequeue]; ok {
				n.OverlapLeases++
				t.Errorf("%s was received twice at its dequeue %d, by %s and %s: one Get's answer was lost to the queue; its lines:\n%s",
					c, g.dequeue, other.proc, g.proc, linesOf(c))
			}
			byDequeue[g.dequeue] = g
		}
		for _, g := range gs {
			next, ok := byDequeue[g.dequeue+1]
			if !ok {
				continue
			}
			// A Get's time is its next-visible time less the visibility
			// timeout: the database's time, as g.visible is.
			began, res := next.visible-int64(want.Visibility), resolution(g.proc, next.proc)
			if began-began%res < g.visible-g.visible%res {
				n.OverlapLeases++
				t.Errorf("%s came back to %s %v before %s's lease ended", c, next.proc, time.Duration(g.visible-began), g.proc)
			}
		}
	}

	for c, gs := range gets {
		for _, g := range gs {
			if !strings.HasPrefix(g.proc, "v") {
				continue
			}
			n.Held++
			found := false
			for _, o := range gs {
				found = found || o.dequeue == g.dequeue+1
			}
			if !found {
				t.Errorf("%s, held by %s (dequeue %d) when it was killed, never came back", c, g.proc, g.dequeue)
			}
		}
	}
	if want.Victims > 0 && n.Held == 0 {
		t.Error("no killed consumer held a message: the check of leases checked nothing")
	}

	if want.Outages > 0 && len(fails) == 0 {
		t.Error("no call failed while the database was down")
	}
	for _, l := range fails {
		f := l.Fields
		switch {
		case len(f) >= 4 && f[2] == "ServerBusy" && f[3] == "503":
		case len(f) >= 4 && f[1] == "delete" && f[2] == string(azq.CodeMessageNotFound) && f[3] == "404":
		default:
			n.UnexpectedFail++
			t.Errorf("%s failed with %q, want 503 ServerBusy", l.Proc, strings.Join(f, " "))
		}
	}
	t.Logf("%d Puts acknowledged (%d tried), %d received (%d held by %d killed consumers), %d deleted "+
		"(and %d gone after a Delete whose answer an outage cut), %d left in the queue; "+
		"%d lost, %d resurrected, %d overlapping leases; %d failed calls in %d outages",
		n.Acked, n.Tried, n.Gets, n.Held, want.Victims, n.Deleted, n.Ambiguous, n.Drained,
		n.Lost, n.Resurrected, n.OverlapLeases, n.Failed, want.Outages)
	return n
}

// Receiver is a queue that Drain can empty: Receive blocks until a
// message is visible.
type Receiver interface {
	azq.MessageQueue
	Receive(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error)
}

// Drain takes and deletes every message left in q once the processes
// have stopped, adding a "got" line of proc "drain" for each to log, and
// returns their contents: messages nobody took, and those whose lease a
// killed consumer held, visible again after their visibility timeout.
// After an outage the first calls may meet connections of the pool that
// the outage killed, and fail with 503 ServerBusy: Drain tries each call
// again, up to 10 times, then fails t.
func Drain(t testing.TB, q Receiver, visibility time.Duration, log *Log) map[string]bool {
	t.Helper()
	try := func(what string, call func(context.Context) error) {
		t.Helper()
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := call(ctx)
			cancel()
			var ae *azq.Error
			if err == nil {
				return
			}
			if i == 9 || !errors.As(err, &ae) || ae.Code != "ServerBusy" {
				t.Fatalf("draining the queue: %s: %v", what, err)
			}
			time.Sleep(retryPause)
		}
	}
	drained := map[string]bool{}
	for {
		var n int
		try("counting", func(ctx context.Context) (err error) { n, err = q.ApproximateCount(ctx); return err })
		if n == 0 {
			return drained
		}
		var ms []azq.Message
		try("receiving", func(ctx context.Context) (err error) { ms, err = q.Receive(ctx, 32, visibility); return err })
		for _, m := range ms {
			drained[m.Content] = true
			log.Add("drain", fmt.Sprintf("got %s %d %d", m.Content, m.DequeueCount, m.NextVisibleTime.UnixNano()))
			try("deleting", func(ctx context.Context) error { return q.Delete(ctx, m.ID, m.PopReceipt) })
		}
	}
}
