package azqtest

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/server"
	"github.com/azqlib/azq/server/admin"
	"github.com/benbjohnson/clock"
)

// Server is azq's REST server for the development account, for one test.
// NewInProcessServer makes one that clients reach through its Transport
// alone; NewServer one that also listens on a loopback port.
//
// Beside the Azure API, at URL + "/_azq/", it serves the admin endpoints
// of package server/admin, so that a test's other process (or an SDK in
// another language) can do over HTTP what the test does through the
// fields below: read and move Clock (GET /_azq/clock, POST
// /_azq/clock/advance?by=, POST /_azq/clock/set?to=), list, add and
// remove the rules of Faults (GET, POST and DELETE /_azq/faults), delete
// every queue (POST /_azq/reset) and read the health check (GET
// /_azq/health); /_azq/metrics is not served, as the package links no
// metrics stack (see SetObserve). As in azqd, they answer clients on
// this machine only, for a Host that names it (an IP address, localhost,
// or InProcessURL's), and refuse a state-changing request from another
// site's page.
type Server struct {
	// URL is the server's base URL: http://127.0.0.1:41234, say, for a
	// server that listens, and InProcessURL for one that does not.
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
	// Handler is the REST handler, for tests that want to wrap it. It
	// serves the Azure API alone, without the admin endpoints.
	Handler *server.Server
	// Faults decides the faults requests meet (package faults), on Clock.
	// It starts with no rules and no throttle; add some to make the
	// server have a bad day.
	Faults *faults.Injector

	hs        *httptest.Server // nil: in process only
	transport *Transport
	observers *observers // what SetObserve set
	close     sync.Once
}

// InProcessURL is the URL of a Server that does not listen. Its host name
// is under .invalid, which no resolver resolves (RFC 6761), so that a
// client built without the server's Transport fails ("no such host")
// instead of reaching whatever listens on some port.
const InProcessURL = "http://" + inProcessHost

const inProcessHost = "in-process.invalid"

// NewInProcessServer returns a Server that no network reaches: clients
// get to it through its Transport, which hands each request to the
// handler in process (NewServiceClient builds an Azure SDK client on it).
// Each such server costs no port, no listener and no goroutine, so that
// every one of many parallel tests can have its own. The server is closed
// when the test ends (Close may also be called earlier).
func NewInProcessServer(t testing.TB) *Server {
	t.Helper()
	return newServer(t, false)
}

// NewServer starts a Server that also listens on a loopback port, for
// clients that take only a URL or a connection string: another
// process, or an SDK whose transport cannot be set. It is closed when the
// test ends (Close may also be called earlier).
//
// Either kind of Server logs each request it answers to t.Log (shown when
// the test fails, or with -v), with the client's x-ms-client-request-id
// and W3C trace-id when it sent them; a benchmark's server logs its
// server errors only, as a benchmark's log is always printed.
func NewServer(t testing.TB) *Server {
	t.Helper()
	return newServer(t, true)
}

func newServer(t testing.TB, listen bool) *Server {
	t.Helper()
	mock := clock.NewMock()
	// Mock.Set sleeps a millisecond of real time, for the sake of
	// goroutines waiting on the clock's timers (a new mock has none); it
	// is the one call that moves a mock without reaching into it.
	mock.Set(time.Now().UTC().Truncate(time.Second))
	acct := server.DevelopmentAccount()
	inj, err := faults.New(faults.Options{Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	obs := new(observers)
	log := testLogger(t)
	h := server.New(server.Options{Accounts: []server.Account{acct}, Clock: mock, Faults: inj, Observe: obs.observe, Logger: log})
	// The in-process URL's host is under .invalid, which no resolver
	// resolves: no page can be served under it.
	guard := admin.NewGuard(admin.GuardOptions{Hosts: []string{inProcessHost}})
	root := admin.New(admin.Options{
		Clock:   admin.NewClock(mock, nil),
		Reset:   h.Reset,
		Faults:  inj,
		Version: azq.Version,
		Guard:   guard,
	}).Mount(h)
	s := &Server{
		URL:       InProcessURL,
		Account:   acct,
		Clock:     mock,
		Service:   h.Service(acct.Name),
		Handler:   h,
		Faults:    inj,
		observers: obs,
		transport: NewTransport(root),
	}
	if listen {
		s.hs = httptest.NewServer(root)
		s.URL = s.hs.URL
	}
	s.Endpoint = s.URL + "/" + acct.Name
	s.ConnectionString = acct.ConnectionString(s.Endpoint)
	t.Cleanup(s.Close)
	return s
}

// Transport returns the server's in-process transport: give it to an
// Azure SDK client as azcore.ClientOptions.Transport, or to an
// http.Client as its Transport, and the client's requests reach the
// server without a connection (see Transport). Requests to a server
// that also listens may go either way.
func (s *Server) Transport() *Transport { return s.transport }

// NewServiceClient returns an Azure SDK client of the account's queue
// service that reaches the server in process: opts (nil means the SDK's
// defaults) with the server's Transport unless it names a transport of
// its own, and the account's Shared Key. Everything else is the SDK's
// own: signing, retries (real time; see the package doc), error types.
func (s *Server) NewServiceClient(opts *azqueue.ClientOptions) (*azqueue.ServiceClient, error) {
	var o azqueue.ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Transport == nil {
		o.Transport = s.transport
	}
	return azqueue.NewServiceClientFromConnectionString(s.ConnectionString, &o)
}

// NewAzureService returns package azure's Service for the account, on the
// server's Transport: opts (nil means the defaults) with
// ClientOptions.Transport set to it unless opts names a transport of its
// own. Pass the server's clock as opts.Clock to have what waits around
// its queues (a worker) follow the server's time.
func (s *Server) NewAzureService(opts *azure.Options) (*azure.Service, error) {
	var o azure.Options
	if opts != nil {
		o = *opts
	}
	var co azqueue.ClientOptions
	if o.ClientOptions != nil {
		co = *o.ClientOptions
	}
	if co.Transport == nil {
		co.Transport = s.transport
	}
	o.ClientOptions = &co
	return azure.NewServiceFromConnectionString(s.ConnectionString, &o)
}

// Close stops the server, waiting for requests in progress, and deletes
// the account's queues. Requests made afterwards fail as a connection to
// a closed port does. It is idempotent.
func (s *Server) Close() {
	s.close.Do(func() {
		s.transport.Close()
		if s.hs != nil {
			s.hs.Close()
		}
		s.Handler.Close()
	})
}
