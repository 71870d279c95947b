package azqtest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/faults"
	"go.uber.org/goleak"
)

// noRetries makes every failure surface at once.
var noRetries = &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}

// The official SDK's whole cycle on a server without a listener, with
// answers of the largest size: 32 messages of 64 KiB in one Get.
func TestInProcessSDKCycle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	srv := azqtest.NewInProcessServer(t)
	if srv.URL != azqtest.InProcessURL || !strings.HasPrefix(srv.ConnectionString, "DefaultEndpointsProtocol=http;") {
		t.Fatalf("URL %s, connection string %s", srv.URL, srv.ConnectionString)
	}
	svc, err := srv.NewServiceClient(noRetries)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateQueue(ctx, "jobs", &azqueue.CreateOptions{Metadata: map[string]*string{"team": ptr("blue")}}); err != nil {
		t.Fatal(err)
	}
	q := svc.NewQueueClient("jobs")
	big := strings.Repeat("m", 64<<10)
	for i := 0; i < 32; i++ {
		if _, err := q.EnqueueMessage(ctx, big, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.EnqueueMessage(ctx, big+"x", nil); !queueerror.HasCode(err, queueerror.RequestBodyTooLarge) {
		t.Fatalf("a message over 64 KiB: %v", err)
	}
	got, err := q.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: ptr(int32(32))})
	if err != nil || len(got.Messages) != 32 {
		t.Fatalf("get 32: %d messages, %v", len(got.Messages), err)
	}
	for _, m := range got.Messages {
		if *m.MessageText != big || *m.DequeueCount != 1 {
			t.Fatalf("message of %d bytes, dequeued %d times", len(*m.MessageText), *m.DequeueCount)
		}
	}
	m := got.Messages[0]
	up, err := q.UpdateMessage(ctx, *m.MessageID, *m.PopReceipt, "updated", &azqueue.UpdateMessageOptions{VisibilityTimeout: ptr(int32(0))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); !queueerror.HasCode(err, queueerror.MessageNotFound) {
		t.Fatalf("delete with the receipt Update replaced: %v", err)
	}
	if _, err := q.DeleteMessage(ctx, *m.MessageID, *up.PopReceipt, nil); err != nil {
		t.Fatal(err)
	}
	props, err := q.GetProperties(ctx, nil)
	if err != nil || *props.ApproximateMessagesCount != 31 || props.Metadata["Team"] == nil || *props.Metadata["Team"] != "blue" {
		t.Fatalf("properties %+v, %v", props, err)
	}
	if _, err := q.ClearMessages(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var re *azcore.ResponseError
	_, err = svc.NewQueueClient("nosuchqueue").PeekMessages(ctx, nil)
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound || re.ErrorCode != string(queueerror.QueueNotFound) {
		t.Fatalf("peek of a missing queue: %v", err)
	}
	srv.Close()
}

func ptr[T any](v T) *T { return &v }

// transports are the two ways a test reaches a server that listens: in
// process, and over loopback TCP with a client of its own (so that no
// connection is reused between cases).
var transports = []struct {
	name string
	of   func(t *testing.T, srv *azqtest.Server) policy.Transporter
}{
	{"in-process", func(t *testing.T, srv *azqtest.Server) policy.Transporter { return srv.Transport() }},
	{"tcp", func(t *testing.T, srv *azqtest.Server) policy.Transporter {
		hc := &http.Client{Transport: &http.Transport{}}
		t.Cleanup(hc.CloseIdleConnections)
		return hc
	}},
}

// queueClient returns a client of the queue "jobs", created in process,
// through tr, with opts (nil: no retries).
func queueClient(t *testing.T, srv *azqtest.Server, tr policy.Transporter, opts *azqueue.ClientOptions) *azqueue.QueueClient {
	t.Helper()
	if _, _, err := srv.Service.CreateQueue(context.Background(), "jobs", nil); err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = noRetries
	}
	o := *opts
	o.Transport = tr
	svc, err := azqueue.NewServiceClientFromConnectionString(srv.ConnectionString, &o)
	if err != nil {
		t.Fatal(err)
	}
	return svc.NewQueueClient("jobs")
}

// A call the server holds back (a fault rule's delay of ten minutes)
// ends as soon as its context is cancelled or runs out, with the
// context's error, as over TCP; in process the handler's goroutine ends
// with it.
func TestCancelEndsBlockedCall(t *testing.T) {
	for _, end := range []string{"cancel", "deadline"} {
		t.Run(end, func(t *testing.T) {
			chains := map[string]string{}
			for _, tr := range transports {
				chains[tr.name] = blockedCall(t, tr.name, tr.of, end)
			}
			if chains["in-process"] != chains["tcp"] {
				t.Fatalf("over TCP:   %s\nin process: %s", chains["tcp"], chains["in-process"])
			}
		})
	}
}

// blockedCall makes a call that the server holds back, ends its context
// as end says, and returns what the call's error is made of.
func blockedCall(t *testing.T, name string, of func(*testing.T, *azqtest.Server) policy.Transporter, end string) string {
	if name == "in-process" {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	}
	srv := azqtest.NewServer(t)
	defer srv.Close()
	q := queueClient(t, srv, of(t, srv), nil)
	if err := srv.Faults.Add(faults.Rule{Name: "stall", When: faults.When{Operations: []string{"PeekMessages"}},
		Then: faults.Then{Delay: 10 * time.Minute}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	want := context.Canceled
	if end == "deadline" {
		// Real time: the SDK's calls take their deadlines from it.
		ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		want = context.DeadlineExceeded
	}
	errc := make(chan error, 1)
	go func() {
		_, err := q.PeekMessages(ctx, nil)
		errc <- err
	}()
	if end == "cancel" {
		waitFor(t, func() bool { return srv.Faults.Hits("stall") == 1 })
		cancel()
	}
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second): // a hang guard only
		t.Fatalf("%s: the call went on after its context ended", name)
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", name, err, want)
	}
	return errChain(err)
}

// waitFor waits until cond holds, checking every millisecond; a hang
// guard fails the test after ten seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("waited ten seconds")
		}
		time.Sleep(time.Millisecond)
	}
}

// The network faults reach the SDK as the same errors over both
// transports, wrapped the same way: a closed connection is io.EOF, a
// reset one a *net.OpError of syscall.ECONNRESET, a cut answer
// io.ErrUnexpectedEOF from its body (wrapped by the SDK, for a POST, in
// an error it does not retry).
func TestNetworkFaultsAsOverTCP(t *testing.T) {
	for _, nw := range faults.Networks {
		for _, op := range []string{"PutMessage", "PeekMessages", "DeleteMessage"} {
			t.Run(string(nw)+"/"+op, func(t *testing.T) {
				chains := map[string]string{}
				for _, tr := range transports {
					srv := azqtest.NewServer(t)
					q := queueClient(t, srv, tr.of(t, srv), nil)
					if err := srv.Faults.Add(faults.Rule{When: faults.When{Operations: []string{op}}, Then: faults.Then{Network: nw}}); err != nil {
						t.Fatal(err)
					}
					var err error
					switch op {
					case "PutMessage":
						_, err = q.EnqueueMessage(context.Background(), "m", nil)
					case "PeekMessages":
						_, err = q.PeekMessages(context.Background(), nil)
					case "DeleteMessage":
						_, err = q.DeleteMessage(context.Background(), "00000000-0000-0000-0000-000000000000", "AAAAAA==", nil)
					}
					var oe *net.OpError
					switch nw {
					case faults.NetworkClose:
						if !errors.Is(err, io.EOF) {
							t.Errorf("%s: %v, want io.EOF", tr.name, err)
						}
					case faults.NetworkReset:
						if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &oe) || oe.Op != "read" {
							t.Errorf("%s: %v, want a *net.OpError of ECONNRESET", tr.name, err)
						}
					case faults.NetworkTruncate:
						if !errors.Is(err, io.ErrUnexpectedEOF) {
							t.Errorf("%s: %v, want io.ErrUnexpectedEOF", tr.name, err)
						}
					}
					chains[tr.name] = errChain(err)
					srv.Close()
				}
				if chains["in-process"] != chains["tcp"] {
					t.Fatalf("over TCP:   %s\nin process: %s", chains["tcp"], chains["in-process"])
				}
			})
		}
	}
}

// After Close, a request fails as one to a closed port does, and no
// goroutine is left of the calls served.
func TestInProcessClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := azqtest.NewInProcessServer(t)
	q := queueClient(t, srv, srv.Transport(), nil)
	for i := 0; i < 20; i++ {
		if _, err := q.EnqueueMessage(context.Background(), "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	srv.Close()
	_, err := q.PeekMessages(context.Background(), nil)
	var oe *net.OpError
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("after Close: %v, want a *net.OpError of ECONNREFUSED", err)
	}
}

// A handler that writes more than the client reads holds nothing up: the
// answer is kept whole, and the handler's goroutine ends with it.
func TestTransportUnreadAnswer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tr := azqtest.NewTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 1 << 10 {
			w.Write(make([]byte, 4<<10))
		}
	}))
	resp, err := (&http.Client{Transport: tr}).Get("http://example.test/big")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(buf); err == nil {
		t.Fatal("read after Close")
	}
	tr.Close()
}

// NewAzureService gives package azure's Service on the server, in
// process, with the options given.
func TestNewAzureService(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewInProcessServer(t)
	svc, err := srv.NewAzureService(&azure.Options{Clock: srv.Clock, Encoding: azure.EncodingBase64})
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := svc.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "job", nil); err != nil {
		t.Fatal(err)
	}
	in, err := srv.Service.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := in.Peek(ctx, 1)
	if err != nil || len(ms) != 1 || ms[0].Content != "am9i" {
		t.Fatalf("in process: %+v, %v; want the base64 of \"job\"", ms, err)
	}
	if svc.Clock() != srv.Clock {
		t.Fatal("the Service does not report the server's clock")
	}
}
