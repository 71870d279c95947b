package azure_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/server"
	"github.com/azqlib/azq/worker"
	"github.com/benbjohnson/clock"
)

// What the worker needs of a source and discovers on it.
var (
	_ worker.Queue                     = (*azure.Queue)(nil)
	_ azq.QueueOpener                  = (*azure.Queue)(nil)
	_ interface{ Name() string }       = (*azure.Queue)(nil)
	_ interface{ Clock() clock.Clock } = (*azure.Queue)(nil)
)

// The worker polls an azure.Queue: it must not look like a Receiver.
func TestQueueIsNotAReceiver(t *testing.T) {
	var q any = new(azure.Queue)
	if _, ok := q.(worker.Receiver); ok {
		t.Fatal("azure.Queue has a Receive method; the service has no long polling")
	}
}

// request is one request as the recording handler saw it.
type request struct {
	method, path string
	query        url.Values
	header       http.Header
	body         string
}

// recorder serves the REST API of srv and records every request.
type recorder struct {
	h    http.Handler
	mu   sync.Mutex
	reqs []request
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	r.reqs = append(r.reqs, request{req.Method, req.URL.Path, req.URL.Query(), req.Header.Clone(), string(b)})
	r.mu.Unlock()
	r.h.ServeHTTP(w, req)
}

// last returns the last recorded request.
func (r *recorder) last(t *testing.T) request {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("no request")
	}
	return r.reqs[len(r.reqs)-1]
}

// recordingEnv is azq's server behind a recorder, with a queue "jobs"
// made by the adapter and the same queue in process.
type recordingEnv struct {
	srv  *azqtest.Server
	rec  *recorder
	conn string
	q    *azure.Queue
	mem  *azq.Queue
}

func newRecordingEnv(t *testing.T, o *azure.Options) *recordingEnv {
	t.Helper()
	srv := azqtest.NewServer(t)
	rec := &recorder{h: srv.Handler}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	conn := srv.Account.ConnectionString(hs.URL + "/" + srv.Account.Name)
	mem, _, err := srv.Service.CreateQueue(context.Background(), "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := azure.NewQueueFromConnectionString(conn, "jobs", o)
	if err != nil {
		t.Fatal(err)
	}
	return &recordingEnv{srv: srv, rec: rec, conn: conn, q: q, mem: mem}
}

// Update with nil content goes on the wire without a body, which keeps
// the content; with content it carries the text. The SDK alone would
// send an empty text and erase the content.
func TestUpdateWithoutContentSendsNoBody(t *testing.T) {
	ctx := context.Background()
	e := newRecordingEnv(t, nil)
	m, err := e.q.Put(ctx, "progress 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.q.Update(ctx, m.ID, m.PopReceipt, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := e.rec.last(t)
	if r.method != http.MethodPut || r.body != "" || r.header.Get("Content-Length") != "" && r.header.Get("Content-Length") != "0" {
		t.Fatalf("Update without content sent %s with body %q, Content-Length %q", r.method, r.body, r.header.Get("Content-Length"))
	}
	if got := r.query.Get("popreceipt"); got != m.PopReceipt.String() {
		t.Fatalf("popreceipt %q, want %q", got, m.PopReceipt)
	}
	if got := r.query.Get("visibilitytimeout"); got != "60" {
		t.Fatalf("visibilitytimeout %q", got)
	}
	e.srv.Clock.Add(time.Minute)
	ms, err := e.mem.Peek(ctx, 1)
	if err != nil || len(ms) != 1 || ms[0].Content != "progress 1" {
		t.Fatalf("after Update without content: %+v, %v", ms, err)
	}

	next := "progress 2"
	if _, err := e.q.Update(ctx, m.ID, res.PopReceipt, 0, &next); err != nil {
		t.Fatal(err)
	}
	if r := e.rec.last(t); !strings.Contains(r.body, "<MessageText>progress 2</MessageText>") {
		t.Fatalf("Update with content sent %q", r.body)
	}
	ms, err = e.mem.Peek(ctx, 1)
	if err != nil || len(ms) != 1 || ms[0].Content != "progress 2" {
		t.Fatalf("after Update with content: %+v, %v", ms, err)
	}
}

// A client built without PrepareClientOptions cannot update without
// content: the adapter says so, and the message keeps its content and
// its receipt.
func TestClientWithoutPolicyRefusesUpdateWithoutContent(t *testing.T) {
	ctx := context.Background()
	e := newRecordingEnv(t, nil)
	plain, err := azqueue.NewQueueClientFromConnectionString(e.conn, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := azure.NewQueueFromClient(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Name() != "jobs" {
		t.Fatalf("name %q", q.Name())
	}
	m, err := q.Put(ctx, "keep me", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Update(ctx, m.ID, m.PopReceipt, 0, nil)
	if err == nil || !strings.Contains(err.Error(), "PrepareClientOptions") {
		t.Fatalf("Update without content through a plain client: %v", err)
	}
	ms, err := e.mem.Peek(ctx, 1)
	if err != nil || len(ms) != 1 || ms[0].Content != "keep me" {
		t.Fatalf("after the refused Update: %+v, %v", ms, err)
	}
	// A request that gets no answer fails as itself, policy or not.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := q.Update(cancelled, m.ID, m.PopReceipt, 0, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled context through a plain client: %v", err)
	}
	if _, err := e.q.Update(cancelled, m.ID, m.PopReceipt, 0, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled context: %v", err)
	}
	if _, err := q.Update(ctx, m.ID, m.PopReceipt, 0, new(string)); err != nil {
		t.Fatalf("the receipt died with the refused Update: %v", err)
	}

	// Built with PrepareClientOptions, the same client works.
	prepared, err := azqueue.NewQueueClientFromConnectionString(e.conn, "jobs", azure.PrepareClientOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	q, err = azure.NewQueueFromClient(prepared, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err = q.Put(ctx, "keep me too", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Update(ctx, m.ID, m.PopReceipt, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	e.srv.Clock.Add(time.Hour)
	ms, err = e.mem.Get(ctx, 32, time.Minute)
	if err != nil || len(ms) != 2 {
		t.Fatalf("%+v, %v", ms, err)
	}
	for _, m := range ms {
		if m.Content != "" && m.Content != "keep me too" {
			t.Fatalf("content %q", m.Content)
		}
	}
	// Without a service, a queue made from a client opens no others.
	if _, err := q.OpenQueue(ctx, "jobs-poison"); err == nil {
		t.Fatal("OpenQueue on a queue made from a queue client succeeded")
	}
}

// PrepareClientOptions copies: the caller's options and policies are
// left as they were, and two clients built from one set do not share
// policy slices.
func TestPrepareClientOptionsCopies(t *testing.T) {
	var called int
	p := policyFunc(func(req *policy.Request) (*http.Response, error) { called++; return req.Next() })
	base := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{PerCallPolicies: []policy.Policy{p}}}
	a := azure.PrepareClientOptions(base)
	b := azure.PrepareClientOptions(base)
	if len(base.PerCallPolicies) != 1 || len(a.PerCallPolicies) != 2 || len(b.PerCallPolicies) != 2 {
		t.Fatalf("policies: base %d, a %d, b %d", len(base.PerCallPolicies), len(a.PerCallPolicies), len(b.PerCallPolicies))
	}
	a.PerCallPolicies[0] = nil
	if base.PerCallPolicies[0] == nil || b.PerCallPolicies[0] == nil {
		t.Fatal("prepared options share the caller's policy slice")
	}
	if o := azure.PrepareClientOptions(nil); len(o.PerCallPolicies) != 1 {
		t.Fatalf("from nil: %d policies", len(o.PerCallPolicies))
	}
}

type policyFunc func(*policy.Request) (*http.Response, error)

func (f policyFunc) Do(req *policy.Request) (*http.Response, error) { return f(req) }

// Durations go on the wire in whole seconds, rounded away from zero;
// NeverExpires is messagettl=-1, and no other duration becomes -1.
func TestDurationsOnTheWire(t *testing.T) {
	ctx := context.Background()
	e := newRecordingEnv(t, nil)
	cases := []struct {
		opts     azq.PutOptions
		vis, ttl string // "" means not sent
		ok       bool
	}{
		{azq.PutOptions{}, "", "", true},
		{azq.PutOptions{TimeToLive: azq.NeverExpires}, "", "-1", true},
		{azq.PutOptions{VisibilityTimeout: 1500 * time.Millisecond, TimeToLive: time.Minute}, "2", "60", true},
		{azq.PutOptions{VisibilityTimeout: time.Nanosecond}, "1", "", true},
		{azq.PutOptions{VisibilityTimeout: -time.Nanosecond}, "-1", "", false},
		{azq.PutOptions{TimeToLive: -time.Second}, "", "-2", false},
		{azq.PutOptions{TimeToLive: -time.Millisecond}, "", "-2", false},
		{azq.PutOptions{TimeToLive: 100 * 365 * 24 * time.Hour}, "", "2147483647", true},
	}
	for _, tc := range cases {
		_, err := e.q.Put(ctx, "x", &tc.opts)
		if (err == nil) != tc.ok {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		if !tc.ok && !errors.Is(err, azq.ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want an invalid argument", tc.opts, err)
		}
		r := e.rec.last(t)
		if got := r.query.Get("visibilitytimeout"); got != tc.vis {
			t.Fatalf("%+v: visibilitytimeout %q, want %q", tc.opts, got, tc.vis)
		}
		if got := r.query.Get("messagettl"); got != tc.ttl {
			t.Fatalf("%+v: messagettl %q, want %q", tc.opts, got, tc.ttl)
		}
	}
	if _, err := e.q.Get(ctx, 1, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if r := e.rec.last(t); r.query.Get("visibilitytimeout") != "3" || r.query.Get("numofmessages") != "1" {
		t.Fatalf("Get sent %v", r.query)
	}
}

// The service's times, ID, receipt and count come back in the Message
// fields as the service holds them.
func TestMessagesCarryTheServiceView(t *testing.T) {
	ctx := context.Background()
	e := newRecordingEnv(t, nil)
	start := e.srv.Clock.Now()
	m, err := e.q.Put(ctx, "hello", &azq.PutOptions{VisibilityTimeout: 5 * time.Second, TimeToLive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !m.PopReceipt.IsRemote() || m.Content != "hello" || m.DequeueCount != 0 {
		t.Fatalf("Put: %+v", m)
	}
	if !m.InsertionTime.Equal(start) || !m.NextVisibleTime.Equal(start.Add(5*time.Second)) ||
		!m.ExpirationTime.Equal(start.Add(time.Hour)) || m.InsertionTime.Location() != time.UTC {
		t.Fatalf("Put times: %+v", m)
	}
	e.srv.Clock.Add(5 * time.Second)
	ms, err := e.mem.Peek(ctx, 1)
	if err != nil || len(ms) != 1 || ms[0].ID != m.ID {
		t.Fatalf("in process: %+v, %v", ms, err)
	}
	gs, err := e.q.Get(ctx, 32, time.Minute)
	if err != nil || len(gs) != 1 {
		t.Fatalf("Get: %+v, %v", gs, err)
	}
	g := gs[0]
	if g.ID != m.ID || g.DequeueCount != 1 || !g.InsertionTime.Equal(start) ||
		!g.NextVisibleTime.Equal(start.Add(5*time.Second+time.Minute)) || !g.ExpirationTime.Equal(start.Add(time.Hour)) {
		t.Fatalf("Get: %+v", g)
	}
	if r := e.rec.last(t); !strings.Contains(r.path, "/jobs/messages") {
		t.Fatalf("Get went to %s", r.path)
	}
	res, err := e.q.Update(ctx, g.ID, g.PopReceipt, 10*time.Second, nil)
	if err != nil || !res.NextVisibleTime.Equal(start.Add(15*time.Second)) || !res.PopReceipt.IsRemote() {
		t.Fatalf("Update: %+v, %v", res, err)
	}
	if n, err := e.q.ApproximateCount(ctx); err != nil || n != 1 {
		t.Fatalf("count %d, %v", n, err)
	}
	if err := e.q.Delete(ctx, g.ID, res.PopReceipt); err != nil {
		t.Fatal(err)
	}
	// Peek sends neither a receipt nor a next-visible time.
	if _, err := e.q.Put(ctx, "peeked", nil); err != nil {
		t.Fatal(err)
	}
	ps, err := e.q.Peek(ctx, 32)
	if err != nil || len(ps) != 1 || !ps[0].PopReceipt.IsZero() || !ps[0].NextVisibleTime.IsZero() || ps[0].Content != "peeked" {
		t.Fatalf("Peek: %+v, %v", ps, err)
	}
	if got := e.rec.last(t).query.Get("peekonly"); got != "true" {
		t.Fatalf("Peek sent peekonly=%q", got)
	}
}

// With EncodingBase64 the text on the wire is the content's base64, and
// Get and Peek decode it. A message a producer put without encoding comes
// back with its text as it is, and OnDecodeError hears of it.
func TestBase64Encoding(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var undecodable []azq.Message
	e := newRecordingEnv(t, &azure.Options{Encoding: azure.EncodingBase64, OnDecodeError: func(m azq.Message, err error) {
		mu.Lock()
		undecodable = append(undecodable, m)
		mu.Unlock()
	}})
	if e.q.Encoding() != azure.EncodingBase64 || e.q.Encoding().String() != "base64" || azure.EncodingNone.String() != "none" {
		t.Fatal("Encoding")
	}
	content := "{\"order\": 42} ü \x00\xff"
	m, err := e.q.Put(ctx, content, nil)
	if err != nil || m.Content != content {
		t.Fatalf("Put: %+v, %v", m, err)
	}
	// The service holds the base64 text: what a Functions trigger reads.
	raw, err := e.mem.Peek(ctx, 1)
	if err != nil || len(raw) != 1 || raw[0].Content != base64.StdEncoding.EncodeToString([]byte(content)) {
		t.Fatalf("stored text: %+v, %v", raw, err)
	}
	ps, err := e.q.Peek(ctx, 1)
	if err != nil || len(ps) != 1 || ps[0].Content != content {
		t.Fatalf("Peek: %+v, %v", ps, err)
	}
	gs, err := e.q.Get(ctx, 1, time.Minute)
	if err != nil || len(gs) != 1 || gs[0].Content != content {
		t.Fatalf("Get: %+v, %v", gs, err)
	}
	next := "step 2"
	if _, err := e.q.Update(ctx, m.ID, gs[0].PopReceipt, 0, &next); err != nil {
		t.Fatal(err)
	}
	raw, _ = e.mem.Peek(ctx, 1)
	if raw[0].Content != base64.StdEncoding.EncodeToString([]byte(next)) {
		t.Fatalf("updated text %q", raw[0].Content)
	}
	if len(undecodable) != 0 {
		t.Fatalf("decode errors for base64 messages: %+v", undecodable)
	}

	// A producer that does not encode: the consumer still gets the message.
	if err := e.mem.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	plain, err := azure.NewQueueFromConnectionString(e.conn, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Put(ctx, "not base64!", nil); err != nil {
		t.Fatal(err)
	}
	gs, err = e.q.Get(ctx, 1, time.Minute)
	if err != nil || len(gs) != 1 || gs[0].Content != "not base64!" {
		t.Fatalf("Get of an unencoded message: %+v, %v", gs, err)
	}
	mu.Lock()
	n := len(undecodable)
	mu.Unlock()
	if n != 1 || undecodable[0].ID != gs[0].ID || undecodable[0].Content != "not base64!" {
		t.Fatalf("OnDecodeError heard of %+v", undecodable)
	}

	// The other way round, the mismatch users meet: a base64 producer and
	// a consumer without encoding see the base64 text.
	if _, err := e.q.Put(ctx, "hello", nil); err != nil {
		t.Fatal(err)
	}
	e.srv.Clock.Add(time.Minute)
	ps, err = plain.Peek(ctx, 32)
	if err != nil || len(ps) != 2 {
		t.Fatalf("%+v, %v", ps, err)
	}
	found := false
	for _, p := range ps {
		found = found || p.Content == base64.StdEncoding.EncodeToString([]byte("hello"))
	}
	if !found {
		t.Fatalf("a consumer without encoding got %+v", ps)
	}

	if _, err := azure.NewQueueFromConnectionString(e.conn, "jobs", &azure.Options{Encoding: 7}); err == nil {
		t.Fatal("an unknown encoding was accepted")
	}
}

// Clock reports the clock of the options, else the real clock.
func TestClock(t *testing.T) {
	mock := clock.NewMock()
	q, err := azure.NewQueueFromConnectionString(devConn("http://127.0.0.1:1/devstoreaccount1"), "jobs", &azure.Options{Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	if q.Clock() != mock {
		t.Fatal("Clock is not the option's")
	}
	q, err = azure.NewQueueFromConnectionString(devConn("http://127.0.0.1:1/devstoreaccount1"), "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := q.Clock().(*clock.Mock); ok || q.Clock() == nil {
		t.Fatalf("default clock %T", q.Clock())
	}
}

// tokenCredential hands out a fixed bearer token.
type tokenCredential struct{ token string }

func (c tokenCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: c.token, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// NewQueue and NewService authenticate with a token credential. azq's
// server takes no bearer tokens, so a front handler checks the token and
// passes the request on unsigned to a server that allows that.
func TestTokenCredential(t *testing.T) {
	ctx := context.Background()
	h := server.New(server.Options{AllowAnonymous: true})
	var seen []string
	var mu sync.Mutex
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			w.Header().Set("x-ms-error-code", "NoAuthenticationInformation")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.Header.Del("Authorization")
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	opts := &azure.Options{ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{InsecureAllowCredentialWithHTTP: true}}}
	svc, err := azure.NewService(front.URL+"/devstoreaccount1/", tokenCredential{"t0ken"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := svc.CreateQueue(ctx, "orders", nil); err != nil || !created {
		t.Fatalf("CreateQueue: %v, %v", created, err)
	}
	q, err := azure.NewQueue(front.URL+"/devstoreaccount1/orders", tokenCredential{"t0ken"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if q.Name() != "orders" {
		t.Fatalf("name %q", q.Name())
	}
	m, err := q.Put(ctx, "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Update(ctx, m.ID, m.PopReceipt, 0, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3 {
		t.Fatalf("%d requests", len(seen))
	}
	for _, a := range seen {
		if a != "Bearer t0ken" {
			t.Fatalf("a request carried Authorization %q", a)
		}
	}
}

// A queue URL splits into the account's URL and the queue name, in
// either addressing style.
func TestNewQueueURLs(t *testing.T) {
	cred := tokenCredential{"x"}
	for _, tc := range []struct{ url, name string }{
		{"https://acct.queue.core.windows.net/orders", "orders"},
		{"https://acct.queue.core.windows.net/orders/", "orders"},
		{"http://127.0.0.1:10001/devstoreaccount1/orders", "orders"},
		{"http://localhost:10001/devstoreaccount1/orders", "orders"},
	} {
		q, err := azure.NewQueue(tc.url, cred, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if q.Name() != tc.name || !strings.HasPrefix(q.Client().URL(), strings.TrimSuffix(tc.url, "/")) {
			t.Fatalf("%s: name %q, client URL %s", tc.url, q.Name(), q.Client().URL())
		}
	}
	for _, bad := range []string{"https://acct.queue.core.windows.net/", "https://acct.queue.core.windows.net", "://"} {
		if _, err := azure.NewQueue(bad, cred, nil); err == nil {
			t.Fatalf("%q: no error", bad)
		}
	}
	if _, err := azure.NewQueue("https://acct.queue.core.windows.net/Bad_Name", cred, nil); !errors.Is(err, azq.ErrInvalidQueueName) {
		t.Fatalf("bad name: %v", err)
	}
}

// The Service mirrors azq.Service: create (and create again), list with
// prefix, paging and metadata, metadata of a queue, delete.
func TestService(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewServer(t)
	svc, err := azure.NewServiceFromConnectionString(srv.ConnectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{"Team": "blue"}
	q, created, err := svc.CreateQueue(ctx, "orders", md)
	if err != nil || !created || q.Name() != "orders" {
		t.Fatalf("CreateQueue: %v %v", created, err)
	}
	if _, created, err := svc.CreateQueue(ctx, "orders", md); err != nil || created {
		t.Fatalf("CreateQueue again: created %v, %v", created, err)
	}
	if _, _, err := svc.CreateQueue(ctx, "orders", map[string]string{"Team": "red"}); !errors.Is(err, azq.ErrQueueAlreadyExists) {
		t.Fatalf("CreateQueue with other metadata: %v", err)
	}
	if _, _, err := svc.CreateQueue(ctx, "Bad_Name", nil); !errors.Is(err, azq.ErrInvalidQueueName) {
		t.Fatalf("bad name: %v", err)
	}
	for _, n := range []string{"orders-2", "other"} {
		if _, _, err := svc.CreateQueue(ctx, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	page, err := svc.ListQueues(ctx, azq.ListQueuesOptions{Prefix: "ord", MaxResults: 1, IncludeMetadata: true})
	if err != nil || len(page.Queues) != 1 || page.Queues[0].Name != "orders" || page.Queues[0].Metadata["team"] != "blue" || page.NextMarker == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	page, err = svc.ListQueues(ctx, azq.ListQueuesOptions{Prefix: "ord", Marker: page.NextMarker})
	if err != nil || len(page.Queues) != 1 || page.Queues[0].Name != "orders-2" || page.Queues[0].Metadata != nil || page.NextMarker != "" {
		t.Fatalf("second page: %+v, %v", page, err)
	}
	if _, err := svc.ListQueues(ctx, azq.ListQueuesOptions{Marker: "bogus"}); !errors.Is(err, azq.ErrInvalidMarker) {
		t.Fatalf("bogus marker: %v", err)
	}

	p, err := q.Properties(ctx)
	if err != nil || p.Metadata["Team"] != "blue" {
		t.Fatalf("Properties: %+v, %v", p, err)
	}
	if err := q.SetMetadata(ctx, map[string]string{"Owner": "ops"}); err != nil {
		t.Fatal(err)
	}
	mem, err := srv.Service.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	got, err := mem.Metadata(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("metadata in process: %v, %v", got, err)
	}
	for k, v := range got {
		if !strings.EqualFold(k, "owner") || v != "ops" {
			t.Fatalf("metadata in process: %v", got)
		}
	}
	if err := q.SetMetadata(ctx, map[string]string{"1bad": "x"}); !errors.Is(err, azq.ErrInvalidMetadata) {
		t.Fatalf("bad metadata: %v", err)
	}

	if err := svc.DeleteQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteQueue(ctx, "orders"); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("deleting again: %v", err)
	}
	if _, err := q.Put(ctx, "x", nil); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Put to a deleted queue: %v", err)
	}
	if _, err := q.Get(ctx, 1, time.Second); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Get from a deleted queue: %v", err)
	}
	if svc.Client() == nil || svc.Clock() == nil {
		t.Fatal("accessors")
	}
}

// OpenQueue, through which a worker opens its poison queue, creates the
// queue in the same account, or opens it as it is if it exists with
// metadata of its own.
func TestOpenQueue(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewServer(t)
	q, err := azure.NewQueueFromConnectionString(srv.ConnectionString, "jobs", &azure.Options{Encoding: azure.EncodingBase64})
	if err != nil {
		t.Fatal(err)
	}
	pq, err := q.OpenQueue(ctx, "jobs-poison")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pq.Put(ctx, "bad", nil); err != nil {
		t.Fatal(err)
	}
	mem, err := srv.Service.Queue("jobs-poison")
	if err != nil {
		t.Fatal(err)
	}
	// The opened queue has the opener's options.
	if ms, _ := mem.Peek(ctx, 1); len(ms) != 1 || ms[0].Content != base64.StdEncoding.EncodeToString([]byte("bad")) {
		t.Fatalf("poison queue holds %+v", ms)
	}
	if err := mem.SetMetadata(ctx, map[string]string{"Kind": "poison"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.OpenQueue(ctx, "jobs-poison"); err != nil {
		t.Fatalf("opening a queue with metadata: %v", err)
	}
	if _, err := q.OpenQueue(ctx, "Bad_Name"); !errors.Is(err, azq.ErrInvalidQueueName) {
		t.Fatalf("bad name: %v", err)
	}
}
