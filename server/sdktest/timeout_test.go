package sdktest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

// putBackEnd is a back end whose Put calls put with the operation's
// context first: its error fails the Put, else the queue puts the
// message.
type putBackEnd struct {
	*azq.Service
	put func(ctx context.Context) (azq.Message, error)
}

func (b putBackEnd) Ref(name string) (azq.QueueRef, error) {
	ref, err := b.Service.Ref(name)
	return putRef{ref, b.put}, err
}

type putRef struct {
	azq.QueueRef
	put func(ctx context.Context) (azq.Message, error)
}

func (r putRef) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	if m, err := r.put(ctx); err != nil || m.ID != (azq.MessageID{}) {
		return m, err
	}
	return r.QueueRef.Put(context.Background(), content, opts)
}

// putServer serves anonymous requests on a back end whose Put is put,
// logging at debug level to logs.
func putServer(t *testing.T, logs io.Writer, put func(ctx context.Context) (azq.Message, error)) *httptest.Server {
	t.Helper()
	svc := azq.NewService()
	if _, _, err := svc.CreateQueue(context.Background(), "orders", nil); err != nil {
		t.Fatal(err)
	}
	acct := server.DevelopmentAccount()
	h := server.New(server.Options{
		Accounts:       []server.Account{acct},
		Services:       map[string]azq.QueueService{acct.Name: putBackEnd{svc, put}},
		AllowAnonymous: true,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		h.Close()
	})
	return hs
}

func putRequest(t *testing.T, hs *httptest.Server, query string) rawResp {
	t.Helper()
	body := "<QueueMessage><MessageText>hello</MessageText></QueueMessage>"
	req, err := http.NewRequest("POST", hs.URL+"/devstoreaccount1/orders/messages"+query, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-ms-version", "2021-12-02")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{resp.StatusCode, resp.Header, string(b)}
}

// Every operation gets a context that ends at the request's deadline:
// its timeout parameter, cut to Azure's 30 seconds, which is also the
// deadline of a request without one.
func TestRequestDeadline(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  time.Duration
	}{
		{"", 30 * time.Second},
		{"?timeout=5", 5 * time.Second},
		{"?timeout=30", 30 * time.Second},
		{"?timeout=45", 30 * time.Second},
		{"?timeout=2147483647", 30 * time.Second},
		{"?timeout=0", 30 * time.Second},
	} {
		t.Run(tc.query, func(t *testing.T) {
			deadlines := make(chan time.Time, 1)
			hs := putServer(t, io.Discard, func(ctx context.Context) (azq.Message, error) {
				d, ok := ctx.Deadline()
				if !ok {
					t.Error("the operation's context has no deadline")
				}
				deadlines <- d
				return azq.Message{}, nil // the queue's Put, then
			})
			before := time.Now()
			r := putRequest(t, hs, tc.query)
			after := time.Now()
			if r.status != http.StatusCreated {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			d := <-deadlines
			if d.Before(before.Add(tc.want)) || d.After(after.Add(tc.want)) {
				t.Errorf("deadline %v after the request, want %v", d.Sub(before), tc.want)
			}
		})
	}
}

// A back end that gives up at the request's deadline is answered 500
// OperationTimedOut with Azure's message, as Azure answers an operation
// that did not finish within its timeout; the back end's error goes to
// the log. A real-clock test: it waits out a timeout of one second.
func TestRequestTimeoutAnswersOperationTimedOut(t *testing.T) {
	var logs syncBuffer
	hs := putServer(t, &logs, func(ctx context.Context) (azq.Message, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute): // no deadline came
		}
		return azq.Message{}, fmt.Errorf("waiting for the store's lock: %w", context.DeadlineExceeded)
	})
	start := time.Now()
	r := putRequest(t, hs, "?timeout=1")
	if took := time.Since(start); took < time.Second || took > 20*time.Second {
		t.Errorf("answered after %v, want about the timeout of 1s", took)
	}
	checkError(t, r, http.StatusInternalServerError, "OperationTimedOut")
	if !strings.Contains(r.body, "<Message>The operation could not be completed within the permitted time.") {
		t.Errorf("body: %s", r.body)
	}
	if log := logs.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "waiting for the store's lock") {
		t.Errorf("log:\n%s", log)
	}
}

// A 5xx error of the back end is answered with Azure's message for its
// code, never the back end's own, which may name the database's user,
// host or socket; that message goes to the log.
func TestServerErrorsAnswerAzureMessages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     *azq.Error
		message string
	}{
		{"ServerBusy", &azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "the database is unavailable: dial unix /run/secret/.s.PGSQL.5432 user=alice"},
			"The server is currently unable to receive requests. Please retry your request."},
		{"InternalError", &azq.Error{Code: "InternalError", StatusCode: 500, Message: "the database failed: relation /run/secret user=alice"},
			"Server encountered an internal error. Please try again after some time."},
		// One of Azure's own reasons for ServerBusy is kept.
		{"ServerBusyReason", &azq.Error{Code: "ServerBusy", StatusCode: 503, Message: "Operations per second is over the account limit."},
			"Operations per second is over the account limit."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			hs := putServer(t, &logs, func(ctx context.Context) (azq.Message, error) { return azq.Message{}, tc.err })
			r := putRequest(t, hs, "")
			checkError(t, r, tc.err.StatusCode, string(tc.err.Code))
			if strings.Contains(r.body, "secret") || strings.Contains(r.body, "alice") || !strings.Contains(r.body, "<Message>"+tc.message) {
				t.Errorf("body: %s", r.body)
			}
			if log := logs.String(); !strings.Contains(log, tc.err.Message) {
				t.Errorf("the back end's message is not in the log:\n%s", log)
			}
		})
	}
}
