package sdktest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// attempts counts the requests the SDK sends, retries included: a
// per-retry policy runs once per attempt.
type attempts struct{ n atomic.Int32 }

func (a *attempts) Do(req *policy.Request) (*http.Response, error) {
	a.n.Add(1)
	return req.Next()
}

// faultTransports are the two ways the SDK reaches the server in these
// tests, each run on both: over loopback TCP with the SDK's default
// transport, and in process with azqtest's Transport, whose faults must
// be the same to the SDK.
var faultTransports = []string{"tcp", "in-process"}

// eachTransport runs test once per transport, as a subtest.
func eachTransport(t *testing.T, test func(t *testing.T, transport string)) {
	for _, tr := range faultTransports {
		t.Run(tr, func(t *testing.T) { test(t, tr) })
	}
}

// faultEnv is the server with an Injector on its mock clock, and a queue
// client with the SDK's default retry policy, but for a 1 ms first delay
// (the default, 4 s, would only make the tests slow); MaxRetries (3),
// MaxRetryDelay, TryTimeout and the retried statuses are the defaults.
// transport names how both clients reach the server (faultTransports).
type faultEnv struct {
	*env
	inj   *faults.Injector
	tries *attempts
	q     *azqueue.QueueClient
	plain *azqueue.QueueClient // no retries, to look without faults
}

func newFaultEnv(t *testing.T, transport string, rules ...faults.Rule) *faultEnv {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(start())
	inj, err := faults.New(faults.Options{Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	e := &faultEnv{env: newEnv(t, server.Options{Clock: mock, Faults: inj}), inj: inj, tries: &attempts{}}
	e.clk = mock
	var tr policy.Transporter // nil: the SDK's default, over TCP
	if transport == "in-process" {
		in := azqtest.NewTransport(e.srv)
		t.Cleanup(in.Close)
		tr = in
		plain := clientOptions()
		plain.Transport = in
		if e.svc, err = azqueue.NewServiceClientWithSharedKeyCredential(e.endpoint+"/", e.cred, plain); err != nil {
			t.Fatal(err)
		}
	}
	e.plain = e.queue(t, "jobs")
	opts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry:            policy.RetryOptions{RetryDelay: time.Millisecond},
		PerRetryPolicies: []policy.Policy{e.tries},
		Transport:        tr,
	}}
	e.q, err = azqueue.NewQueueClientWithSharedKeyCredential(e.endpoint+"/jobs", e.cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := inj.Add(rules...); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *faultEnv) messages(t *testing.T) []string {
	t.Helper()
	resp, err := e.plain.PeekMessages(context.Background(), &azqueue.PeekMessagesOptions{NumberOfMessages: ptr(int32(32))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range resp.Messages {
		out = append(out, *m.MessageText)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// wantAttempts checks that the SDK tried once more than the rule fired.
func (e *faultEnv) wantAttempts(t *testing.T, rule string, hits int64) {
	t.Helper()
	if got := e.inj.Hits(rule); got != hits {
		t.Fatalf("rule %s hit %d times, want %d", rule, got, hits)
	}
	if got := int64(e.tries.n.Load()); got != hits+1 {
		t.Fatalf("the SDK made %d attempts; the rule fired %d times, so want %d", got, hits, hits+1)
	}
}

// A 503 ServerBusy is retried by the SDK's default policy, and the call
// succeeds: one message, two attempts.
func TestSDKRetriesServerBusy(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		for _, reason := range faults.Reasons {
			t.Run(string(reason), func(t *testing.T) {
				e := newFaultEnv(t, transport, faults.Rule{Name: "busy", When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
					Then: faults.Then{Error: faults.CodeServerBusy, Reason: reason}})
				if _, err := e.q.EnqueueMessage(context.Background(), "hello", nil); err != nil {
					t.Fatal(err)
				}
				e.wantAttempts(t, "busy", 1)
				if got := e.messages(t); len(got) != 1 {
					t.Fatalf("messages %q", got)
				}
			})
		}
	})
}

// Put applied with its answer lost: the SDK's retry puts the message
// again, and the queue holds two messages with the same content.
func TestSDKPutAnswerLost(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		for _, then := range []faults.Then{
			{Applied: true, Error: faults.CodeInternalError},
			{Applied: true, Error: faults.CodeOperationTimedOut},
			{Applied: true, Network: faults.NetworkClose},
			{Applied: true, Network: faults.NetworkReset},
		} {
			name := then.Error + string(then.Network)
			t.Run(name, func(t *testing.T) {
				e := newFaultEnv(t, transport, faults.Rule{Name: "lost", When: faults.When{Operations: []string{"PutMessage"}, Times: 1}, Then: then})
				if _, err := e.q.EnqueueMessage(context.Background(), "order 66", nil); err != nil {
					t.Fatal(err)
				}
				e.wantAttempts(t, "lost", 1)
				if got := e.messages(t); len(got) != 2 || got[0] != "order 66" || got[1] != "order 66" {
					t.Fatalf("messages %q, want two of \"order 66\"", got)
				}
			})
		}
	})
}

// An answer cut off mid-body is not retried for a POST, which the SDK
// does not take to be idempotent: Put Message fails with the read error,
// after one attempt, though the message was put.
func TestSDKPutTruncatedIsNotRetried(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		e := newFaultEnv(t, transport, faults.Rule{Name: "cut", When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
			Then: faults.Then{Network: faults.NetworkTruncate}})
		_, err := e.q.EnqueueMessage(context.Background(), "half", nil)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want the unexpected EOF of a cut-off body", err)
		}
		if hits, tries := e.inj.Hits("cut"), e.tries.n.Load(); hits != 1 || tries != 1 {
			t.Fatalf("hits %d, attempts %d; want 1 and 1", hits, tries)
		}
		if got := e.messages(t); len(got) != 1 || got[0] != "half" {
			t.Fatalf("messages %q, want the one put", got)
		}
	})
}

// Failures that are not applied leave nothing behind: the retry puts
// the one message.
func TestSDKPutFailedNotApplied(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		for _, then := range []faults.Then{
			{Error: faults.CodeInternalError},
			{Network: faults.NetworkClose},
			{Network: faults.NetworkReset},
		} {
			t.Run(then.Error+string(then.Network), func(t *testing.T) {
				e := newFaultEnv(t, transport, faults.Rule{Name: "fail", When: faults.When{Operations: []string{"PutMessage"}, Times: 2}, Then: then})
				if _, err := e.q.EnqueueMessage(context.Background(), "once", nil); err != nil {
					t.Fatal(err)
				}
				e.wantAttempts(t, "fail", 2)
				if got := e.messages(t); len(got) != 1 {
					t.Fatalf("messages %q, want one", got)
				}
			})
		}
	})
}

// Delete applied with its answer lost: the retry finds the message gone
// and gets 404 MessageNotFound, which the SDK returns.
func TestSDKDeleteAnswerLost(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		e := newFaultEnv(t, transport, faults.Rule{Name: "lost-delete", When: faults.When{Operations: []string{"DeleteMessage"}, Times: 1},
			Then: faults.Then{Applied: true, Error: faults.CodeInternalError}})
		ctx := context.Background()
		if _, err := e.plain.EnqueueMessage(ctx, "work", nil); err != nil {
			t.Fatal(err)
		}
		got, err := e.plain.DequeueMessage(ctx, nil)
		if err != nil || len(got.Messages) != 1 {
			t.Fatalf("dequeue: %v", err)
		}
		m := got.Messages[0]
		_, err = e.q.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil)
		wantCode(t, err, queueerror.MessageNotFound)
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
			t.Fatalf("err = %v", err)
		}
		e.wantAttempts(t, "lost-delete", 1)
		e.clk.Add(time.Hour)
		if left := e.messages(t); len(left) != 0 {
			t.Fatalf("the deleted message is back: %q", left)
		}
	})
}

// The SDK gives up after its retries (three): four attempts, four hits,
// and the last answer is the error.
func TestSDKGivesUpAfterItsRetries(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		e := newFaultEnv(t, transport, faults.Rule{Name: "down", Then: faults.Then{Error: faults.CodeServerBusy}})
		_, err := e.q.EnqueueMessage(context.Background(), "x", nil)
		wantCode(t, err, queueerror.ServerBusy)
		if hits, tries := e.inj.Hits("down"), e.tries.n.Load(); hits != 4 || tries != 4 {
			t.Fatalf("hits %d, attempts %d; want 4 and 4", hits, tries)
		}
	})
}

// A cut-off answer to a Peek is retried, and the retry's answer read.
func TestSDKRetriesTruncatedAnswer(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		e := newFaultEnv(t, transport, faults.Rule{Name: "cut", When: faults.When{Operations: []string{"PeekMessages"}, Times: 1},
			Then: faults.Then{Network: faults.NetworkTruncate}})
		ctx := context.Background()
		if _, err := e.plain.EnqueueMessage(ctx, "peek me", nil); err != nil {
			t.Fatal(err)
		}
		resp, err := e.q.PeekMessage(ctx, nil)
		if err != nil || len(resp.Messages) != 1 || *resp.Messages[0].MessageText != "peek me" {
			t.Fatalf("peek: %v", err)
		}
		e.wantAttempts(t, "cut", 1)
	})
}

// Past the throttle's rate the SDK's retries are refused too (the mock
// clock does not move between them, as the SDK's back-off is real time):
// four attempts, the last answer ServerBusy. Once the clock has moved a
// second, the next call goes through on its first attempt.
func TestSDKThrottled(t *testing.T) {
	eachTransport(t, func(t *testing.T, transport string) {
		e := newFaultEnv(t, transport)
		if err := e.inj.SetThrottle(&faults.Throttle{QueueMessagesPerSecond: 2}); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i := 0; i < 2; i++ {
			if _, err := e.q.EnqueueMessage(ctx, "paced", nil); err != nil {
				t.Fatal(err)
			}
		}
		e.tries.n.Store(0)
		_, err := e.q.EnqueueMessage(ctx, "one too many", nil)
		wantCode(t, err, queueerror.ServerBusy)
		if tries, throttled := e.tries.n.Load(), e.inj.Status().Throttled; tries != 4 || throttled != 4 {
			t.Fatalf("attempts %d, throttled %d; want 4 and 4", tries, throttled)
		}
		e.clk.Add(time.Second)
		e.tries.n.Store(0)
		if _, err := e.q.EnqueueMessage(ctx, "paced again", nil); err != nil || e.tries.n.Load() != 1 {
			t.Fatalf("after a second: %v, %d attempts", err, e.tries.n.Load())
		}
		q, err := e.srv.Service("devstoreaccount1").Queue("jobs")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := q.ApproximateCount(ctx); n != 3 {
			t.Fatalf("%d messages, want 3", n)
		}
	})
}
