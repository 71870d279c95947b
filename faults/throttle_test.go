package faults

import (
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

func newThrottled(t *testing.T, th Throttle) (*Injector, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	in, err := New(Options{Clock: mock, Config: Config{Throttle: &th}})
	if err != nil {
		t.Fatal(err)
	}
	return in, mock
}

// A burst past a queue's rate is refused with ServerBusy and the
// partition's message; a client paced at the rate is never refused.
func TestThrottleQueueMessages(t *testing.T) {
	in, mock := newThrottled(t, Throttle{QueueMessagesPerSecond: 5})
	refused := 0
	for i := 0; i < 8; i++ {
		if d := in.Decide(put); d.Fails() {
			refused++
			if !d.Throttled || d.Rule != ThrottleRule || d.Error.Code != "ServerBusy" || d.Error.StatusCode != 503 ||
				d.Error.Message != "The server is currently unable to receive requests. Please retry your request." {
				t.Fatalf("refusal %+v %+v", d, d.Error)
			}
		}
	}
	if refused != 3 {
		t.Fatalf("%d of a burst of 8 refused at 5/s, want 3", refused)
	}
	// Another queue has its own bucket.
	other := put
	other.Queue = "other"
	if in.Decide(other).Fails() {
		t.Fatal("another queue was refused")
	}
	mock.Add(time.Second) // refill
	for i := 0; i < 100; i++ {
		if d := in.Decide(put); d.Fails() {
			t.Fatalf("paced request %d refused", i)
		}
		mock.Add(200 * time.Millisecond)
	}
	if st := in.Status(); st.Throttled != 3 {
		t.Fatalf("throttled %d", st.Throttled)
	}
}

// Get and Peek count the messages they ask for; a Get of more than a
// bucket holds waits for a full bucket.
func TestThrottleCountsMessagesAskedFor(t *testing.T) {
	in, mock := newThrottled(t, Throttle{QueueMessagesPerSecond: 10})
	get := Request{Operation: "GetMessages", Account: "devstoreaccount1", Queue: "q", Messages: 8}
	if in.Decide(get).Fails() {
		t.Fatal("first Get of 8 refused")
	}
	if !in.Decide(get).Fails() {
		t.Fatal("second Get of 8 in the same instant passed")
	}
	mock.Add(time.Second)
	big := get
	big.Messages = 32
	if in.Decide(big).Fails() {
		t.Fatal("a Get of 32 was refused with a full bucket of 10")
	}
	mock.Add(time.Second)
	if !in.Decide(big).Fails() {
		t.Fatal("the bucket owed 22 messages, yet a Get of 32 passed a second later")
	}
}

// The account's limit counts every request and answers with Azure's
// message for the account.
func TestThrottleAccountRequests(t *testing.T) {
	in, mock := newThrottled(t, Throttle{AccountRequestsPerSecond: 3})
	list := Request{Operation: "ListQueues", Account: "devstoreaccount1"}
	for i := 0; i < 3; i++ {
		if in.Decide(list).Fails() {
			t.Fatalf("request %d refused", i)
		}
	}
	d := in.Decide(put)
	if !d.Throttled || d.Error.Message != "Operations per second is over the account limit." {
		t.Fatalf("fourth request: %+v", d)
	}
	if in.Decide(Request{Operation: "ListQueues", Account: "other"}).Fails() {
		t.Fatal("another account was refused")
	}
	mock.Add(334 * time.Millisecond)
	if in.Decide(list).Fails() {
		t.Fatal("a request a third of a second later was refused")
	}
}

// A queue's refusal takes nothing from the account's bucket.
func TestThrottleRefusalTakesNothing(t *testing.T) {
	in, _ := newThrottled(t, Throttle{QueueMessagesPerSecond: 1, AccountRequestsPerSecond: 3})
	in.Decide(put) // the queue's one message
	for i := 0; i < 5; i++ {
		if d := in.Decide(put); !d.Throttled {
			t.Fatalf("put %d passed", i)
		}
	}
	list := Request{Operation: "ListQueues", Account: "devstoreaccount1"}
	for i := 0; i < 2; i++ {
		if in.Decide(list).Fails() {
			t.Fatalf("the account's bucket lost tokens to refused requests (request %d)", i)
		}
	}
}

// BenchmarkThrottleNames measures one decision of the throttle after it
// has seen a number of distinct queue names, all within the last second
// (the clock stands still), as when a client names queue after queue
// that does not exist. The decisions cycle through the names, so that
// every one of them is as recent as it can be. Each request's queue name
// is a string of its own, made as the request comes, as a server's is:
// the benchmark's own memory does not grow with the names. The cost of a
// decision must not depend on the number of names.
func BenchmarkThrottleNames(b *testing.B) {
	for _, n := range []struct {
		name string
		n    int
	}{{"1e3", 1e3}, {"1e4", 1e4}, {"1e5", 1e5}, {"1e6", 1e6}} {
		b.Run("names="+n.name, func(b *testing.B) {
			mock := clock.NewMock()
			// Rates high enough that no decision is a refusal.
			in, err := New(Options{Clock: mock, Config: Config{Throttle: &Throttle{QueueMessagesPerSecond: maxRate, AccountRequestsPerSecond: maxRate}}})
			if err != nil {
				b.Fatal(err)
			}
			request := func(i int) Request {
				return Request{Operation: "PutMessage", Account: "devstoreaccount1", Queue: "q-" + strconv.Itoa(i%n.n), Messages: 1}
			}
			for i := 0; i < n.n; i++ {
				in.Decide(request(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if in.Decide(request(i)).Fails() {
					b.Fatal("refused")
				}
			}
		})
	}
}
