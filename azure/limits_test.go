package azure_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/server"
)

// hostileQueue returns the adapter's queue "jobs" on a loopback server
// that answers every request with h, with retry options ro.
func hostileQueue(t *testing.T, h http.HandlerFunc, ro policy.RetryOptions) *azure.Queue {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	acct := server.DevelopmentAccount()
	q, err := azure.NewQueueFromConnectionString(acct.ConnectionString(hs.URL+"/"+acct.Name), "jobs",
		&azure.Options{ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: ro}}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// noRetries makes one try of each request.
var noRetries = policy.RetryOptions{MaxRetries: -1}

// queueMessageXML is one QueueMessage element as Get Messages answers it.
func queueMessageXML(i int) string {
	return fmt.Sprintf("<QueueMessage><MessageId>%08d-0000-4000-8000-000000000000</MessageId>"+
		"<InsertionTime>Mon, 01 Jan 2024 00:00:00 GMT</InsertionTime><ExpirationTime>Mon, 08 Jan 2024 00:00:00 GMT</ExpirationTime>"+
		"<PopReceipt>AgAAAAMAAAAAAAAAxVkNR+xc2gE=</PopReceipt><TimeNextVisible>Mon, 01 Jan 2024 00:00:30 GMT</TimeNextVisible>"+
		"<DequeueCount>1</DequeueCount><MessageText>m</MessageText></QueueMessage>", i)
}

// streamMessages answers with a list of messages that goes on for up to
// total bytes, written as the client reads them.
func streamMessages(total int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat(queueMessageXML(0), 1000))
		w.Write([]byte(`<?xml version="1.0" encoding="utf-8"?><QueueMessagesList>`))
		for n := 0; n < total; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.Write([]byte(`</QueueMessagesList>`))
	}
}

// allocated returns the bytes f allocated in the process.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A Peek or Get answered with hundreds of MiB of messages fails once the
// answer passes what n messages can take, having read no more than that.
func TestHugeMessageListIsRefused(t *testing.T) {
	const total = 256 << 20
	q := hostileQueue(t, streamMessages(total), noRetries)
	ctx := context.Background()
	for _, op := range []struct {
		name string
		call func() ([]azq.Message, error)
	}{
		{"Peek(32)", func() ([]azq.Message, error) { return q.Peek(ctx, 32) }},
		{"Get(32)", func() ([]azq.Message, error) { return q.Get(ctx, 32, time.Minute) }},
		{"Peek(1)", func() ([]azq.Message, error) { return q.Peek(ctx, 1) }},
	} {
		var msgs []azq.Message
		var err error
		n := allocated(func() { msgs, err = op.call() })
		var tooLarge *azure.ResponseTooLargeError
		if !errors.As(err, &tooLarge) || msgs != nil {
			t.Fatalf("%s: %d messages, error %v; want a *ResponseTooLargeError", op.name, len(msgs), err)
		}
		// The bound for 32 messages is about 12 MiB, which the SDK reads
		// into a growing buffer: some tens of MiB, where the whole answer
		// would take gigabytes.
		if n > 100<<20 {
			t.Errorf("%s allocated %d MiB", op.name, n>>20)
		}
	}
}

// An answer that declares a length beyond the bound is refused before a
// byte of its body is read.
func TestDeclaredLengthBeyondTheBoundIsRefused(t *testing.T) {
	q := hostileQueue(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(1<<40))
		w.WriteHeader(http.StatusOK)
	}, noRetries)
	_, err := q.Peek(context.Background(), 32)
	var tooLarge *azure.ResponseTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Peek: %v, want a *ResponseTooLargeError", err)
	}
}

// A Get or Peek never returns more messages than it asked for, even when
// the answer is small enough to read.
func TestMoreMessagesThanAskedForAreRefused(t *testing.T) {
	var n atomic.Int32
	q := hostileQueue(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="utf-8"?><QueueMessagesList>`)
		for i := range int(n.Load()) {
			b.WriteString(queueMessageXML(i))
		}
		b.WriteString(`</QueueMessagesList>`)
		w.Write([]byte(b.String()))
	}, noRetries)
	ctx := context.Background()
	n.Store(2)
	if msgs, err := q.Get(ctx, 1, time.Minute); err == nil || msgs != nil {
		t.Fatalf("Get(1) answered with 2: %d messages, error %v", len(msgs), err)
	}
	if msgs, err := q.Peek(ctx, 1); err == nil || msgs != nil {
		t.Fatalf("Peek(1) answered with 2: %d messages, error %v", len(msgs), err)
	}
	if msgs, err := q.Get(ctx, 2, time.Minute); err != nil || len(msgs) != 2 {
		t.Fatalf("Get(2) answered with 2: %d messages, error %v", len(msgs), err)
	}
}

// A huge error answer is read up to MaxErrorBodyBytes: the error keeps the
// service's code and a short message.
func TestHugeErrorBodyIsCutShort(t *testing.T) {
	q := hostileQueue(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-ms-error-code", "InternalError")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`<?xml version="1.0" encoding="utf-8"?><Error><Code>InternalError</Code><Message>`))
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 256 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}, noRetries)
	var err error
	n := allocated(func() { _, err = q.Peek(context.Background(), 1) })
	var ae *azq.Error
	if !errors.As(err, &ae) || ae.Code != azq.CodeInternalError || ae.StatusCode != http.StatusInternalServerError {
		t.Fatalf("Peek: %v, want the service's InternalError", err)
	}
	if len(err.Error()) > 2*azure.MaxErrorBodyBytes {
		t.Errorf("the error's message has %d bytes", len(err.Error()))
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || len(re.Error()) > 2*azure.MaxErrorBodyBytes {
		t.Errorf("the SDK's error is missing or carries the body: %d bytes", len(re.Error()))
	}
	if n > 16<<20 {
		t.Errorf("Peek allocated %d MiB", n>>20)
	}
}

// A service that takes a request and never answers costs a try its
// TryTimeout, not the caller's whole deadline: the SDK gives up on the
// try, tries again as its retry options say, and returns the deadline
// error with the caller's context still live.
func TestTryTimeoutEndsARequestThatIsNeverAnswered(t *testing.T) {
	var tries atomic.Int32
	q := hostileQueue(t, func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		<-r.Context().Done() // until the client gives up
	}, policy.RetryOptions{TryTimeout: 50 * time.Millisecond, MaxRetries: 1, RetryDelay: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := q.Get(ctx, 1, time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("Get: %v (caller's context: %v); want the try's deadline", err, ctx.Err())
	}
	if got := tries.Load(); got != 2 {
		t.Fatalf("%d tries, want 2 (one retry)", got)
	}
}

// PrepareClientOptions sets the per-try timeout unless the caller did, and
// puts its bound in front of the caller's transport.
func TestPrepareClientOptionsBoundsEveryTry(t *testing.T) {
	if o := azure.PrepareClientOptions(nil); o.Retry.TryTimeout != azure.DefaultTryTimeout || o.Transport == nil {
		t.Fatalf("from nil: TryTimeout %v, transport %v", o.Retry.TryTimeout, o.Transport)
	}
	var used atomic.Bool
	mine := transportFunc(func(r *http.Request) (*http.Response, error) {
		used.Store(true)
		return http.DefaultTransport.RoundTrip(r)
	})
	o := azure.PrepareClientOptions(&azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry:     policy.RetryOptions{TryTimeout: 5 * time.Second, MaxRetries: -1},
		Transport: mine,
	}})
	if o.Retry.TryTimeout != 5*time.Second {
		t.Fatalf("TryTimeout %v, want the caller's 5s", o.Retry.TryTimeout)
	}
	if again := azure.PrepareClientOptions(o); again.Transport != o.Transport {
		t.Fatal("preparing prepared options wraps the transport twice")
	}
	hs := httptest.NewServer(streamMessages(64 << 20))
	t.Cleanup(hs.Close)
	acct := server.DevelopmentAccount()
	svc, err := azqueue.NewServiceClientFromConnectionString(acct.ConnectionString(hs.URL+"/"+acct.Name), o)
	if err != nil {
		t.Fatal(err)
	}
	q, err := azure.NewQueueFromClient(svc.NewQueueClient("jobs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Peek(context.Background(), 1)
	var tooLarge *azure.ResponseTooLargeError
	if !errors.As(err, &tooLarge) || !used.Load() {
		t.Fatalf("Peek through the caller's transport: %v (transport used: %v)", err, used.Load())
	}
}

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }
