package sdktest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/sas"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// env is one server behind httptest with SDK clients for the
// development account.
type env struct {
	t        *testing.T
	clk      *clock.Mock
	srv      *server.Server
	hs       *httptest.Server
	endpoint string // path-style account endpoint, no trailing slash
	cred     *azqueue.SharedKeyCredential
	svc      *azqueue.ServiceClient
}

// start is a fixed instant near real time: SAS tokens the SDK generates
// carry real-clock expiry times, so the mock must not be far from them.
func start() time.Time { return time.Now().UTC().Truncate(time.Second) }

func newEnv(t testing.TB, opts server.Options) *env {
	clk := clock.NewMock()
	clk.Set(start())
	if opts.Clock == nil {
		opts.Clock = clk
	}
	s := server.New(opts)
	hs := httptest.NewServer(s)
	tt, _ := t.(*testing.T)
	e := &env{t: tt, clk: clk, srv: s, hs: hs, endpoint: hs.URL + "/devstoreaccount1"}
	t.Cleanup(func() { hs.Close(); s.Close() })
	acct := server.DevelopmentAccount()
	cred, err := azqueue.NewSharedKeyCredential(acct.Name, acct.Keys[0])
	if err != nil {
		t.Fatal(err)
	}
	e.cred = cred
	e.svc, err = azqueue.NewServiceClientWithSharedKeyCredential(e.endpoint+"/", cred, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// clientOptions disables retries so that every error surfaces at once.
func clientOptions() *azqueue.ClientOptions {
	return &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
}

func (e *env) queue(t *testing.T, name string) *azqueue.QueueClient {
	t.Helper()
	if _, err := e.svc.CreateQueue(context.Background(), name, nil); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return e.svc.NewQueueClient(name)
}

func wantCode(t *testing.T, err error, code queueerror.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got success", code)
	}
	if !queueerror.HasCode(err, code) {
		t.Fatalf("want error code %s, got %v", code, err)
	}
}

func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("want a ResponseError with status %d, got %v", status, err)
	}
	if re.StatusCode != status {
		t.Fatalf("want status %d, got %d (%s)", status, re.StatusCode, re.ErrorCode)
	}
}

func TestSDKQueueLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	md := map[string]*string{"team": to.Ptr("blue")}

	resp, err := e.svc.CreateQueue(ctx, "orders", &azqueue.CreateOptions{Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	if resp.RequestID == nil || len(*resp.RequestID) != 36 || resp.Version == nil || resp.Date == nil {
		t.Fatalf("missing common headers: %+v", resp)
	}
	// Same metadata again: 204, which the SDK accepts.
	if _, err := e.svc.CreateQueue(ctx, "orders", &azqueue.CreateOptions{Metadata: md}); err != nil {
		t.Fatalf("idempotent create: %v", err)
	}
	_, err = e.svc.CreateQueue(ctx, "orders", &azqueue.CreateOptions{Metadata: map[string]*string{"team": to.Ptr("red")}})
	wantCode(t, err, queueerror.QueueAlreadyExists)
	wantStatus(t, err, http.StatusConflict)

	_, err = e.svc.CreateQueue(ctx, "Bad_Name", nil)
	wantCode(t, err, queueerror.InvalidResourceName)
	_, err = e.svc.CreateQueue(ctx, "ab", nil)
	wantCode(t, err, queueerror.OutOfRangeInput)
	// Delete Queue of an invalid name is refused as the name, as Azure
	// answers every request on it, not as a missing queue.
	_, err = e.svc.DeleteQueue(ctx, "Bad_Name", nil)
	wantCode(t, err, queueerror.InvalidResourceName)
	wantStatus(t, err, http.StatusBadRequest)
	_, err = e.svc.DeleteQueue(ctx, "ab", nil)
	wantCode(t, err, queueerror.OutOfRangeInput)
	wantStatus(t, err, http.StatusBadRequest)
	_, err = e.svc.CreateQueue(ctx, "okname", &azqueue.CreateOptions{Metadata: map[string]*string{"1bad": to.Ptr("x")}})
	wantCode(t, err, queueerror.InvalidMetadata)
	_, err = e.svc.CreateQueue(ctx, "okname", &azqueue.CreateOptions{Metadata: map[string]*string{"": to.Ptr("x")}})
	wantCode(t, err, queueerror.EmptyMetadataKey)
	_, err = e.svc.CreateQueue(ctx, "okname", &azqueue.CreateOptions{Metadata: map[string]*string{"big": to.Ptr(strings.Repeat("v", 8192))}})
	wantCode(t, err, queueerror.MetadataTooLarge)

	q := e.svc.NewQueueClient("orders")
	props, err := q.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if props.ApproximateMessagesCount == nil || *props.ApproximateMessagesCount != 0 {
		t.Fatalf("count = %v", props.ApproximateMessagesCount)
	}
	if v := props.Metadata["Team"]; v == nil || *v != "blue" {
		t.Fatalf("metadata = %v", props.Metadata)
	}
	if _, err := q.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: map[string]*string{"owner": to.Ptr("ops"), "tier": to.Ptr("1")}}); err != nil {
		t.Fatal(err)
	}
	props, err = q.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(props.Metadata) != 2 || *props.Metadata["Owner"] != "ops" {
		t.Fatalf("metadata after set = %v", props.Metadata)
	}

	if _, err := e.svc.DeleteQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.DeleteQueue(ctx, "orders", nil)
	wantCode(t, err, queueerror.QueueNotFound)
	_, err = q.GetProperties(ctx, nil)
	wantCode(t, err, queueerror.QueueNotFound) // HEAD-less GET: code from header
	_, err = q.EnqueueMessage(ctx, "x", nil)
	wantCode(t, err, queueerror.QueueNotFound)
}

func TestSDKListQueues(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	names := []string{"alpha-1", "alpha-2", "alpha-3", "beta-1", "gamma"}
	for _, n := range names {
		if _, err := e.svc.CreateQueue(ctx, n, &azqueue.CreateOptions{Metadata: map[string]*string{"name": to.Ptr(n)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Metadata set through the core keeps its case in the listing.
	q, err := e.srv.Service("devstoreaccount1").Queue("gamma")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.SetMetadata(ctx, map[string]string{"MixedCase": "v"}); err != nil {
		t.Fatal(err)
	}

	var got []string
	pages := 0
	pager := e.svc.NewListQueuesPager(&azqueue.ListQueuesOptions{Prefix: to.Ptr("alpha"), MaxResults: to.Ptr(int32(2)), Include: azqueue.ListQueuesInclude{Metadata: true}})
	for pager.More() {
		p, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, it := range p.Queues {
			got = append(got, *it.Name)
			if v := it.Metadata["name"]; v == nil || *v != *it.Name {
				t.Fatalf("metadata of %s = %v", *it.Name, it.Metadata)
			}
		}
	}
	if strings.Join(got, ",") != "alpha-1,alpha-2,alpha-3" || pages != 2 {
		t.Fatalf("listed %v in %d pages", got, pages)
	}

	pager = e.svc.NewListQueuesPager(&azqueue.ListQueuesOptions{Prefix: to.Ptr("gam"), Include: azqueue.ListQueuesInclude{Metadata: true}})
	p, err := pager.NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The SDK lower-cases listed metadata names; the raw XML keeps the
	// stored case (TestRawListKeepsMetadataCase).
	if len(p.Queues) != 1 || p.Queues[0].Metadata["mixedcase"] == nil {
		t.Fatalf("gamma listing = %+v", p.Queues)
	}

	_, err = e.svc.NewListQueuesPager(&azqueue.ListQueuesOptions{Marker: to.Ptr("not-a-marker")}).NextPage(ctx)
	wantCode(t, err, queueerror.InvalidMarker)
	// Over 5000 is served as 5000, as Azure's REST specification says.
	p, err = e.svc.NewListQueuesPager(&azqueue.ListQueuesOptions{MaxResults: to.Ptr(int32(5001))}).NextPage(ctx)
	if err != nil || len(p.Queues) != len(names) || p.MaxResults == nil || *p.MaxResults != 5001 {
		t.Fatalf("maxresults 5001: %+v %v", p, err)
	}
	_, err = e.svc.NewListQueuesPager(&azqueue.ListQueuesOptions{MaxResults: to.Ptr(int32(-1))}).NextPage(ctx)
	wantCode(t, err, queueerror.OutOfRangeQueryParameterValue)
}

func TestSDKMessageCycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	q := e.queue(t, "work")

	put, err := q.EnqueueMessage(ctx, "hello <&> world", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(put.Messages) != 1 || put.Messages[0].MessageID == nil || put.Messages[0].PopReceipt == nil {
		t.Fatalf("enqueue response = %+v", put)
	}
	em := put.Messages[0]
	if !em.InsertionTime.Equal(e.clk.Now()) || !em.ExpirationTime.Equal(e.clk.Now().Add(7*24*time.Hour)) || !em.TimeNextVisible.Equal(e.clk.Now()) {
		t.Fatalf("times = %v %v %v, now %v", em.InsertionTime, em.ExpirationTime, em.TimeNextVisible, e.clk.Now())
	}

	peek, err := q.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(5))})
	if err != nil {
		t.Fatal(err)
	}
	if len(peek.Messages) != 1 || *peek.Messages[0].MessageText != "hello <&> world" || *peek.Messages[0].DequeueCount != 0 {
		t.Fatalf("peek = %+v", peek.Messages)
	}

	got, err := q.DequeueMessage(ctx, &azqueue.DequeueMessageOptions{VisibilityTimeout: to.Ptr(int32(60))})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 {
		t.Fatalf("dequeued %d", len(got.Messages))
	}
	m := got.Messages[0]
	if *m.MessageID != *em.MessageID || *m.DequeueCount != 1 || *m.MessageText != "hello <&> world" ||
		!m.TimeNextVisible.Equal(e.clk.Now().Add(time.Minute)) {
		t.Fatalf("dequeued %+v", m)
	}
	// The enqueue receipt died with the dequeue.
	_, err = q.DeleteMessage(ctx, *em.MessageID, *em.PopReceipt, nil)
	wantCode(t, err, queueerror.MessageNotFound)
	wantStatus(t, err, http.StatusNotFound)

	upd, err := q.UpdateMessage(ctx, *m.MessageID, *m.PopReceipt, "progress 50%", &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(int32(120))})
	if err != nil {
		t.Fatal(err)
	}
	if upd.PopReceipt == nil || *upd.PopReceipt == *m.PopReceipt || upd.TimeNextVisible == nil || !upd.TimeNextVisible.Equal(e.clk.Now().Add(2*time.Minute)) {
		t.Fatalf("update = %+v", upd)
	}
	_, err = q.UpdateMessage(ctx, *m.MessageID, *m.PopReceipt, "stale", nil)
	wantCode(t, err, queueerror.MessageNotFound)

	e.clk.Add(2 * time.Minute)
	got, err = q.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: to.Ptr(int32(32))})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || *got.Messages[0].MessageText != "progress 50%" || *got.Messages[0].DequeueCount != 2 {
		t.Fatalf("after update: %+v", got.Messages)
	}
	if _, err := q.DeleteMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, nil); err != nil {
		t.Fatal(err)
	}
	_, err = q.DeleteMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, nil)
	wantCode(t, err, queueerror.MessageNotFound)

	// Garbage ids are 404 MessageNotFound, as in Azure.
	_, err = q.DeleteMessage(ctx, "not-a-uuid", *got.Messages[0].PopReceipt, nil)
	wantCode(t, err, queueerror.MessageNotFound)

	for i := 0; i < 3; i++ {
		if _, err := q.EnqueueMessage(ctx, "m", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.ClearMessages(ctx, nil); err != nil {
		t.Fatal(err)
	}
	props, err := q.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *props.ApproximateMessagesCount != 0 {
		t.Fatalf("count after clear = %d", *props.ApproximateMessagesCount)
	}
	empty, err := q.DequeueMessage(ctx, nil)
	if err != nil || len(empty.Messages) != 0 {
		t.Fatalf("dequeue of empty queue: %v %v", empty.Messages, err)
	}
}

// TestSDKVisibilityWithMockClock: a message put with a one-hour visibility
// timeout comes out exactly when the mock clock reaches that hour.
func TestSDKVisibilityWithMockClock(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	q := e.queue(t, "delayed")
	if _, err := q.EnqueueMessage(ctx, "later", &azqueue.EnqueueMessageOptions{VisibilityTimeout: to.Ptr(int32(3600))}); err != nil {
		t.Fatal(err)
	}
	got, err := q.DequeueMessage(ctx, nil)
	if err != nil || len(got.Messages) != 0 {
		t.Fatalf("before the hour: %v %v", got.Messages, err)
	}
	e.clk.Add(time.Hour - time.Second)
	if got, _ := q.DequeueMessage(ctx, nil); len(got.Messages) != 0 {
		t.Fatal("visible a second early")
	}
	e.clk.Add(time.Second)
	got, err = q.DequeueMessage(ctx, nil)
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].MessageText != "later" {
		t.Fatalf("after the hour: %v %v", got.Messages, err)
	}
	// TTL: a 10-second message is gone after 10 seconds.
	if _, err := q.EnqueueMessage(ctx, "short", &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(10))}); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(10 * time.Second)
	if p, _ := q.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(32))}); len(p.Messages) != 0 {
		t.Fatalf("expired message still peeked: %+v", p.Messages)
	}
	// Never-expiring messages report 9999-12-31.
	put, err := q.EnqueueMessage(ctx, "forever", &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(-1))})
	if err != nil {
		t.Fatal(err)
	}
	if put.Messages[0].ExpirationTime.Year() != 9999 {
		t.Fatalf("expiration = %v", put.Messages[0].ExpirationTime)
	}
}

func TestSDKMessageErrors(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	q := e.queue(t, "errs")
	tests := []struct {
		name   string
		call   func() error
		code   queueerror.Code
		status int
	}{
		{"ttl zero", func() error {
			_, err := q.EnqueueMessage(ctx, "x", &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(0))})
			return err
		}, queueerror.OutOfRangeQueryParameterValue, 400},
		{"ttl -2", func() error {
			_, err := q.EnqueueMessage(ctx, "x", &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(-2))})
			return err
		}, queueerror.OutOfRangeQueryParameterValue, 400},
		{"put visibility over 7 days", func() error {
			_, err := q.EnqueueMessage(ctx, "x", &azqueue.EnqueueMessageOptions{VisibilityTimeout: to.Ptr(int32(604801))})
			return err
		}, queueerror.OutOfRangeQueryParameterValue, 400},
		{"put visibility not below ttl", func() error {
			_, err := q.EnqueueMessage(ctx, "x", &azqueue.EnqueueMessageOptions{VisibilityTimeout: to.Ptr(int32(60)), TimeToLive: to.Ptr(int32(60))})
			return err
		}, queueerror.InvalidQueryParameterValue, 400},
		{"message too large", func() error {
			_, err := q.EnqueueMessage(ctx, strings.Repeat("a", 65537), nil)
			return err
		}, queueerror.RequestBodyTooLarge, 413},
		{"get 33", func() error {
			_, err := q.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: to.Ptr(int32(33))})
			return err
		}, queueerror.OutOfRangeQueryParameterValue, 400},
		{"get visibility 0", func() error {
			_, err := q.DequeueMessage(ctx, &azqueue.DequeueMessageOptions{VisibilityTimeout: to.Ptr(int32(0))})
			return err
		}, queueerror.OutOfRangeQueryParameterValue, 400},
		{"peek 0", func() error {
			_, err := q.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(0))})
			return err
		}, queueerror.OutOfRangeQueryParameterValue, 400},
		{"garbage receipt", func() error {
			_, err := q.DeleteMessage(ctx, "663d89aa-d1d9-42a2-9a6a-fcf822a97d2c", "garbage", nil)
			return err
		}, queueerror.InvalidQueryParameterValue, 400},
		{"unknown message", func() error {
			put, err := q.EnqueueMessage(ctx, "x", nil)
			if err != nil {
				return err
			}
			_, err = q.DeleteMessage(ctx, "663d89aa-d1d9-42a2-9a6a-fcf822a97d2c", *put.Messages[0].PopReceipt, nil)
			return err
		}, queueerror.MessageNotFound, 404},
		{"update visibility over 7 days", func() error {
			put, err := q.EnqueueMessage(ctx, "x", nil)
			if err != nil {
				return err
			}
			_, err = q.UpdateMessage(ctx, *put.Messages[0].MessageID, *put.Messages[0].PopReceipt, "y", &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(int32(604801))})
			return err
		}, queueerror.OutOfRangeQueryParameterValue, 400},
		{"update too large", func() error {
			put, err := q.EnqueueMessage(ctx, "x", nil)
			if err != nil {
				return err
			}
			_, err = q.UpdateMessage(ctx, *put.Messages[0].MessageID, *put.Messages[0].PopReceipt, strings.Repeat("é", 32769), nil)
			return err
		}, queueerror.RequestBodyTooLarge, 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantCode(t, err, tc.code)
			wantStatus(t, err, tc.status)
		})
	}
	// The largest message Azure accepts: 65,536 bytes of UTF-8 after
	// unescaping, with characters that need escaping.
	big := strings.Repeat("<&>\"'é", 100) // 7 bytes per repeat
	big += strings.Repeat("x", 65536-len(big))
	if _, err := q.EnqueueMessage(ctx, big, nil); err != nil {
		t.Fatalf("65536-byte message: %v", err)
	}
}

func TestSDKAccessPolicies(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	q := e.queue(t, "acl")
	st := e.clk.Now().Add(-time.Hour)
	ex := e.clk.Now().Add(time.Hour)
	acl := []*azqueue.SignedIdentifier{
		{ID: to.Ptr("readers"), AccessPolicy: &azqueue.AccessPolicy{Start: &st, Expiry: &ex, Permission: to.Ptr("r")}},
		{ID: to.Ptr("workers"), AccessPolicy: &azqueue.AccessPolicy{Expiry: &ex, Permission: to.Ptr("raup")}},
	}
	if _, err := q.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: acl}); err != nil {
		t.Fatal(err)
	}
	got, err := q.GetAccessPolicy(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.SignedIdentifiers) != 2 || *got.SignedIdentifiers[0].ID != "readers" ||
		!got.SignedIdentifiers[0].AccessPolicy.Start.Equal(st) || !got.SignedIdentifiers[1].AccessPolicy.Expiry.Equal(ex) ||
		*got.SignedIdentifiers[1].AccessPolicy.Permission != "raup" || got.SignedIdentifiers[1].AccessPolicy.Start != nil {
		t.Fatalf("acl = %+v", got.SignedIdentifiers)
	}
	six := make([]*azqueue.SignedIdentifier, 6)
	for i := range six {
		six[i] = &azqueue.SignedIdentifier{ID: to.Ptr(string(rune('a' + i))), AccessPolicy: &azqueue.AccessPolicy{Permission: to.Ptr("r")}}
	}
	_, err = q.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: six})
	wantCode(t, err, queueerror.InvalidXMLDocument)

	// A service SAS bound to the stored policy works, and stops working
	// when the policy is removed.
	qp, err := sas.QueueSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, QueueName: "acl", Identifier: "workers"}.SignWithSharedKey(e.cred)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/acl?"+qp.Encode(), clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sq.EnqueueMessage(ctx, "via policy", nil); err != nil {
		t.Fatalf("enqueue with policy SAS: %v", err)
	}
	if _, err := q.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: acl[:1]}); err != nil {
		t.Fatal(err)
	}
	_, err = sq.EnqueueMessage(ctx, "revoked", nil)
	wantStatus(t, err, http.StatusForbidden)

	if _, err := q.SetAccessPolicy(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, err = q.GetAccessPolicy(ctx, nil)
	if err != nil || len(got.SignedIdentifiers) != 0 {
		t.Fatalf("cleared acl = %+v, %v", got.SignedIdentifiers, err)
	}
}

func TestSDKServiceProperties(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	props, err := e.svc.GetServiceProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if props.Logging == nil || *props.Logging.Version != "1.0" || len(props.CORS) != 0 {
		t.Fatalf("defaults = %+v", props)
	}
	rule := &azqueue.CORSRule{AllowedOrigins: to.Ptr("https://app.example"), AllowedMethods: to.Ptr("GET,PUT"),
		AllowedHeaders: to.Ptr("x-ms-meta*"), ExposedHeaders: to.Ptr("x-ms-request-id"), MaxAgeInSeconds: to.Ptr(int32(600))}
	set, err := e.svc.SetProperties(ctx, &azqueue.SetPropertiesOptions{CORS: []*azqueue.CORSRule{rule},
		HourMetrics: &azqueue.Metrics{Version: to.Ptr("1.0"), Enabled: to.Ptr(true), IncludeAPIs: to.Ptr(true),
			RetentionPolicy: &azqueue.RetentionPolicy{Enabled: to.Ptr(true), Days: to.Ptr(int32(7))}}})
	if err != nil {
		t.Fatal(err)
	}
	if set.RequestID == nil {
		t.Fatal("no request id")
	}
	props, err = e.svc.GetServiceProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(props.CORS) != 1 || *props.CORS[0].AllowedOrigins != "https://app.example" || *props.CORS[0].MaxAgeInSeconds != 600 ||
		!*props.HourMetrics.Enabled || *props.HourMetrics.RetentionPolicy.Days != 7 || *props.MinuteMetrics.Enabled {
		t.Fatalf("after set = %+v %+v", props.CORS, props.HourMetrics)
	}
	// Omitted sections stay as they were.
	if _, err := e.svc.SetProperties(ctx, &azqueue.SetPropertiesOptions{Logging: &azqueue.Logging{Version: to.Ptr("1.0"),
		Read: to.Ptr(true), Write: to.Ptr(false), Delete: to.Ptr(false), RetentionPolicy: &azqueue.RetentionPolicy{Enabled: to.Ptr(false)}}}); err != nil {
		t.Fatal(err)
	}
	props, err = e.svc.GetServiceProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(props.CORS) != 1 || !*props.Logging.Read || !*props.HourMetrics.Enabled {
		t.Fatalf("partial set changed other sections: %+v", props)
	}
	six := make([]*azqueue.CORSRule, 6)
	for i := range six {
		six[i] = rule
	}
	_, err = e.svc.SetProperties(ctx, &azqueue.SetPropertiesOptions{CORS: six})
	wantCode(t, err, queueerror.InvalidXMLDocument)
	_, err = e.svc.SetProperties(ctx, &azqueue.SetPropertiesOptions{CORS: []*azqueue.CORSRule{{AllowedOrigins: to.Ptr("*"), AllowedMethods: to.Ptr("FETCH"), MaxAgeInSeconds: to.Ptr(int32(1))}}})
	wantCode(t, err, queueerror.InvalidXMLNodeValue)

	// Statistics: only on the secondary endpoint.
	_, err = e.svc.GetStatistics(ctx, nil)
	wantCode(t, err, queueerror.InvalidQueryParameterValue)
	sec, err := azqueue.NewServiceClientWithSharedKeyCredential(e.hs.URL+"/devstoreaccount1-secondary/", e.cred, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	st, err := sec.GetStatistics(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.GeoReplication == nil || *st.GeoReplication.Status != "live" || !st.GeoReplication.LastSyncTime.Equal(e.clk.Now()) {
		t.Fatalf("stats = %+v", st.GeoReplication)
	}
	// The secondary reads but does not write.
	e.queue(t, "replicated")
	if _, err := sec.NewQueueClient("replicated").GetProperties(ctx, nil); err != nil {
		t.Fatalf("secondary read: %v", err)
	}
	_, err = sec.NewQueueClient("replicated").EnqueueMessage(ctx, "x", nil)
	wantCode(t, err, queueerror.InsufficientAccountPermissions)
	wantStatus(t, err, http.StatusForbidden)
}

func TestSDKCredentialKinds(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	e.queue(t, "creds")
	acct := server.DevelopmentAccount()

	t.Run("connection string", func(t *testing.T) {
		c, err := azqueue.NewServiceClientFromConnectionString(acct.ConnectionString(e.endpoint), clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		q := c.NewQueueClient("creds")
		if _, err := q.EnqueueMessage(ctx, "cs", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ClearMessages(ctx, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		bad, _ := azqueue.NewSharedKeyCredential(acct.Name, "AAAA"+acct.Keys[0][4:])
		c, err := azqueue.NewServiceClientWithSharedKeyCredential(e.endpoint+"/", bad, clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.NewQueueClient("creds").EnqueueMessage(ctx, "x", nil)
		wantCode(t, err, queueerror.AuthenticationFailed)
		wantStatus(t, err, http.StatusForbidden)
	})
	t.Run("no credentials", func(t *testing.T) {
		c, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/creds", clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.EnqueueMessage(ctx, "x", nil)
		wantCode(t, err, queueerror.Code("NoAuthenticationInformation"))
		wantStatus(t, err, http.StatusUnauthorized)
	})
	t.Run("service SAS", func(t *testing.T) {
		// QueueClient.GetSASURL signs spr=https, which an http endpoint
		// must refuse, as Azure does.
		u, err := e.svc.NewQueueClient("creds").GetSASURL(sas.QueuePermissions{Add: true, Process: true}, time.Now().Add(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		hq, err := azqueue.NewQueueClientWithNoCredential(u, clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, err = hq.EnqueueMessage(ctx, "x", nil)
		wantCode(t, err, queueerror.AuthorizationProtocolMismatch)

		qp, err := sas.QueueSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour),
			Permissions: (&sas.QueuePermissions{Add: true, Process: true}).String(), QueueName: "creds"}.SignWithSharedKey(e.cred)
		if err != nil {
			t.Fatal(err)
		}
		sq, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/creds?"+qp.Encode(), clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sq.EnqueueMessage(ctx, "sas", nil); err != nil {
			t.Fatal(err)
		}
		got, err := sq.DequeueMessage(ctx, nil)
		if err != nil || len(got.Messages) != 1 {
			t.Fatalf("dequeue via SAS: %v %v", got, err)
		}
		if _, err := sq.DeleteMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, nil); err != nil {
			t.Fatal(err)
		}
		// No read permission: peek is refused.
		_, err = sq.PeekMessages(ctx, nil)
		wantCode(t, err, queueerror.AuthorizationPermissionMismatch)
		wantStatus(t, err, http.StatusForbidden)
	})
	t.Run("account SAS", func(t *testing.T) {
		u, err := e.svc.GetSASURL(sas.AccountResourceTypes{Service: true, Container: true, Object: true},
			sas.AccountPermissions{Read: true, List: true}, time.Now().Add(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		hc, err := azqueue.NewServiceClientWithNoCredential(u, clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, err = hc.NewListQueuesPager(nil).NextPage(ctx)
		wantCode(t, err, queueerror.AuthorizationProtocolMismatch)

		qp, err := sas.AccountSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour),
			Permissions:   (&sas.AccountPermissions{Read: true, List: true, Add: true, Create: true, Process: true, Delete: true, Update: true, Write: true}).String(),
			ResourceTypes: (&sas.AccountResourceTypes{Service: true, Container: true, Object: true}).String()}.SignWithSharedKey(e.cred)
		if err != nil {
			t.Fatal(err)
		}
		c, err := azqueue.NewServiceClientWithNoCredential(e.endpoint+"/?"+qp.Encode(), clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateQueue(ctx, "fromsas", nil); err != nil {
			t.Fatal(err)
		}
		p, err := c.NewListQueuesPager(nil).NextPage(ctx)
		if err != nil || len(p.Queues) != 2 {
			t.Fatalf("list via account SAS: %+v %v", p.Queues, err)
		}
		q := c.NewQueueClient("fromsas")
		if _, err := q.EnqueueMessage(ctx, "acct", nil); err != nil {
			t.Fatal(err)
		}
		got, err := q.DequeueMessage(ctx, nil)
		if err != nil || len(got.Messages) != 1 || *got.Messages[0].MessageText != "acct" {
			t.Fatalf("dequeue via account SAS: %+v %v", got, err)
		}
		// Expired: the server's clock decides.
		now := e.clk.Now()
		e.clk.Add(2 * time.Hour)
		_, err = q.PeekMessages(ctx, nil)
		wantCode(t, err, queueerror.AuthenticationFailed)
		e.clk.Set(now)
	})
}

// TestSDKSeedThroughCore: state seeded through Server.Service is what
// the SDK sees.
func TestSDKSeedThroughCore(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	svc := e.srv.Service("devstoreaccount1")
	if svc == nil || e.srv.Service("nope") != nil {
		t.Fatal("Service lookup")
	}
	q, _, err := svc.CreateQueue(ctx, "seeded", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "from core", &azq.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.NewQueueClient("seeded").DequeueMessage(ctx, nil)
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].MessageText != "from core" {
		t.Fatalf("dequeue seeded: %+v %v", got, err)
	}
}

// TestSDKConcurrentConsumers: producers and consumers share a queue over
// HTTP; with the mock clock standing still no lease lapses, so every
// message is consumed exactly once.
func TestSDKConcurrentConsumers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	q := e.queue(t, "shared")
	const producers, consumers, perProducer = 4, 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				if _, err := q.EnqueueMessage(ctx, fmt.Sprintf("%d-%d", p, i), nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var consumed atomic.Int64
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for consumed.Load() < producers*perProducer {
				got, err := q.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: to.Ptr(int32(5))})
				if err != nil {
					errs <- err
					return
				}
				for _, m := range got.Messages {
					if _, err := q.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					seen[*m.MessageText]++
					mu.Unlock()
					consumed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != producers*perProducer {
		t.Fatalf("consumed %d distinct messages, want %d", len(seen), producers*perProducer)
	}
	for text, n := range seen {
		if n != 1 {
			t.Fatalf("%s consumed %d times", text, n)
		}
	}
}

// TestSASVersionWithoutHeader: a SAS request without x-ms-version is
// handled, and answered, with the token's signed version.
func TestSASVersionWithoutHeader(t *testing.T) {
	e := newEnv(t, server.Options{})
	e.queue(t, "svq")
	qp, err := sas.QueueSignatureValues{Version: "2015-04-05", Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour),
		Permissions: (&sas.QueuePermissions{Read: true}).String(), QueueName: "svq"}.SignWithSharedKey(e.cred)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.hs.Client().Get(e.endpoint + "/svq/messages?peekonly=true&" + qp.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("x-ms-version") != "2015-04-05" {
		t.Fatalf("%d, version %q", resp.StatusCode, resp.Header.Get("x-ms-version"))
	}
}
