package azqtest

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// Server is azq's REST server for the development account, listening on
// a loopback port for one test.
type Server struct {
	// URL is the server's base URL, such as http://127.0.0.1:41234.
	URL string
	// Endpoint is the account's queue endpoint, path-style as the
	// emulators address accounts: URL + "/devstoreaccount1".
	Endpoint string
	// ConnectionString is a Shared Key connection string for the account
	// at Endpoint, which the Azure SDKs and package azure accept.
	ConnectionString string
	// Account is the served account, the well-known development account
	// with its public key.
	Account server.Account
	// Clock is the mock clock the server and its queues read time from.
	// It starts at the current time, truncated to the second (the REST
	// API's times are whole seconds, and SAS tokens that an SDK signs
	// carry real times), and moves only when the test moves it.
	Clock *clock.Mock
	// Service holds the account's queues, in process: seed and inspect
	// them directly, without a request.
	Service *azq.Service
	// Handler is the REST handler, for tests that want to wrap it.
	Handler *server.Server
	// Faults decides the faults requests meet (package faults), on Clock.
	// It starts with no rules and no throttle; add some to make the
	// server have a bad day.
	Faults *faults.Injector
	// Metrics counts the requests the server answers, its queues and the
	// faults' hits; Metrics.Snapshot reads the counts,
	// Metrics.WritePrometheus the Prometheus text azqd serves at /metrics.
	Metrics *metrics.Recorder

	hs    *httptest.Server
	close sync.Once
}

// NewServer starts a Server and closes it when the test ends (Close may
// also be called earlier). The server logs each request it answers to
// t.Log (shown when the test fails, or with -v), with the client's
// x-ms-client-request-id and W3C trace-id when it sent them; a
// benchmark's server logs its server errors only, as a benchmark's log
// is always printed.
func NewServer(t testing.TB) *Server {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(time.Now().UTC().Truncate(time.Second))
	acct := server.DevelopmentAccount()
	inj, err := faults.New(faults.Options{Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder()
	log := testLogger(t)
	h := server.New(server.Options{Accounts: []server.Account{acct}, Clock: mock, Faults: inj, Observe: rec.Observe, Logger: log})
	rec.WatchService(acct.Name, h.Service(acct.Name))
	rec.WatchFaults(inj)
	hs := httptest.NewServer(h)
	endpoint := hs.URL + "/" + acct.Name
	s := &Server{
		URL:              hs.URL,
		Endpoint:         endpoint,
		ConnectionString: acct.ConnectionString(endpoint),
		Account:          acct,
		Clock:            mock,
		Service:          h.Service(acct.Name),
		Handler:          h,
		Faults:           inj,
		Metrics:          rec,
		hs:               hs,
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, waiting for requests in progress, and deletes
// the account's queues. It is idempotent.
func (s *Server) Close() {
	s.close.Do(func() {
		s.hs.Close()
		s.Handler.Close()
	})
}
