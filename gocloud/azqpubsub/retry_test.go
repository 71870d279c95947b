package azqpubsub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/faults"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/driver"
)

// faultyQueue returns an in-memory queue behind rules, and the Injector
// that counts their hits.
func faultyQueue(t *testing.T, rules ...faults.Rule) (*azq.Queue, *azqtest.FaultyQueue, *faults.Injector) {
	t.Helper()
	inj, err := faults.New(faults.Options{Config: faults.Config{Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	q := azq.New()
	return q, azqtest.NewFaultyQueue(q, inj, azqtest.FaultyOptions{Queue: "orders"}), inj
}

// The codes and retryability of the errors a back end returns agree: what
// may pass is retried, whatever its code; what will not is not.
func TestErrorCodesAndRetryability(t *testing.T) {
	answer := func(code string, status int) error {
		return &azq.Error{Code: azq.ErrorCode(code), StatusCode: status}
	}
	cut := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://a.queue.core.windows.net/q", Err: err}
	}
	tests := []struct {
		err       error
		code      gcerrors.ErrorCode
		retryable bool
	}{
		{answer("ServerBusy", http.StatusServiceUnavailable), gcerrors.ResourceExhausted, true},
		{answer("TooManyRequests", http.StatusTooManyRequests), gcerrors.ResourceExhausted, true},
		{answer("InternalError", http.StatusInternalServerError), gcerrors.Internal, true},
		{answer("OperationTimedOut", http.StatusInternalServerError), gcerrors.Internal, true},
		{answer("BadGateway", http.StatusBadGateway), gcerrors.Internal, true},
		{answer("GatewayTimeout", http.StatusGatewayTimeout), gcerrors.DeadlineExceeded, true},
		{answer("RequestTimeout", http.StatusRequestTimeout), gcerrors.DeadlineExceeded, true},
		{fmt.Errorf("try: %w", context.DeadlineExceeded), gcerrors.DeadlineExceeded, true},
		{cut(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), gcerrors.DeadlineExceeded, true},
		{cut(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), gcerrors.Unknown, true},
		{cut(io.EOF), gcerrors.Unknown, true},
		{cut(io.ErrUnexpectedEOF), gcerrors.Unknown, true},
		{azq.ErrQueueNotFound, gcerrors.NotFound, false},
		{answer("AuthenticationFailed", http.StatusForbidden), gcerrors.PermissionDenied, false},
		{azq.ErrMessageTooLarge, gcerrors.InvalidArgument, false},
		{answer("MessageTooLarge", http.StatusBadRequest), gcerrors.InvalidArgument, false},
		{answer(string(azq.CodeQueueBeingDeleted), http.StatusConflict), gcerrors.FailedPrecondition, false},
		{fmt.Errorf("put: %w", azq.ErrStorageFailure), gcerrors.Internal, false},
		{context.Canceled, gcerrors.Canceled, false},
		{errNoQueues, gcerrors.FailedPrecondition, false},
		{errors.New("something else"), gcerrors.Unknown, false},
	}
	for _, tt := range tests {
		if got := errorCode(tt.err); got != tt.code {
			t.Errorf("errorCode(%v) = %v, want %v", tt.err, got, tt.code)
		}
		if got := (&topic{}).IsRetryable(tt.err); got != tt.retryable {
			t.Errorf("topic.IsRetryable(%v) = %v, want %v", tt.err, got, tt.retryable)
		}
		if got := (&subscription{}).IsRetryable(tt.err); got != tt.retryable {
			t.Errorf("subscription.IsRetryable(%v) = %v, want %v", tt.err, got, tt.retryable)
		}
	}
}

// Under one fault in ten requests of every kind — ServerBusy, 429,
// InternalError, OperationTimedOut, connections closed, reset and cut
// off, some after the request took effect — every error the driver
// returns is one it calls retryable, and retrying each call as gocloud's
// portable type does delivers every message and leaves the queue empty.
func TestDriverFailsOnlyRetryablyUnderFaults(t *testing.T) {
	q, fq, inj := faultyQueue(t,
		faults.Rule{Name: "put-timed-out", When: faults.When{Operations: []string{"PutMessage"}, Every: 10},
			Then: faults.Then{Error: faults.CodeOperationTimedOut, Applied: true}}, // put twice on the retry
		faults.Rule{Name: "put-cut", When: faults.When{Operations: []string{"PutMessage"}, Every: 9},
			Then: faults.Then{Network: faults.NetworkTruncate}},
		faults.Rule{Name: "put-throttled", When: faults.When{Operations: []string{"PutMessage"}, Every: 8},
			Then: faults.Then{Error: "TooManyRequests", Status: http.StatusTooManyRequests}},
		faults.Rule{Name: "get-busy", When: faults.When{Operations: []string{"GetMessages"}, Every: 10},
			Then: faults.Then{Error: faults.CodeServerBusy}},
		faults.Rule{Name: "get-closed", When: faults.When{Operations: []string{"GetMessages"}, Every: 7},
			Then: faults.Then{Network: faults.NetworkClose}},
		faults.Rule{Name: "delete-reset", When: faults.When{Operations: []string{"DeleteMessage"}, Every: 10},
			Then: faults.Then{Network: faults.NetworkReset, Applied: true}}, // gone on the retry
		faults.Rule{Name: "delete-internal", When: faults.When{Operations: []string{"DeleteMessage"}, Every: 9},
			Then: faults.Then{Error: faults.CodeInternalError}},
		faults.Rule{Name: "nack-busy", When: faults.When{Operations: []string{"UpdateMessage"}, Every: 10},
			Then: faults.Then{Error: faults.CodeServerBusy, Reason: faults.ReasonOperations}},
	)
	ctx := context.Background()
	top := newTopic(fq, nil, nil)
	sub := newSubscription(fq, &SubscriptionOptions{})
	// retry makes call until it succeeds, as the portable type does with
	// a driver's retryable errors; any other error fails the test.
	retry := func(what string, call func() error) {
		t.Helper()
		for try := 1; ; try++ {
			err := call()
			if err == nil {
				return
			}
			if !top.IsRetryable(err) || !sub.IsRetryable(err) {
				t.Fatalf("%s: %v, which is not retryable", what, err)
			}
			if try == 10 {
				t.Fatalf("%s: still failing after %d tries: %v", what, try, err)
			}
		}
	}
	const n = 200
	for i := 0; i < n; i += 8 {
		var batch []*driver.Message
		for j := i; j < i+8; j++ {
			batch = append(batch, &driver.Message{Body: []byte(strconv.Itoa(j)), Metadata: map[string]string{"n": strconv.Itoa(j)}})
		}
		retry("SendBatch", func() error { return top.SendBatch(ctx, batch) })
	}
	seen := make(map[string]bool)
	nacked := make(map[string]bool)
	for len(seen) < n {
		var ms []*driver.Message
		retry("ReceiveBatch", func() (err error) { ms, err = sub.ReceiveBatch(ctx, 32); return err })
		var acks, nacks []driver.AckID
		for _, m := range ms {
			body := string(m.Body)
			if m.Metadata["n"] != body {
				t.Fatalf("message %q came with metadata %v", body, m.Metadata)
			}
			// Every fifth message is nacked once, and comes again.
			if i, _ := strconv.Atoi(body); i%5 == 0 && !nacked[body] {
				nacked[body] = true
				nacks = append(nacks, m.AckID)
				continue
			}
			seen[body] = true
			acks = append(acks, m.AckID)
		}
		retry("SendNacks", func() error { return sub.SendNacks(ctx, nacks) })
		retry("SendAcks", func() error { return sub.SendAcks(ctx, acks) })
	}
	// What was put twice is received and acked as well.
	for {
		var ms []*driver.Message
		retry("ReceiveBatch", func() (err error) { ms, err = sub.ReceiveBatch(ctx, 32); return err })
		if len(ms) == 0 {
			break
		}
		acks := make([]driver.AckID, len(ms))
		for i, m := range ms {
			acks[i] = m.AckID
		}
		retry("SendAcks", func() error { return sub.SendAcks(ctx, acks) })
	}
	if left, err := q.ApproximateCount(ctx); err != nil || left != 0 {
		t.Fatalf("%d messages left (%v)", left, err)
	}
	for _, r := range inj.Status().Rules {
		if r.Hits == 0 {
			t.Errorf("rule %s never fired", r.Name)
		}
	}
}

// A subscription and a topic through gocloud's portable types keep going
// through transient faults: a ServerBusy Get, an InternalError Put and a
// Delete whose connection was reset after it took effect are retried by
// gocloud, every message is received and acked, and the subscription is
// never ended. gocloud's back-off sleeps up to a second a retry on the
// real clock, so this test has one fault of each kind.
func TestPortableTypesKeepGoingThroughTransientFaults(t *testing.T) {
	q, fq, inj := faultyQueue(t,
		faults.Rule{Name: "put", When: faults.When{Operations: []string{"PutMessage"}, Every: 3, Times: 1},
			Then: faults.Then{Error: faults.CodeInternalError}},
		faults.Rule{Name: "get", When: faults.When{Operations: []string{"GetMessages"}, Times: 1},
			Then: faults.Then{Error: faults.CodeServerBusy}},
		faults.Rule{Name: "delete", When: faults.When{Operations: []string{"DeleteMessage"}, Every: 2, Times: 1},
			Then: faults.Then{Network: faults.NetworkReset, Applied: true}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top := OpenTopic(fq, nil)
	sub := OpenSubscription(fq, nil)
	const n = 6
	var wg sync.WaitGroup
	sendErrs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendErrs <- top.Send(ctx, &pubsub.Message{Body: []byte(strconv.Itoa(i))})
		}()
	}
	seen := make(map[string]bool)
	for len(seen) < n {
		m, err := sub.Receive(ctx)
		if err != nil {
			t.Fatalf("Receive after %d messages: %v", len(seen), err)
		}
		seen[string(m.Body)] = true
		m.Ack()
	}
	wg.Wait()
	close(sendErrs)
	for err := range sendErrs {
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	if err := top.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sub.Shutdown(ctx); err != nil { // the acks are sent
		t.Fatal(err)
	}
	if left, err := q.ApproximateCount(ctx); err != nil || left != 0 {
		t.Fatalf("%d messages left (%v)", left, err)
	}
	for _, r := range inj.Status().Rules {
		if r.Hits != 1 {
			t.Errorf("rule %s fired %d times, want once", r.Name, r.Hits)
		}
	}
}

// An error that will not pass is not retried: it ends the subscription,
// which returns it from every Receive, with its code; a topic's Send
// returns it, and the next Send goes through.
func TestPermanentErrorsAreNotRetried(t *testing.T) {
	_, fq, inj := faultyQueue(t,
		faults.Rule{Name: "auth", When: faults.When{Operations: []string{"GetMessages"}, Times: 1},
			Then: faults.Then{Error: "AuthenticationFailed", Status: http.StatusForbidden}},
		faults.Rule{Name: "large", When: faults.When{Operations: []string{"PutMessage"}, Times: 1},
			Then: faults.Then{Error: string(azq.CodeMessageTooLarge), Status: http.StatusBadRequest}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top := OpenTopic(fq, nil)
	defer top.Shutdown(ctx)
	err := top.Send(ctx, &pubsub.Message{Body: []byte("x")})
	if gcerrors.Code(err) != gcerrors.InvalidArgument || inj.Hits("large") != 1 {
		t.Fatalf("Send: %v (%v), rule hit %d times; want InvalidArgument, once", err, gcerrors.Code(err), inj.Hits("large"))
	}
	if err := top.Send(ctx, &pubsub.Message{Body: []byte("y")}); err != nil {
		t.Fatalf("the Send after: %v", err)
	}

	sub := OpenSubscription(fq, nil)
	defer sub.Shutdown(ctx)
	for range 2 {
		_, err := sub.Receive(ctx)
		var ae *azq.Error
		if gcerrors.Code(err) != gcerrors.PermissionDenied || !sub.ErrorAs(err, &ae) || ae.Code != "AuthenticationFailed" {
			t.Fatalf("Receive: %v (%v); want AuthenticationFailed, PermissionDenied", err, gcerrors.Code(err))
		}
	}
	if hits := inj.Hits("auth"); hits != 1 {
		t.Fatalf("the failing Get was made %d times, want once", hits)
	}
}

// A retry gocloud never makes (it gave up when its context ended) must not
// keep its batch for ever: what a topic and a subscription remember of
// failed tries stays bounded however many batches are abandoned.
func TestAbandonedRetriesAreForgotten(t *testing.T) {
	_, fq, _ := faultyQueue(t,
		faults.Rule{Name: "every-second-put", When: faults.When{Operations: []string{"PutMessage"}, Every: 2},
			Then: faults.Then{Error: faults.CodeServerBusy}},
		faults.Rule{Name: "every-second-delete", When: faults.When{Operations: []string{"DeleteMessage"}, Every: 2},
			Then: faults.Then{Error: faults.CodeServerBusy}},
	)
	ctx := context.Background()
	top := newTopic(fq, nil, nil)
	sub := newSubscription(fq, &SubscriptionOptions{})
	abandoned := 0
	for i := 0; i < 3*maxRemembered; i++ {
		// Two messages: the first is put, the second fails; nobody retries.
		batch := []*driver.Message{{Body: []byte("a")}, {Body: []byte("b")}}
		if err := top.SendBatch(ctx, batch); err != nil {
			abandoned++
		}
	}
	if abandoned < maxRemembered {
		t.Fatalf("only %d batches failed; the test needs more than %d", abandoned, maxRemembered)
	}
	top.mu.Lock()
	kept := len(top.progress)
	top.mu.Unlock()
	if kept > maxRemembered {
		t.Errorf("the topic remembers %d messages of abandoned batches, more than %d", kept, maxRemembered)
	}

	// The subscription: acks of two messages at a time, the second of
	// each failing; every call's progress is left for a retry.
	for i := 0; i < 2*3*maxRemembered; i++ {
		if _, err := fq.Put(ctx, "m", nil); err != nil && !sub.IsRetryable(err) {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3*maxRemembered; i++ {
		got, err := sub.ReceiveBatch(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		var ids []driver.AckID
		for _, m := range got {
			ids = append(ids, m.AckID)
		}
		_ = sub.SendAcks(ctx, ids) // fails part-way at times; nobody retries
	}
	sub.done.mu.Lock()
	kept = len(sub.done.ids)
	sub.done.mu.Unlock()
	if kept > maxRemembered {
		t.Errorf("the subscription remembers %d acks of abandoned tries, more than %d", kept, maxRemembered)
	}
}
