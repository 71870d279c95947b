package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/server"
)

// slowBackEnd is a back end whose Put waits for its context, as one
// over a network (Azure, a database) waits for an answer that is slow
// to come: it tells started when a Put is waiting.
type slowBackEnd struct {
	*azq.Service
	started chan struct{}
}

func (s slowBackEnd) Ref(name string) (azq.QueueRef, error) {
	ref, err := s.Service.Ref(name)
	return slowRef{ref, s.started}, err
}

type slowRef struct {
	azq.QueueRef
	started chan struct{}
}

func (r slowRef) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	r.started <- struct{}{}
	<-ctx.Done()
	return azq.Message{}, fmt.Errorf("waiting for the store: %w", ctx.Err())
}

// A client that closes its connection while its request waits on the
// back end is the client's cancellation: the back end's "context
// canceled" is not answered as 500 InternalError, logged at error level
// or counted as a server error, but logged at info level as the client's
// and counted as a network error, Azure's name for a client that hangs
// up. The connection is a real TCP one, closed by the client.
func TestClientHangUpIsNotAServerError(t *testing.T) {
	ctx := context.Background()
	svc := azq.NewService()
	if _, _, err := svc.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	backEnd := slowBackEnd{svc, make(chan struct{}, 1)}
	var logs syncBuffer
	observed := make(chan observe.Observation, 1)
	var serverErrors atomic.Int64 // the observations sorted as server errors
	acct := server.DevelopmentAccount()
	h := server.New(server.Options{
		Accounts:       []server.Account{acct},
		Services:       map[string]azq.QueueService{acct.Name: backEnd},
		AllowAnonymous: true,
		Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observe: func(o observe.Observation) {
			if o.Outcome == observe.ServerError {
				serverErrors.Add(1)
			}
			observed <- o
		},
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Close()

	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := "<QueueMessage><MessageText>hello</MessageText></QueueMessage>"
	fmt.Fprintf(conn, "POST /%s/orders/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-ms-version: 2021-12-02\r\nContent-Length: %d\r\n\r\n%s", acct.Name, len(body), body)
	select {
	case <-backEnd.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the Put never reached the back end")
	}
	conn.Close()
	var o observe.Observation
	select {
	case o = <-observed:
	case <-time.After(10 * time.Second):
		t.Fatal("the request was never observed")
	}
	if o.Outcome != observe.NetworkError || o.Status != 0 {
		t.Errorf("observed %+v, want outcome network_error and no status", o)
	}
	if n := serverErrors.Load(); n != 0 {
		t.Errorf("%d server errors counted", n)
	}
	log := logs.String()
	if strings.Contains(log, "level=ERROR") || strings.Contains(log, "InternalError") || !strings.Contains(log, "level=INFO") || !strings.Contains(log, "client_canceled=true") {
		t.Errorf("log:\n%s", log)
	}
}

// A client that hangs up while a fault's delay holds its answer back is
// the client's cancellation too: logged at info level, counted as a
// network error.
func TestClientHangUpDuringFaultDelay(t *testing.T) {
	inj, err := faults.New(faults.Options{Config: faults.Config{Rules: []faults.Rule{
		{Name: "slow", Then: faults.Then{Delay: 10 * time.Minute}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	observed := make(chan observe.Observation, 1)
	h := server.New(server.Options{
		AllowAnonymous: true,
		Faults:         inj,
		Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observe:        func(o observe.Observation) { observed <- o },
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Close()
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /devstoreaccount1?comp=list HTTP/1.1\r\nHost: 127.0.0.1\r\nx-ms-version: 2021-12-02\r\n\r\n")
	// The rule's hit is counted when the delay begins.
	for deadline := time.Now().Add(10 * time.Second); inj.Totals().Hits["slow"] == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the request never met the delay")
		}
		time.Sleep(time.Millisecond)
	}
	conn.Close()
	select {
	case o := <-observed:
		if o.Outcome != observe.NetworkError {
			t.Errorf("observed %+v, want outcome network_error", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request was never observed")
	}
	if log := logs.String(); !strings.Contains(log, "level=INFO") || !strings.Contains(log, "client_canceled=true") {
		t.Errorf("log:\n%s", log)
	}
}

// syncBuffer is a bytes.Buffer safe for the server goroutine to write
// while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}
