package sdktest_test

import (
	"context"
	"errors"
	"io"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
	"github.com/benbjohnson/clock"
)

func newFaulty(t *testing.T, rules ...faults.Rule) (*azqtest.FaultyQueue, *azq.Queue, *faults.Injector, *metrics.Recorder) {
	t.Helper()
	mock := clock.NewMock()
	svc := azq.NewService(azq.WithClock(mock))
	t.Cleanup(func() { svc.Close() })
	q, _, err := svc.CreateQueue(context.Background(), "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	inj, err := faults.New(faults.Options{Clock: mock, Config: faults.Config{Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder()
	return azqtest.NewFaultyQueue(q, inj, azqtest.FaultyOptions{Observe: rec.Observe}), q, inj, rec
}

// newAdapterOnServer serves azq's REST API for the test, with a queue
// "jobs", and returns the azure adapter on that queue. It makes no
// retries, so that the adapter's error is the server's one answer.
func newAdapterOnServer(t *testing.T) (*azqtest.Server, *azure.Queue) {
	t.Helper()
	srv := azqtest.NewServer(t)
	aq, err := azure.NewQueueFromConnectionString(srv.ConnectionString, "jobs", &azure.Options{Clock: srv.Clock,
		ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Service.CreateQueue(context.Background(), "jobs", nil); err != nil {
		t.Fatal(err)
	}
	return srv, aq
}

var requestSuffix = regexp.MustCompile(` \(request [0-9a-f-]{36}\)$`)

// An injected error answer is the error package azure returns for the
// same answer from azq's server: code, status, message, and the request
// ID after it; and it matches azq's sentinels.
func TestFaultyQueueErrorsAreAzures(t *testing.T) {
	srv, aq := newAdapterOnServer(t)
	for _, then := range []faults.Then{
		{Error: faults.CodeServerBusy},
		{Error: faults.CodeServerBusy, Reason: faults.ReasonOperations},
		{Error: faults.CodeInternalError},
		{Error: faults.CodeOperationTimedOut},
		{Error: "MessageNotFound", Status: 404},
		{Error: faults.CodeInternalError, Message: "disk on fire"},
	} {
		rule := faults.Rule{Name: "r", When: faults.When{Operations: []string{"PutMessage"}}, Then: then}
		srv.Faults.Clear()
		if err := srv.Faults.Add(rule); err != nil {
			t.Fatal(err)
		}
		_, remote := aq.Put(context.Background(), "x", nil)
		fq, _, _, _ := newFaulty(t, rule)
		_, local := fq.Put(context.Background(), "x", nil)
		var re, le *azq.Error
		if !errors.As(remote, &re) || !errors.As(local, &le) {
			t.Fatalf("%s: errors %v and %v", then.Error, remote, local)
		}
		if !requestSuffix.MatchString(le.Message) || !requestSuffix.MatchString(re.Message) {
			t.Fatalf("%s: messages %q and %q lack the request ID", then.Error, le.Message, re.Message)
		}
		if le.Code != re.Code || le.StatusCode != re.StatusCode ||
			requestSuffix.ReplaceAllString(le.Message, "") != requestSuffix.ReplaceAllString(re.Message, "") {
			t.Errorf("%s: FaultyQueue %+v, azure %+v", then.Error, le, re)
		}
		if then.Error == "MessageNotFound" && (!errors.Is(local, azq.ErrMessageNotFound) || !errors.Is(remote, azq.ErrMessageNotFound)) {
			t.Errorf("MessageNotFound does not match the sentinel: %v / %v", local, remote)
		}
	}
}

// networkFailures are the network results of a rule, each with the error
// the SDK returns for it.
var networkFailures = []struct {
	nw   faults.Network
	want error
}{
	{faults.NetworkClose, io.EOF},
	{faults.NetworkReset, syscall.ECONNRESET},
	{faults.NetworkTruncate, io.ErrUnexpectedEOF},
}

// Failed connections are the transport errors the SDK returns.
func TestFaultyQueueNetworkErrors(t *testing.T) {
	for _, tc := range networkFailures {
		fq, q, _, _ := newFaulty(t, faults.Rule{When: faults.When{Operations: []string{"PutMessage"}}, Then: faults.Then{Network: tc.nw}})
		_, err := fq.Put(context.Background(), "x", nil)
		var ue *url.Error
		if !errors.Is(err, tc.want) || !errors.As(err, &ue) || ue.Op != "Post" || !strings.HasSuffix(ue.URL, "/jobs/messages") {
			t.Errorf("%s: %v", tc.nw, err)
		}
		// Only the cut-off answer had an operation behind it.
		if n, _ := q.ApproximateCount(context.Background()); n != map[bool]int{true: 1, false: 0}[tc.nw == faults.NetworkTruncate] {
			t.Errorf("%s: %d messages", tc.nw, n)
		}
	}
}

// The SDK's own errors for the same failures from azq's server match the
// same targets.
func TestAzureAdapterNetworkErrorsMatch(t *testing.T) {
	srv, aq := newAdapterOnServer(t)
	for _, tc := range networkFailures {
		srv.Faults.Clear()
		srv.Faults.Add(faults.Rule{When: faults.When{Operations: []string{"PutMessage"}}, Then: faults.Then{Network: tc.nw}})
		if _, err := aq.Put(context.Background(), "x", nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: azure returned %v, which is not %v", tc.nw, err, tc.want)
		}
	}
}

// Applied faults take effect: a Put's message is there, a Delete's
// message is gone and a second Delete gets MessageNotFound.
func TestFaultyQueueApplied(t *testing.T) {
	ctx := context.Background()
	fq, q, inj, rec := newFaulty(t,
		faults.Rule{Name: "lost-put", When: faults.When{Operations: []string{"PutMessage"}, Times: 1}, Then: faults.Then{Applied: true, Error: faults.CodeInternalError}},
		faults.Rule{Name: "lost-delete", When: faults.When{Operations: []string{"DeleteMessage"}, Times: 1}, Then: faults.Then{Applied: true, Network: faults.NetworkReset}},
	)
	if _, err := fq.Put(ctx, "twice", nil); err == nil {
		t.Fatal("the lost Put succeeded")
	}
	if _, err := fq.Put(ctx, "twice", nil); err != nil {
		t.Fatal(err)
	}
	ms, err := fq.Get(ctx, 32, time.Minute)
	if err != nil || len(ms) != 2 || ms[0].Content != "twice" || ms[1].Content != "twice" {
		t.Fatalf("get: %v %v", ms, err)
	}
	if err := fq.Delete(ctx, ms[0].ID, ms[0].PopReceipt); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("lost delete: %v", err)
	}
	if err := fq.Delete(ctx, ms[0].ID, ms[0].PopReceipt); !errors.Is(err, azq.ErrMessageNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if n, _ := q.ApproximateCount(ctx); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	if inj.Hits("lost-put") != 1 || inj.Hits("lost-delete") != 1 {
		t.Fatalf("hits %+v", inj.Status().Rules)
	}
	s := rec.Snapshot()
	if s.Count("PutMessage", observe.ServerError) != 1 || s.Count("PutMessage", observe.Success) != 1 ||
		s.Count("DeleteMessage", observe.NetworkError) != 1 || s.Count("DeleteMessage", observe.ClientError) != 1 ||
		s.MessagesPut[0].Count != 2 || s.MessagesDeleted[0].Count != 1 {
		t.Fatalf("recorded %+v", s)
	}
}

// Each method is the operation the rules name.
func TestFaultyQueueOperationNames(t *testing.T) {
	ctx := context.Background()
	for op, call := range map[string]func(*azqtest.FaultyQueue) error{
		"PutMessage":   func(f *azqtest.FaultyQueue) error { _, err := f.Put(ctx, "x", nil); return err },
		"GetMessages":  func(f *azqtest.FaultyQueue) error { _, err := f.Get(ctx, 1, time.Second); return err },
		"PeekMessages": func(f *azqtest.FaultyQueue) error { _, err := f.Peek(ctx, 1); return err },
		"UpdateMessage": func(f *azqtest.FaultyQueue) error {
			_, err := f.Update(ctx, azq.MessageID{}, azq.PopReceipt{}, 0, nil)
			return err
		},
		"DeleteMessage":    func(f *azqtest.FaultyQueue) error { return f.Delete(ctx, azq.MessageID{}, azq.PopReceipt{}) },
		"ClearMessages":    func(f *azqtest.FaultyQueue) error { return f.Clear(ctx) },
		"GetQueueMetadata": func(f *azqtest.FaultyQueue) error { _, err := f.ApproximateCount(ctx); return err },
	} {
		fq, _, inj, _ := newFaulty(t, faults.Rule{Name: "r", When: faults.When{Operations: []string{op}, Queue: "jobs", Account: "devstoreaccount1"},
			Then: faults.Then{Error: faults.CodeServerBusy}})
		if err := call(fq); !strings.Contains(err.Error(), "ServerBusy") || inj.Hits("r") != 1 {
			t.Errorf("%s: %v, %d hits", op, err, inj.Hits("r"))
		}
	}
}

// A delay holds the call back on the real clock, then runs it; a context
// that ends first ends the call with its error.
func TestFaultyQueueDelay(t *testing.T) {
	const delay = 50 * time.Millisecond
	fq, q, _, _ := newFaulty(t,
		faults.Rule{Name: "slow-put", When: faults.When{Operations: []string{"PutMessage"}, Times: 1}, Then: faults.Then{Delay: delay}},
		faults.Rule{Name: "stuck-get", When: faults.When{Operations: []string{"GetMessages"}}, Then: faults.Then{Delay: 10 * time.Minute}},
	)
	start := time.Now()
	if _, err := fq.Put(context.Background(), "late", nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("the delayed Put took %v, want at least %v", took, delay)
	}
	if n, _ := q.ApproximateCount(context.Background()); n != 1 {
		t.Fatalf("%d messages after the delayed Put, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), delay)
	defer cancel()
	start = time.Now()
	if _, err := fq.Get(ctx, 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get held past its context's end = %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the Get whose context ended took %v, as long as the delay", took)
	}
}
