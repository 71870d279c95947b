package azqpubsub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/benbjohnson/clock"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/driver"
)

// A message that another producer put without an envelope is received
// with its text as the body and no metadata, on every back end.
func TestPlainMessageIsReceivedAsItsText(t *testing.T) {
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := newBackend(t)
			defer b.close()
			q, err := b.create(ctx, "plain")
			if err != nil {
				t.Fatal(err)
			}
			const text = `{"order":42} from a shell script`
			if _, err := q.Put(ctx, text, nil); err != nil {
				t.Fatal(err)
			}
			sub := OpenSubscription(q, nil)
			defer sub.Shutdown(ctx)
			m, err := sub.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m.Ack()
			if string(m.Body) != text || m.Metadata != nil {
				t.Fatalf("received %q %v, want the text and no metadata", m.Body, m.Metadata)
			}
		})
	}
}

// What a topic puts is an envelope that the envelope package reads back:
// the one message format of both drivers.
func TestSentMessageIsAnEnvelopeText(t *testing.T) {
	ctx := context.Background()
	q := azq.New()
	topic := OpenTopic(q, nil)
	defer topic.Shutdown(ctx)
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("hi"), Metadata: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	ms, err := q.Peek(ctx, 1)
	if err != nil || len(ms) != 1 {
		t.Fatal(ms, err)
	}
	if want := `{"azqenvelope":1,"metadata":{"k":"v"},"body":"hi"}`; ms[0].Content != want {
		t.Fatalf("the queue holds %s, want %s", ms[0].Content, want)
	}
}

// A message that is not acked by its visibility timeout is delivered
// again; the subscription waits on the queue's clock.
func TestUnackedMessageComesBackAfterTheVisibilityTimeout(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	svc := azq.NewService(azq.WithClock(mock))
	defer svc.Close()
	q, _, err := svc.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	topic := OpenTopic(q, nil)
	defer topic.Shutdown(ctx)
	sub := OpenSubscription(q, &SubscriptionOptions{VisibilityTimeout: time.Hour})
	defer sub.Shutdown(ctx)
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	first, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var am azq.Message
	first.As(&am)
	if got := am.NextVisibleTime.Sub(mock.Now()); got != time.Hour {
		t.Fatalf("the message is hidden for %v, want the hour of the visibility timeout", got)
	}
	mock.Add(time.Hour)
	again, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again.Ack()
	first.Ack() // its receipt is stale: passed over
	again.As(&am)
	if again.LoggableID != first.LoggableID || am.DequeueCount != 2 {
		t.Fatalf("received %s (dequeue count %d) after the timeout, want %s again", again.LoggableID, am.DequeueCount, first.LoggableID)
	}
}

// A fan-out topic with no queues refuses a send rather than drop it.
func TestFanoutWithoutQueuesRefusesSend(t *testing.T) {
	ctx := context.Background()
	topic := OpenFanoutTopic(NewFanout(), nil)
	defer topic.Shutdown(ctx)
	err := topic.Send(ctx, &pubsub.Message{Body: []byte("x")})
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		t.Fatalf("Send: %v, want FailedPrecondition", err)
	}
}

// Fanout.Add and Remove change where later messages go.
func TestFanoutAddRemove(t *testing.T) {
	a, b := azq.New(), azq.New()
	f := NewFanout(a)
	f.Add(b)
	if got := f.Queues(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Queues = %v", got)
	}
	if !f.Remove(a) || f.Remove(a) {
		t.Fatal("Remove of a member, then of a non-member")
	}
	if got := f.Queues(); len(got) != 1 || got[0] != b {
		t.Fatalf("Queues = %v", got)
	}
}

// A fan-out message's AfterSend sees the message as each queue took it,
// in the order of the set; *azq.Message is the first queue's.
func TestFanoutAfterSendSeesEachQueuesMessage(t *testing.T) {
	ctx := context.Background()
	a, b := azq.New(), azq.New()
	defer a.Close()
	defer b.Close()
	var one azq.Message
	var all []azq.Message
	m := &driver.Message{Body: []byte("x"), AfterSend: func(as func(any) bool) error {
		if !as(&one) || !as(&all) {
			return errors.New("As(*azq.Message) or As(*[]azq.Message) failed")
		}
		return nil
	}}
	if err := newTopic(nil, NewFanout(a, b), nil).SendBatch(ctx, []*driver.Message{m}); err != nil {
		t.Fatal(err)
	}
	for i, q := range []*azq.Queue{a, b} {
		got, err := q.Peek(ctx, 32)
		if err != nil || len(got) != 1 {
			t.Fatalf("queue %d holds %v, %v; want the one message", i, got, err)
		}
		if len(all) != 2 || all[i].ID != got[0].ID {
			t.Fatalf("AfterSend's messages = %v; want queue %d's %v at %d", all, i, got[0].ID, i)
		}
	}
	if one.ID != all[0].ID {
		t.Fatalf("AfterSend's *azq.Message = %v; want the first queue's %v", one.ID, all[0].ID)
	}
}

// A subscription or topic on a queue name (as azq:// URLs open) exposes
// the queue that the name stands for when As is called, and none while
// no queue has it.
func TestAsOnANamedQueueIsTheCurrentQueue(t *testing.T) {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	sub := OpenSubscription(svc.Named("jobs"), nil)
	defer sub.Shutdown(ctx)
	topic := OpenTopic(svc.Named("jobs"), nil)
	defer topic.Shutdown(ctx)
	var q *azq.Queue
	if sub.As(&q) || topic.As(&q) {
		t.Fatal("As(**azq.Queue) succeeded before the queue exists")
	}
	created, _, err := svc.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.As(&q) || q != created {
		t.Fatalf("Subscription.As(**azq.Queue) = %p; want the queue created, %p", q, created)
	}
	q = nil
	if !topic.As(&q) || q != created {
		t.Fatalf("Topic.As(**azq.Queue) = %p; want the queue created, %p", q, created)
	}
}

func TestErrorCodes(t *testing.T) {
	tests := []struct {
		err  error
		want gcerrors.ErrorCode
	}{
		{context.Canceled, gcerrors.Canceled},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), gcerrors.DeadlineExceeded},
		{azq.ErrQueueNotFound, gcerrors.NotFound},
		{azq.ErrMessageNotFound, gcerrors.NotFound},
		{azq.ErrQueueAlreadyExists, gcerrors.AlreadyExists},
		{azq.ErrMessageTooLarge, gcerrors.InvalidArgument},
		{azq.ErrInvalidQueueName, gcerrors.InvalidArgument},
		{&azq.Error{Code: "AuthenticationFailed", StatusCode: http.StatusForbidden}, gcerrors.PermissionDenied},
		{&azq.Error{Code: azq.CodeQueueBeingDeleted, StatusCode: http.StatusConflict}, gcerrors.FailedPrecondition},
		{&azq.Error{Code: "ServerBusy", StatusCode: http.StatusServiceUnavailable}, gcerrors.ResourceExhausted},
		{&azq.Error{Code: azq.CodeInternalError, StatusCode: http.StatusInternalServerError}, gcerrors.Internal},
		{&azure.ResponseTooLargeError{}, gcerrors.Internal},
		{errNoQueues, gcerrors.FailedPrecondition},
		{errors.New("something else"), gcerrors.Unknown},
	}
	for _, tt := range tests {
		if got := errorCode(tt.err); got != tt.want {
			t.Errorf("errorCode(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A metadata name or value that is not UTF-8 is refused at Send, with
// InvalidArgument.
func TestNonUTF8MetadataIsInvalidArgument(t *testing.T) {
	ctx := context.Background()
	topic := OpenTopic(azq.New(), nil)
	defer topic.Shutdown(ctx)
	err := topic.Send(ctx, &pubsub.Message{Metadata: map[string]string{"k": "\xbd"}})
	if gcerrors.Code(err) != gcerrors.InvalidArgument {
		t.Fatalf("Send: %v, want InvalidArgument", err)
	}
}

func TestURLOpener(t *testing.T) {
	ctx := context.Background()
	svc := azq.NewService()
	defer svc.Close()
	for _, n := range []string{"aaa", "bbb"} {
		if _, _, err := svc.CreateQueue(ctx, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	mux := new(pubsub.URLMux)
	o := &URLOpener{Service: svc}
	mux.RegisterTopic(Scheme, o)
	mux.RegisterSubscription(Scheme, o)

	topic, err := mux.OpenTopic(ctx, "azq://aaa,bbb?ttl=2h")
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Shutdown(ctx)
	var f *Fanout
	if !topic.As(&f) || len(f.Queues()) != 2 {
		t.Fatal("azq://aaa,bbb is not a fan-out topic of two queues")
	}
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"aaa", "bbb"} {
		sub, err := mux.OpenSubscription(ctx, "azq://"+n+"?visibility=90s")
		if err != nil {
			t.Fatal(err)
		}
		m, err := sub.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var am azq.Message
		m.As(&am)
		if got := am.ExpirationTime.Sub(am.InsertionTime); got != 2*time.Hour {
			t.Errorf("queue %s: the message lives %v, want the URL's 2h", n, got)
		}
		if got := am.NextVisibleTime.Sub(svc.Clock().Now()); got < 89*time.Second || got > 90*time.Second {
			t.Errorf("queue %s: the message is hidden for %v, want the URL's 90s", n, got)
		}
		m.Ack()
		sub.Shutdown(ctx)
	}

	// A queue that does not exist yet opens, and a send to it is NotFound.
	missing, err := mux.OpenTopic(ctx, "azq://later")
	if err != nil {
		t.Fatal(err)
	}
	defer missing.Shutdown(ctx)
	if err := missing.Send(ctx, &pubsub.Message{}); gcerrors.Code(err) != gcerrors.NotFound {
		t.Fatalf("send to a missing queue: %v, want NotFound", err)
	}

	for _, bad := range []string{
		"azq://aaa/path",
		"azq://Bad_Name",
		"azq://aaa?unknown=1",
		"azq://aaa?ttl=soon",
		"azq://aaa?ttl=-1h",
		"azq://aaa?ttl=1h&ttl=2h",
	} {
		if topic, err := mux.OpenTopic(ctx, bad); err == nil {
			topic.Shutdown(ctx)
			t.Errorf("OpenTopic(%s) succeeded", bad)
		}
	}
	for _, bad := range []string{
		"azq://aaa,bbb",
		"azq://aaa?visibility=0s",
		"azq://aaa?visibility=later",
		"azq://aaa?ttl=1h",
	} {
		if sub, err := mux.OpenSubscription(ctx, bad); err == nil {
			sub.Shutdown(ctx)
			t.Errorf("OpenSubscription(%s) succeeded", bad)
		}
	}
}

// azurequeue:// URLs on the default mux take the account from the
// environment; here azq's REST server over loopback.
func TestAzureURLFromTheEnvironment(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewServer(t)
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", srv.ConnectionString)
	if _, _, err := srv.Service.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	topic, err := pubsub.OpenTopic(ctx, "azurequeue://orders")
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Shutdown(ctx)
	sub, err := pubsub.OpenSubscription(ctx, "azurequeue://orders")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Shutdown(ctx)
	var aq *azure.Queue
	if !sub.As(&aq) || aq.Name() != "orders" {
		t.Fatal("the subscription is not on an *azure.Queue named orders")
	}
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("over REST")}); err != nil {
		t.Fatal(err)
	}
	m, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Ack()
	if string(m.Body) != "over REST" {
		t.Fatalf("received %q", m.Body)
	}
	if n, _ := srv.Service.Queue("orders"); n != nil {
		if c, _ := n.ApproximateCount(ctx); c != 0 {
			// The ack goes out in the background; Shutdown waits for it.
			sub.Shutdown(ctx)
			if c, _ := n.ApproximateCount(ctx); c != 0 {
				t.Fatalf("%d messages left after the ack", c)
			}
		}
	}
}

func TestConnectionStringFromAccountAndKey(t *testing.T) {
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_KEY", "a2V5")
	t.Setenv("AZURE_STORAGE_DOMAIN", "")
	t.Setenv("AZURE_STORAGE_PROTOCOL", "")
	got, err := connectionStringFromEnv()
	if want := "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net"; err != nil || got != want {
		t.Fatalf("connectionStringFromEnv = %q, %v; want %q", got, err, want)
	}
	t.Setenv("AZURE_STORAGE_KEY", "")
	if _, err := connectionStringFromEnv(); err == nil {
		t.Fatal("no key: no error")
	}
}

// appendUUID writes an ID as MessageID.String does.
func TestAppendUUIDIsMessageIDString(t *testing.T) {
	for range 100 {
		m, err := azq.New().Put(context.Background(), "x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(appendUUID(nil, m.ID)); got != m.ID.String() {
			t.Fatalf("appendUUID = %s, String = %s", got, m.ID)
		}
	}
}

// countingQueue is an in-memory queue that cannot wait for messages, as a
// remote one cannot, and counts its Gets.
type countingQueue struct {
	q    *azq.Queue
	clk  clock.Clock
	gets atomic.Int64
}

func (c *countingQueue) Clock() clock.Clock { return c.clk }
func (c *countingQueue) Put(ctx context.Context, s string, o *azq.PutOptions) (azq.Message, error) {
	return c.q.Put(ctx, s, o)
}
func (c *countingQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	c.gets.Add(1)
	return c.q.Get(ctx, n, v)
}
func (c *countingQueue) Peek(ctx context.Context, n int) ([]azq.Message, error) {
	return c.q.Peek(ctx, n)
}
func (c *countingQueue) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, v time.Duration, s *string) (azq.UpdateResult, error) {
	return c.q.Update(ctx, id, r, v, s)
}
func (c *countingQueue) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	return c.q.Delete(ctx, id, r)
}
func (c *countingQueue) Clear(ctx context.Context) error { return c.q.Clear(ctx) }
func (c *countingQueue) ApproximateCount(ctx context.Context) (int, error) {
	return c.q.ApproximateCount(ctx)
}

// An idle subscription on a queue that cannot wait (a remote one) asks it
// about once a second however often ReceiveBatch is called, each call
// waiting a quarter of a second at most; a message is then taken at the
// next poll, and polling is quick again while messages come.
func TestIdlePolledSubscriptionAsksAboutOnceASecond(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	cq := &countingQueue{q: azq.New(azq.WithClock(mock)), clk: mock}
	// The mock as the subscription's own clock: waited on alone, so that
	// the polls follow the mock time this test moves, and real time, which
	// the queue's clock alone would let end a wait too, plays no part.
	ds := newSubscription(cq, &SubscriptionOptions{Clock: mock})
	// receive calls ReceiveBatch, moving the mock clock until it returns,
	// and returns what it got and how long it took on the mock clock.
	receive := func() ([]*driver.Message, time.Duration) {
		start := mock.Now()
		type result struct {
			ms  []*driver.Message
			err error
		}
		done := make(chan result, 1)
		go func() {
			ms, err := ds.ReceiveBatch(ctx, 32)
			done <- result{ms, err}
		}()
		for {
			select {
			case r := <-done:
				if r.err != nil {
					t.Fatal(r.err)
				}
				return r.ms, mock.Now().Sub(start)
			default:
				mock.Add(10 * time.Millisecond)
				runtime.Gosched()
			}
		}
	}
	for mock.Now().Sub(time.Unix(0, 0)) < 20*time.Second {
		ms, took := receive()
		if len(ms) != 0 {
			t.Fatalf("received %d messages from an empty queue", len(ms))
		}
		if took > maxWait+50*time.Millisecond {
			t.Fatalf("an empty ReceiveBatch took %v, more than about %v", took, maxWait)
		}
	}
	if gets := cq.gets.Load(); gets < 15 || gets > 30 {
		t.Fatalf("%d Gets in 20 idle seconds, want about one a second", gets)
	}
	if _, err := cq.Put(ctx, "x", nil); err != nil {
		t.Fatal(err)
	}
	var got []*driver.Message
	for elapsed := time.Duration(0); len(got) == 0; {
		ms, took := receive()
		got, elapsed = ms, elapsed+took
		if elapsed > maxPoll+100*time.Millisecond {
			t.Fatalf("the message was not received within a poll interval (%v)", elapsed)
		}
	}
	if err := ds.SendAcks(ctx, []driver.AckID{got[0].AckID}); err != nil {
		t.Fatal(err)
	}
}

// A message whose envelope exceeds the service's 64 KiB is refused at
// Send with InvalidArgument, on the in-process and the remote back ends.
func TestOversizedMessageIsInvalidArgument(t *testing.T) {
	for _, name := range []string{"memory", "azure"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := backends[name](t)
			defer b.close()
			q, err := b.create(ctx, "big")
			if err != nil {
				t.Fatal(err)
			}
			topic := OpenTopic(q, nil)
			defer topic.Shutdown(ctx)
			err = topic.Send(ctx, &pubsub.Message{Body: make([]byte, 64<<10)})
			if gcerrors.Code(err) != gcerrors.InvalidArgument {
				t.Fatalf("Send of 64 KiB of zero bytes (more once escaped): %v, want InvalidArgument", err)
			}
			if n, _ := q.ApproximateCount(ctx); n != 0 {
				t.Fatalf("%d messages in the queue after the refused send", n)
			}
		})
	}
}

// A URLOpener serves azq:// URLs from any back end of the service
// contract: here package azure's Service, against azq's REST server.
func TestURLOpenerOnAnotherBackEnd(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewServer(t)
	svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, &azure.Options{Clock: srv.Clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateQueue(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	mux := new(pubsub.URLMux)
	o := &URLOpener{Service: svc}
	mux.RegisterTopic(Scheme, o)
	mux.RegisterSubscription(Scheme, o)
	topic, err := mux.OpenTopic(ctx, "azq://jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Shutdown(ctx)
	sub, err := mux.OpenSubscription(ctx, "azq://jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Shutdown(ctx)
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("remote")}); err != nil {
		t.Fatal(err)
	}
	m, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Ack()
	var aq *azure.Queue
	if string(m.Body) != "remote" || !sub.As(&aq) || aq.Name() != "jobs" {
		t.Fatalf("received %q; the subscription's queue is %v", m.Body, aq)
	}
	if _, err := mux.OpenTopic(ctx, "azq://Bad_Name"); err == nil {
		t.Fatal("azq://Bad_Name opened")
	}
}

// signalingQueue is a remote queue that says when a Get found it empty;
// its Clock is the azure.Queue's.
type signalingQueue struct {
	*azure.Queue
	empty chan struct{}
}

func (q *signalingQueue) Get(ctx context.Context, n int, v time.Duration) ([]azq.Message, error) {
	ms, err := q.Queue.Get(ctx, n, v)
	if err == nil && len(ms) == 0 {
		select {
		case q.empty <- struct{}{}:
		default:
		}
	}
	return ms, err
}

// A subscription on a remote queue whose clock is azq's test server's
// mock (azure.Options.Clock), in a test that never moves it, receives a
// message sent after it found the queue empty: its poll waits end in real
// time too. Before they did, the Receive waited for ever.
func TestPolledSubscriptionOnUnmovedMockClock(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewInProcessServer(t)
	svc, err := srv.NewAzureService(&azure.Options{Clock: srv.Clock})
	if err != nil {
		t.Fatal(err)
	}
	aq, _, err := svc.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := &signalingQueue{Queue: aq, empty: make(chan struct{}, 1)}
	sub := OpenSubscription(q, nil)
	defer sub.Shutdown(ctx)
	got := make(chan string, 1)
	go func() {
		m, err := sub.Receive(ctx)
		if err != nil {
			got <- err.Error()
			return
		}
		m.Ack()
		got <- string(m.Body)
	}()
	<-q.empty // the subscription waits to poll again
	topic := OpenTopic(aq, nil)
	defer topic.Shutdown(ctx)
	if err := topic.Send(ctx, &pubsub.Message{Body: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-got:
		if body != "late" {
			t.Fatalf("received %q", body)
		}
	case <-time.After(10 * time.Second): // a hang guard only
		t.Fatal("the message sent after the first poll was not received: the subscription waits on the mock clock")
	}
}
