package azqtest

import (
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// Server is azq's REST server for the development account, for one test.
// NewInProcessServer makes one that clients reach through its Transport
// alone; NewServer one that also listens on a loopback port.
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
	// Handler is the REST handler, for tests that want to wrap it.
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
const InProcessURL = "http://in-process.invalid"

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
	mock := newMock(time.Now().UTC().Truncate(time.Second))
	acct := server.DevelopmentAccount()
	inj, err := faults.New(faults.Options{Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	obs := new(observers)
	log := testLogger(t)
	h := server.New(server.Options{Accounts: []server.Account{acct}, Clock: mock, Faults: inj, Observe: obs.observe, Logger: log})
	s := &Server{
		URL:       InProcessURL,
		Account:   acct,
		Clock:     mock,
		Service:   h.Service(acct.Name),
		Handler:   h,
		Faults:    inj,
		observers: obs,
		transport: NewTransport(h),
	}
	if listen {
		s.hs = httptest.NewServer(h)
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

// newMock returns a mock clock that reads t. Mock.Set would make one, but
// it sleeps a millisecond after every change, for the sake of goroutines
// that wait on the clock's timers, and that millisecond was 95% of a
// test server's cost: a new mock has no timer and nobody waiting on it.
// So the time is written in place, where the clock is laid out as
// benbjohnson/clock has it (v1.3.5, its last release: the repository is
// archived), and set with Set otherwise.
func newMock(t time.Time) *clock.Mock {
	m := clock.NewMock()
	if f := reflect.ValueOf(m).Elem().FieldByName("now"); f.IsValid() && f.Type() == reflect.TypeOf(t) {
		*(*time.Time)(unsafe.Pointer(f.UnsafeAddr())) = t
		return m
	}
	m.Set(t)
	return m
}
