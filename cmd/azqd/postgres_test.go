package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/jackc/pgx/v5"

	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/azqlib/azq/server"
)

// postgresArgs are the flags of an azqd on the test binary's PostgreSQL
// server, with each account in a schema of the test's own, dropped when
// the test ends.
func postgresArgs(t *testing.T, srv *pgtest.Server, accounts ...string) []string {
	t.Helper()
	if len(accounts) == 0 {
		accounts = []string{server.DevelopmentAccount().Name}
	}
	prefix := srv.NewSchema(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			t.Errorf("dropping the test's schemas: %v", err)
			return
		}
		defer conn.Close(ctx)
		for _, a := range accounts {
			if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{prefix + "_" + a}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("dropping the schema of %s: %v", a, err)
			}
		}
	})
	return []string{"-postgres", srv.URL(), "-postgres-schema", prefix + "_{account}"}
}

// TestPostgresFlags: -postgres excludes -data, Azurite's --location and
// -clock-control; -postgres-schema needs it, and must give each account
// a schema of its own with a plain name.
func TestPostgresFlags(t *testing.T) {
	const url = "postgres://azqd@db.example/queues"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-postgres", url, "-data", "/tmp/azqd-data"}, "-postgres and -data (or Azurite's --location) exclude each other"},
		{[]string{"-postgres", url, "--location", "/tmp/azqd-data"}, "-postgres and -data (or Azurite's --location) exclude each other"},
		{[]string{"-postgres", url, "-clock-control"}, "-postgres and -clock-control exclude each other"},
		{[]string{"-postgres-schema", "queues"}, "-postgres-schema needs -postgres"},
		{[]string{"-postgres", url, "-postgres-schema", "Queues_{account}"}, "is not a plain name"},
		{[]string{"-postgres", url, "-postgres-schema", "1{account}"}, "is not a plain name"},
		{[]string{"-postgres", url, "-postgres-schema", "q-{account}"}, "is not a plain name"},
		{[]string{"-postgres", url, "-postgres-schema", "pg_{account}"}, "starts with pg_"},
		{[]string{"-postgres", url, "-postgres-schema", strings.Repeat("s", 50) + "{account}"}, "PostgreSQL keeps 63"},
		{[]string{"-postgres", url, "-postgres-schema", "queues", "-account", "one:a2V5MQ==", "-account", "two:a2V5MQ=="}, "accounts one and two would share the schema"},
	} {
		var stderr strings.Builder
		_, err := parseFlags(c.args, io.Discard, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: %v, stderr %q; want a usage error saying %q", c.args, err, stderr.String(), c.want)
		}
	}
	cfg, err := parseFlags([]string{"-postgres", url, "-account", "one:a2V5MQ==", "-account", "two:a2V5MQ=="}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{postgresSchema(cfg.postgresSchema, "one"), postgresSchema(cfg.postgresSchema, "two")}; got[0] != "azq_one" || got[1] != "azq_two" {
		t.Errorf("default schemas %q, want azq_one and azq_two", got)
	}
	// One account may name its schema outright: the one postgres.Open
	// makes by default, say, which a Go program also uses.
	if _, err := parseFlags([]string{"-postgres", url, "-postgres-schema", "azq"}, io.Discard, io.Discard); err != nil {
		t.Errorf("one account in the schema azq: %v", err)
	}
}

// TestPostgresStartup: azqd -postgres says where the queues are, without
// the password of the URL, serves the SDK from the database, and keeps
// each account in its own schema; a database it cannot reach stops it at
// start-up, saying which.
func TestPostgresStartup(t *testing.T) {
	srv := pgtest.Shared(t)
	args := append(postgresArgs(t, srv, "alpha", "beta"), "-account", "alpha:a2V5MQ==", "-account", "beta:a2V5MQ==")
	d := start(t, args...)
	prefix := strings.TrimSuffix(args[3], "_{account}")
	if !slicesContainsPrefix(d.printed, "azqd: on PostgreSQL at postgres@socket ") ||
		!strings.Contains(strings.Join(d.printed, "\n"), "(schema "+prefix+"_alpha, "+prefix+"_beta), serving the Azure Queue REST API on http://127.0.0.1:") {
		t.Errorf("start-up lines: %q", d.printed)
	}
	roundTrip(t, queueClient(t, d.conns["alpha"], "jobs"))
	ctx := testContext(t)
	if _, err := queueClient(t, d.conns["alpha"], "only-alpha").Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for account, want := range map[string]int{"alpha": 2, "beta": 0} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+prefix+"_"+account+".queues").Scan(&n); err != nil || n != want {
			t.Errorf("queues in the schema of %s: %d, %v; want %d", account, n, err, want)
		}
	}

	var stderr lockedBuffer
	err = run(context.Background(), []string{"-addr", "127.0.0.1:0", "-postgres", "postgres://azqd:s3cret@127.0.0.1:1/queues?connect_timeout=5"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "on PostgreSQL at azqd@127.0.0.1:1/queues") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a database that does not answer: %v", err)
	}
}

// TestPostgresHealth: /_azq/health asks the database; while it is down
// the health check answers 503 with the reason, and requests fail with
// 503 ServerBusy, which the SDKs retry; once it is back, both are well
// again.
func TestPostgresHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a server")
	}
	srv := pgtest.Start(t, pgtest.Options{})
	d := start(t, "-postgres", srv.URL(), "-log-level", "error")
	var h healthReply
	adminCall(t, "GET", d.base+"/_azq/health", 200, &h)
	if h.Status != "ok" {
		t.Fatalf("health: %+v", h)
	}
	qc := queueClient(t, d.conns["devstoreaccount1"], "jobs")
	if _, err := qc.Create(testContext(t), nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	adminCall(t, "GET", d.base+"/_azq/health", 503, &h)
	if h.Status != "unavailable" || !strings.HasPrefix(h.Reason, "account devstoreaccount1: ") || !strings.Contains(h.Reason, "unavailable") {
		t.Errorf("health while the database is down: %+v", h)
	}
	// Anyone may ask: neither the health check nor the error names the
	// database's user, name or socket.
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	socket := u.Query().Get("host")
	for _, secret := range []string{socket, "postgres@", "user=", "database="} {
		if strings.Contains(h.Reason, secret) {
			t.Errorf("the health check's reason %q names %q", h.Reason, secret)
		}
	}
	_, err = qc.EnqueueMessage(testContext(t), "while down", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusServiceUnavailable || re.ErrorCode != "ServerBusy" {
		t.Errorf("a Put while the database is down: %v, want 503 ServerBusy", err)
	} else if strings.Contains(err.Error(), socket) || !strings.Contains(err.Error(), "The server is currently unable to receive requests.") {
		t.Errorf("a Put while the database is down says more than Azure's message: %v", err)
	}
	if log := d.stderr.String(); !strings.Contains(log, socket) {
		t.Errorf("the log does not name what failed:\n%s", log)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The pool finds its connections dead and makes new ones: a call may
	// still meet one.
	for i := 0; ; i++ {
		status, body := send(t, "GET", d.base+"/_azq/health", "", nil, nil)
		if status == 200 {
			break
		}
		if i == 3 {
			t.Fatalf("health after the restart: %d %s", status, body)
		}
	}
	roundTrip(t, queueClient(t, d.conns["devstoreaccount1"], "after"))
}

// TestTwoAzqdOnOneDatabase runs two azqd processes on one database and
// talks to them with the official Go SDK, as through a load balancer
// that sends each request to either: a message put through one is got
// through the other, its receipt works on either, a consumer polling one
// gets what is put through the other, and both answer with the service
// properties set through one; bad input gets the same answer from both
// as from azqd in memory.
func TestTwoAzqdOnOneDatabase(t *testing.T) {
	srv := pgtest.Shared(t)
	args := postgresArgs(t, srv)
	ps := startProcesses(t, args, args)
	acct := server.DevelopmentAccount()
	svc := func(p *process) *azqueue.ServiceClient {
		c, err := azqueue.NewServiceClientFromConnectionString(acct.ConnectionString(p.base+"/"+acct.Name), clientOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := svc(ps[0]), svc(ps[1])
	qa, qb := a.NewQueueClient("orders"), b.NewQueueClient("orders")
	ctx := testContext(t)

	if _, err := qa.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := qa.EnqueueMessage(ctx, "through a", nil); err != nil {
		t.Fatal(err)
	}
	got, err := qb.DequeueMessage(ctx, &azqueue.DequeueMessageOptions{VisibilityTimeout: to.Ptr[int32](60)})
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].MessageText != "through a" {
		t.Fatalf("get through b: %+v, %v", got, err)
	}
	m := got.Messages[0]
	// b's receipt, updated through a; the new receipt deletes through b.
	up, err := qa.UpdateMessage(ctx, *m.MessageID, *m.PopReceipt, "updated through a", &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr[int32](60)})
	if err != nil {
		t.Fatalf("update through a with b's receipt: %v", err)
	}
	if _, err := qb.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); !isCode(err, "MessageNotFound") {
		t.Fatalf("delete through b with the receipt the update replaced: %v, want MessageNotFound", err)
	}
	if _, err := qb.DeleteMessage(ctx, *m.MessageID, *up.PopReceipt, nil); err != nil {
		t.Fatalf("delete through b with a's receipt: %v", err)
	}
	if props, err := qa.GetProperties(ctx, nil); err != nil || *props.ApproximateMessagesCount != 0 {
		t.Fatalf("count through a after the delete: %+v, %v", props, err)
	}

	// A consumer that polls b, as the SDKs' users do, gets what a
	// producer puts through a.
	polled := make(chan error, 1)
	go func() {
		for {
			got, err := qb.DequeueMessage(ctx, nil)
			if err == nil && len(got.Messages) > 0 {
				m := got.Messages[0]
				if *m.MessageText != "polled" {
					err = errors.New("got " + *m.MessageText)
				} else {
					_, err = qa.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil)
				}
			}
			if err != nil || len(got.Messages) > 0 {
				polled <- err
				return
			}
			select {
			case <-ctx.Done():
				polled <- ctx.Err()
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	if _, err := qa.EnqueueMessage(ctx, "polled", nil); err != nil {
		t.Fatal(err)
	}
	if err := <-polled; err != nil {
		t.Fatalf("polling b for a message put through a: %v", err)
	}

	// The service properties are the database's: set through a, b
	// answers with them.
	rule := &azqueue.CORSRule{AllowedOrigins: to.Ptr("https://app.example"), AllowedMethods: to.Ptr("GET"),
		AllowedHeaders: to.Ptr(""), ExposedHeaders: to.Ptr(""), MaxAgeInSeconds: to.Ptr[int32](60)}
	if _, err := a.SetProperties(ctx, &azqueue.SetPropertiesOptions{CORS: []*azqueue.CORSRule{rule}}); err != nil {
		t.Fatal(err)
	}
	sp, err := b.GetServiceProperties(ctx, nil)
	if err != nil || len(sp.CORS) != 1 || *sp.CORS[0].AllowedOrigins != "https://app.example" {
		t.Fatalf("b's service properties after a set them: %+v, %v", sp, err)
	}

	// Bad input: the answers of an azqd in memory.
	mem := start(t)
	memQueue := queueClient(t, mem.conns[acct.Name], "orders")
	if _, err := memQueue.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	memMsg, err := memQueue.EnqueueMessage(ctx, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	pgMsg, err := qa.EnqueueMessage(ctx, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A receipt of azq's format with a tag no message has, and one of no
	// format at all.
	forged := base64.StdEncoding.EncodeToString([]byte{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	huge := strings.Repeat("x", 64*1024+1)
	for _, c := range []struct {
		name string
		call func(q *azqueue.QueueClient, id string) error
	}{
		{"oversized message", func(q *azqueue.QueueClient, _ string) error { _, err := q.EnqueueMessage(ctx, huge, nil); return err }},
		{"forged receipt", func(q *azqueue.QueueClient, id string) error {
			_, err := q.DeleteMessage(ctx, id, forged, nil)
			return err
		}},
		{"malformed receipt", func(q *azqueue.QueueClient, id string) error {
			_, err := q.UpdateMessage(ctx, id, "not a receipt", "x", nil)
			return err
		}},
		{"message that does not exist", func(q *azqueue.QueueClient, _ string) error {
			_, err := q.DeleteMessage(ctx, "663d89aa-d1d9-42a2-9a6a-fcf822a97d2c", forged, nil)
			return err
		}},
	} {
		want := c.call(memQueue, *memMsg.Messages[0].MessageID)
		for i, q := range []*azqueue.QueueClient{qa, qb} {
			if err := c.call(q, *pgMsg.Messages[0].MessageID); !sameResponseError(err, want) {
				t.Errorf("%s through azqd %d: %v; in memory: %v", c.name, i, err, want)
			}
		}
	}
	for i, p := range ps {
		bad := svc(p).NewQueueClient("Bad_Name")
		_, err := bad.Create(ctx, nil)
		_, memErr := queueClient(t, mem.conns[acct.Name], "Bad_Name").Create(ctx, nil)
		if !sameResponseError(err, memErr) {
			t.Errorf("an invalid queue name through azqd %d: %v; in memory: %v", i, err, memErr)
		}
	}
	if peek, err := qb.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr[int32](32)}); err != nil || len(peek.Messages) != 1 || *peek.Messages[0].MessageText != "m" {
		t.Errorf("after the bad input the queue holds %+v, %v; want the one message", peek, err)
	}

	for i, p := range ps {
		var h healthReply
		adminCall(t, "GET", p.base+"/_azq/health", 200, &h)
		if h.Status != "ok" {
			t.Errorf("health of azqd %d: %+v", i, h)
		}
	}
	stopProcesses(t, ps...)
}

// isCode reports whether err is an Azure error answer with code.
func isCode(err error, code string) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.ErrorCode == code
}

// sameResponseError reports whether two errors are Azure answers with the
// same status and code.
func sameResponseError(a, b error) bool {
	var ra, rb *azcore.ResponseError
	return errors.As(a, &ra) && errors.As(b, &rb) && ra.StatusCode == rb.StatusCode && ra.ErrorCode == rb.ErrorCode
}

// TestPostgresBadDay: with account one's table locked by another
// session, more of its requests than its pool has connections wait at
// most their timeout and are answered 500 OperationTimedOut, while
// account two, on a pool of its own, is served at once.
func TestPostgresBadDay(t *testing.T) {
	srv := pgtest.Shared(t)
	args := postgresArgs(t, srv, "one", "two")
	args[1] += "&pool_max_conns=2"
	schemaOne := strings.ReplaceAll(args[3], "{account}", "one")
	d := start(t, append(args, "-account", "one:a2V5MQ==", "-account", "two:a2V5MQ==", "-allow-anonymous")...)
	hdr := map[string]string{"x-ms-version": "2021-12-02"}
	for _, a := range []string{"one", "two"} {
		if status, body := send(t, "PUT", d.base+"/"+a+"/jobs", "", nil, hdr); status != 201 {
			t.Fatalf("creating %s's queue: %d %s", a, status, body)
		}
	}
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schemaOne, "queues"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	const put = "<QueueMessage><MessageText>m</MessageText></QueueMessage>"
	type answer struct {
		status int
		body   string
		took   time.Duration
	}
	const stuck = 4 // more than the pool's 2 connections
	answers := make(chan answer, stuck)
	for range stuck {
		go func() {
			start := time.Now()
			status, body := send(t, "POST", d.base+"/one/jobs/messages?timeout=5", "", strings.NewReader(put), hdr)
			answers <- answer{status, body, time.Since(start)}
		}()
	}
	// Account two answers while account one's requests still wait.
	status, body := send(t, "POST", d.base+"/two/jobs/messages?timeout=30", "", strings.NewReader(put), hdr)
	if status != 201 {
		t.Errorf("account two's Put while account one's table is locked: %d %s", status, body)
	}
	if n := len(answers); n == stuck {
		t.Errorf("account two was answered only after account one's %d stuck requests", n)
	}
	for range stuck {
		a := <-answers
		if a.status != 500 || !strings.Contains(a.body, "<Code>OperationTimedOut</Code>") {
			t.Errorf("account one's Put on a locked table: %d %s, want 500 OperationTimedOut", a.status, a.body)
		}
		if a.took > 20*time.Second {
			t.Errorf("account one's Put with timeout=5 was answered after %v", a.took)
		}
	}
	tx.Rollback(ctx)
	// Nothing of the timed-out Puts was applied.
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schemaOne, "messages"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d messages in account one after Puts that timed out", n)
	}
}

// TestPostgresStandby: with a URL of two hosts and no
// target_session_attrs=read-write, once the primary stops, azqd's
// connections reach the standby, which answers reads and refuses writes:
// the health check says the database is unavailable (the log says it is
// a standby), and a Put is 503 ServerBusy, never a 500.
func TestPostgresStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and a standby")
	}
	primary, standby := pgtest.StartReplicated(t, pgtest.ReplicatedOptions{})
	d := start(t, "-postgres", fmt.Sprintf("host=%s,%s port=%d,%d user=postgres dbname=postgres sslmode=disable",
		primary.Host(), standby.Host(), primary.Port(), standby.Port()),
		"-allow-anonymous", "-log-level", "error")
	hdr := map[string]string{"x-ms-version": "2021-12-02"}
	if status, body := send(t, "PUT", d.base+"/devstoreaccount1/jobs", "", nil, hdr); status != 201 {
		t.Fatalf("creating the queue: %d %s", status, body)
	}
	ctx := testContext(t)
	for {
		conn, err := pgx.Connect(ctx, standby.URL())
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM azq_devstoreaccount1.queues WHERE name = 'jobs'").Scan(&n)
		conn.Close(ctx)
		if err == nil && n == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby never had the queue: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	const put = "<QueueMessage><MessageText>m</MessageText></QueueMessage>"
	for i := 0; !strings.Contains(d.stderr.String(), "standby"); i++ {
		if i == 50 {
			t.Fatalf("the health check never reached the standby; log:\n%s", d.stderr.String())
		}
		var h healthReply
		adminCall(t, "GET", d.base+"/_azq/health", 503, &h)
		if h.Reason != "account devstoreaccount1: the database is unavailable" {
			t.Errorf("health: %+v", h)
		}
		status, body := send(t, "POST", d.base+"/devstoreaccount1/jobs/messages", "", strings.NewReader(put), hdr)
		if status != 503 || !strings.Contains(body, "<Code>ServerBusy</Code>") {
			t.Errorf("a Put with the primary down: %d %s, want 503 ServerBusy", status, body)
		}
	}
	// On the standby now: still unhealthy, writes still 503.
	var h healthReply
	adminCall(t, "GET", d.base+"/_azq/health", 503, &h)
	status, body := send(t, "POST", d.base+"/devstoreaccount1/jobs/messages", "", strings.NewReader(put), hdr)
	if status != 503 || !strings.Contains(body, "<Code>ServerBusy</Code>") {
		t.Errorf("a Put on the standby: %d %s, want 503 ServerBusy", status, body)
	}
}
