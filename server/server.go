package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/internal/guard"
	"github.com/azqlib/azq/observe"
	"github.com/benbjohnson/clock"
)

// Options configure a Server.
type Options struct {
	// Accounts are the storage accounts served. Empty means the
	// well-known development account only (DevelopmentAccount).
	Accounts []Account
	// Clock is the clock the in-memory azq.Service of every account not
	// in Services reads time from; nil means the real clock. The handler
	// takes the Date header and the time SAS tokens are checked against
	// from the clock of the request's account (its back end's Clock), so
	// give the back ends in Services this clock too. Unless it is a
	// *clock.Mock, Shared Key requests dated more than 15 minutes from it
	// are refused, as Azure refuses them; a mock clock skips that check,
	// since clients sign with their own real clock.
	Clock clock.Clock
	// AllowAnonymous accepts requests that carry no credentials at all.
	// Requests that do carry credentials are still verified.
	AllowAnonymous bool
	// StrictVersion rejects x-ms-version values newer than the newest
	// version this server knows. By default any well-formed version from
	// 2009-09-19 on is accepted and echoed back.
	StrictVersion bool
	// Logger receives one record per request: method, path, operation,
	// account, queue, status, Azure error code, duration, the x-ms-version
	// and User-Agent sent, the request id (x-ms-request-id), and, when the
	// client sent them, its x-ms-client-request-id (client_request_id; the
	// Azure SDKs send one with every request) and the trace-id and
	// parent-id of its W3C traceparent (trace_id, parent_id; an SDK with
	// tracing on sends one), so that a client's request can be found in
	// the log. A malformed traceparent is logged as traceparent_invalid
	// and otherwise ignored; client values are cut to 256 bytes. Successful requests are
	// logged at debug level; client errors (4xx) at info, and so are
	// requests whose client went away before the answer (status 0,
	// client_canceled); server errors (5xx) at error. nil logs nothing.
	Logger *slog.Logger
	// OAuth, when set, accepts Microsoft Entra ID bearer tokens over
	// HTTPS (see OAuthOptions). Without it a bearer token is refused.
	OAuth *OAuthOptions
	// Services, if set, supplies the back end of each account named in
	// it, any keeper of the service contract (a durable *azq.Service from
	// azq.Open, an *azure.Service, a PostgreSQL one), instead of a new
	// in-memory *azq.Service. Every request goes through the contract;
	// the account's times come from the back end's Clock. The Server
	// closes them on Close. A nil entry is as good as none; an entry that
	// holds a nil pointer (a *azq.Service variable never assigned) makes
	// New panic, naming the account, since no request could be served.
	Services map[string]azq.QueueService
	// Faults, if set, decides for every request that reaches its
	// operation (after authorization) whether it meets a fault: a delay,
	// an Azure error answer, a failed connection, or its answer lost
	// after it took effect; and throttles requests past its rates (see
	// package faults). Give it the clock the server reads. Its rules and
	// throttle may change while the server runs.
	Faults *faults.Injector
	// Observe, if set, is called once per request after it is answered,
	// with the operation, account, status, outcome and duration; package
	// metrics counts these for Prometheus. It must be safe for
	// concurrent use and quick: it runs on the request's goroutine.
	Observe func(observe.Observation)
	// PathStyleOnly takes the account from the first path segment of every
	// request, never from the host name, as Azurite's
	// --disableProductStyleUrl does: for a host whose first label happens
	// to name an account (a container named devstoreaccount1, say).
	PathStyleOnly bool
	// SaveProperties, if set, keeps an account's service properties (CORS,
	// logging and metrics settings) across restarts: it is called with
	// the account's name and the properties, as the document Get Queue
	// Service Properties answers with, whenever Set Queue Service
	// Properties or Reset changes them, before the change takes effect.
	// If it fails, the change is not made and the request fails with 500
	// InternalError. LoadProperties restores what it saved.
	SaveProperties func(account string, doc []byte) error
	// CheckHost refuses every request whose Host header does not name
	// this machine or a name the server answers to, before anything else
	// is looked at: 421 Misdirected Request with Azure's error document,
	// code HostNotAllowed. It lets through IP addresses, localhost and
	// names under .localhost, the production host names of the served
	// accounts ({account}.queue.core.windows.net, its -secondary, and
	// the US Government and China clouds' equivalents, which no one else
	// can point at this machine), and AllowedHosts.
	//
	// It guards a server that listens on loopback against DNS rebinding:
	// a page in the developer's browser, under a name of its own that it
	// points at 127.0.0.1, is same-origin to the browser, and with the
	// public key of the development account (or a SAS made from it)
	// could read and clear the queues. A server that clients reach by
	// other names (a container's service name) lists them in
	// AllowedHosts, or leaves CheckHost off, as Azurite does. azqd turns
	// it on when it listens on loopback only.
	CheckHost bool
	// AllowedHosts are further Host names CheckHost lets through, without
	// port; case and a trailing dot do not matter.
	AllowedHosts []string
}

// Server is an http.Handler that serves the Azure Queue Storage REST API
// for a set of accounts, each backed by its own azq.QueueService.
type Server struct {
	accounts map[string]*accountState
	anon     bool
	strict   bool
	pathOnly bool // Options.PathStyleOnly
	log      *slog.Logger
	oauth    *bearerVerifier // nil: bearer tokens are refused
	// clock is the clock every account shares; errors raised before the
	// request's account is known take their time from it.
	clock clock.Clock
	// checkDateSkew is set unless clock is a mock; see authorize.
	checkDateSkew bool

	dateCache atomic.Pointer[cachedDate]

	faults  *faults.Injector          // nil: no fault injection
	observe func(observe.Observation) // nil: nothing observes
	hosts   *guard.Hosts              // Options.CheckHost's; nil: any Host
}

// accountState is one served account: its credentials, its queues and the
// service properties (CORS, logging and metrics settings) of its queue
// service.
type accountState struct {
	acct Account
	keys []*signingKey // acct.Keys, decoded
	svc  azq.QueueService
	// mem is svc when it is an *azq.Service, for Service; else nil.
	mem   *azq.Service
	clock clock.Clock
	// lookupPolicy is the method value a.policy, made once: made in
	// each request, it would be allocated in each.
	lookupPolicy func(queue, id string) (azq.AccessPolicy, bool, error)

	mu    sync.RWMutex
	props serviceProperties
	save  func(doc []byte) error // Options.SaveProperties for this account; nil if none

	// keeper is svc when it keeps the service properties itself (see
	// PropertiesKeeper); props and save are then unused. mu guards the
	// last document read from it and its parsed form, kept so that an
	// unchanged document is not parsed again.
	keeper     PropertiesKeeper
	keptDoc    []byte
	keptParsed serviceProperties
}

// PropertiesKeeper is implemented by a back end that keeps its account's
// service properties (CORS rules, logging and metrics settings) itself,
// where every Server that serves the account reads them: a PostgreSQL
// Service keeps them in its schema, so that replicas of azqd on one
// database answer with the same properties and apply the same CORS rules.
// The Server asks it on each request that reads the properties (Get Queue
// Service Properties, a CORS preflight, a request that carries an Origin
// header) and changes them through it (Set Queue Service Properties,
// Reset); Options.SaveProperties is not called for such an account.
type PropertiesKeeper interface {
	// ServiceProperties returns the properties document last stored, as
	// Get Queue Service Properties answers with it, or nil if none has
	// been: the properties of a new account. The Server may keep the
	// slice, which the keeper must not change afterwards.
	ServiceProperties(ctx context.Context) ([]byte, error)
	// UpdateServiceProperties replaces the stored document with what
	// update returns, given the stored one (nil if none), atomically
	// with respect to every other update, by any process. If update
	// fails, nothing changes and its error is returned unchanged.
	UpdateServiceProperties(ctx context.Context, update func(stored []byte) ([]byte, error)) error
}

// New returns a Server for the accounts in opts.
func New(opts Options) *Server {
	accts := opts.Accounts
	if len(accts) == 0 {
		accts = []Account{DevelopmentAccount()}
	}
	c := opts.Clock
	if c == nil {
		c = clock.New()
	}
	_, mock := c.(*clock.Mock)
	s := &Server{
		accounts:      make(map[string]*accountState, len(accts)),
		anon:          opts.AllowAnonymous,
		strict:        opts.StrictVersion,
		pathOnly:      opts.PathStyleOnly,
		log:           opts.Logger,
		clock:         c,
		checkDateSkew: !mock,
		oauth:         newBearerVerifier(opts.OAuth),
		faults:        opts.Faults,
		observe:       opts.Observe,
	}
	if opts.CheckHost {
		s.hosts = guard.NewHosts(servedHosts(accts, opts.AllowedHosts)...)
	}
	for _, a := range accts {
		a.Keys = append([]string(nil), a.Keys...)
		svc := opts.Services[a.Name]
		if svc != nil && isNilPointer(svc) {
			panic(fmt.Sprintf("server: Options.Services[%q] is a nil %T: give the account a back end, or leave it out of Services for an in-memory one", a.Name, svc))
		}
		if svc == nil {
			svc = azq.NewService(azq.WithClock(c))
		}
		mem, _ := svc.(*azq.Service)
		as := &accountState{acct: a, keys: a.keyBytes(), svc: svc, mem: mem, clock: svc.Clock(), props: defaultServiceProperties()}
		as.lookupPolicy = as.policy
		as.keeper, _ = svc.(PropertiesKeeper)
		if save := opts.SaveProperties; save != nil && as.keeper == nil {
			name := a.Name
			as.save = func(doc []byte) error { return save(name, doc) }
		}
		s.accounts[a.Name] = as
	}
	return s
}

// isNilPointer reports whether v, a non-nil interface, holds a nil pointer
// (or another nil value of a kind that has one), on which the back end's
// methods would fail.
func isNilPointer(v any) bool {
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return r.IsNil()
	}
	return false
}

// servedHosts are the Host names CheckHost allows besides IP addresses
// and localhost: the production queue endpoints of the accounts and of
// their secondaries, and allowed.
func servedHosts(accounts []Account, allowed []string) []string {
	names := append([]string(nil), allowed...)
	for _, a := range accounts {
		for _, suffix := range queueEndpointSuffixes {
			names = append(names, a.Name+suffix, a.Name+"-secondary"+suffix)
		}
	}
	return names
}

// errHostNotAllowed is the answer of CheckHost to a Host it does not
// allow. The code is azq's own: Azure, reached by its own names only, has
// none for it.
func errHostNotAllowed(host string) *azq.Error {
	return &azq.Error{Code: "HostNotAllowed", StatusCode: http.StatusMisdirectedRequest,
		Message: "This server does not answer to the Host " + truncate(host, 100) + ": it answers to IP addresses, localhost " +
			"and the names it serves or is told to allow, so that a page under another name that resolves to this machine " +
			"cannot reach it. Allow the name with server.Options.AllowedHosts (azqd -allow-host NAME)."}
}

// LoadProperties sets the service properties of the named account from
// doc, a StorageServiceProperties document as Options.SaveProperties
// received it (or a Set Queue Service Properties body), for restoring
// them before the Server serves. It does not call SaveProperties. An
// account whose back end keeps its properties (PropertiesKeeper) has
// them there: LoadProperties refuses it.
func (s *Server) LoadProperties(account string, doc []byte) error {
	a, ok := s.accounts[account]
	if !ok {
		return fmt.Errorf("server: no account %q", account)
	}
	if a.keeper != nil {
		return fmt.Errorf("server: the back end of account %s keeps its service properties itself", account)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, err := applyServiceProperties(doc, defaultServiceProperties())
	if err != nil {
		return fmt.Errorf("server: the service properties of %s: %w", account, err)
	}
	a.props = p
	return nil
}

// setProperties makes p the account's service properties, saving them
// first if the Server saves them. a.mu must be held.
func (a *accountState) setProperties(p serviceProperties) error {
	if a.save != nil {
		if err := a.save(p.appendXML(nil)); err != nil {
			return fmt.Errorf("saving the service properties of %s: %w", a.acct.Name, err)
		}
	}
	a.props = p
	return nil
}

// Service returns the *azq.Service behind the named account, in memory
// (the default) or durable, for tests that seed and inspect its queues
// directly; nil if the server has no such account or its back end is
// another keeper of the contract (Options.Services), which QueueService
// returns.
func (s *Server) Service(account string) *azq.Service {
	if a, ok := s.accounts[account]; ok {
		return a.mem
	}
	return nil
}

// QueueService returns the back end of the named account, whatever it is,
// or nil if the server has no such account.
func (s *Server) QueueService(account string) azq.QueueService {
	if a, ok := s.accounts[account]; ok {
		return a.svc
	}
	return nil
}

// Reset empties every account: it deletes every queue, through the
// account's back end, and restores the service properties of a new
// account (no CORS rules, logging and minute metrics off, hour metrics
// on, as Azure has them), as a freshly started server has them. Tests
// call it between cases for isolation. On a back end that keeps its
// queues elsewhere (a durable Service, a storage account, a database) the
// queues are deleted there: Reset is for the back ends of tests. Requests
// served meanwhile see some queues gone and others not yet.
func (s *Server) Reset(ctx context.Context) error {
	for _, a := range s.accounts {
		for {
			page, err := a.svc.ListQueues(ctx, azq.ListQueuesOptions{})
			if err != nil {
				return err
			}
			if len(page.Queues) == 0 {
				break
			}
			for _, it := range page.Queues {
				err := a.svc.DeleteQueue(ctx, it.Name)
				if err != nil && !errors.Is(err, azq.ErrQueueNotFound) {
					return err
				}
			}
		}
		if err := a.resetProperties(ctx); err != nil {
			return err
		}
	}
	return nil
}

// resetProperties gives the account the properties of a new account.
func (a *accountState) resetProperties(ctx context.Context) error {
	if a.keeper != nil {
		return a.keeper.UpdateServiceProperties(ctx, func([]byte) ([]byte, error) {
			p := defaultServiceProperties()
			return p.appendXML(nil), nil
		})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.setProperties(defaultServiceProperties())
}

// properties returns the account's service properties: its own, or those
// its back end keeps, read now.
func (a *accountState) properties(ctx context.Context) (serviceProperties, error) {
	if a.keeper == nil {
		a.mu.RLock()
		defer a.mu.RUnlock()
		return a.props, nil
	}
	doc, err := a.keeper.ServiceProperties(ctx)
	if err != nil {
		return serviceProperties{}, err
	}
	if doc == nil {
		return defaultServiceProperties(), nil
	}
	a.mu.RLock()
	if bytes.Equal(doc, a.keptDoc) {
		p := a.keptParsed
		a.mu.RUnlock()
		return p, nil
	}
	a.mu.RUnlock()
	p, err := parseStoredProperties(doc)
	if err != nil {
		return serviceProperties{}, err
	}
	a.mu.Lock()
	a.keptDoc, a.keptParsed = doc, p
	a.mu.Unlock()
	return p, nil
}

// parseStoredProperties reads a document a PropertiesKeeper stored: one
// this server wrote, so a failure to read it is the back end's, answered
// with 500 InternalError.
func parseStoredProperties(doc []byte) (serviceProperties, error) {
	p, err := applyServiceProperties(doc, defaultServiceProperties())
	if err != nil {
		return serviceProperties{}, &azq.Error{Code: "InternalError", StatusCode: http.StatusInternalServerError,
			Message: "the stored service properties are not a document this server reads: " + err.Error()}
	}
	return p, nil
}

// Close closes every account's back end (QueueService.Close): in-memory
// Services forget their queues, the others keep theirs where they keep
// them. Requests served afterwards get what the closed back end answers;
// an in-memory or durable Service finds no queues and creates none. It
// reports the back ends' failures to close.
func (s *Server) Close() error {
	var errs []error
	for _, a := range s.accounts {
		if err := a.svc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("account %s: %w", a.acct.Name, err))
		}
	}
	return errors.Join(errs...)
}

// policy looks up a stored access policy for service SAS verification.
func (a *accountState) policy(queue, id string) (azq.AccessPolicy, bool, error) {
	q, err := a.svc.Ref(queue)
	if err != nil {
		return azq.AccessPolicy{}, false, err
	}
	ps, err := q.AccessPolicies(context.Background())
	if err != nil {
		return azq.AccessPolicy{}, false, err
	}
	for _, p := range ps {
		if p.ID == id {
			return p, true, nil
		}
	}
	return azq.AccessPolicy{}, false, nil
}

// request is the state of one request as it moves through ServeHTTP.
type request struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request
	acct      *accountState
	secondary bool
	pathStyle bool
	// wrote is set once the answer's status is sent.
	wrote bool
	// accountSeg is the account's path segment as sent (path-style).
	accountSeg string
	// rest is the path below the account as sent, without its leading
	// slash; classify splits it into segments.
	rest    string
	queue   string
	msgID   string
	op      operation
	version string
	verNum  int // the version as yyyymmdd
	reqID   string
	now     time.Time
	query   query

	status  int
	errCode string
	// canceled is set when the client went away before the answer, and
	// none was sent (see clientGone).
	canceled bool
	fault    *faultState // nil unless an injected fault fired
	// cause is the back end's error a 5xx answer reports, for the log.
	cause error
	// bodyLen is the length of the body writeXML sends, for its
	// Content-Length header; -1 until then.
	bodyLen int
}

// requests holds request values for reuse: the operations take a
// *request, so each would otherwise be allocated, over 600 bytes a
// request.
var requests = sync.Pool{New: func() any { return new(request) }}

// ServeHTTP serves one REST request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := requests.Get().(*request)
	*q = request{s: s, w: w, r: r, reqID: newRequestID(), version: newestVersion, verNum: newestVersionNum, bodyLen: -1}
	defer func() {
		p := recover()
		aborted := p == http.ErrAbortHandler
		if p != nil && !aborted {
			if s.log != nil {
				s.log.Error("panic serving request", "request_id", q.reqID, "panic", fmt.Sprint(p))
			}
			if !q.wrote {
				q.fail(errInternal())
			}
		}
		if s.log != nil && (!aborted || q.droppedConnection() || q.canceled) {
			q.logRequest(time.Since(start))
		}
		if s.observe != nil {
			q.observe(time.Since(start), aborted)
		}
		*q = request{} // drop the references to this request
		requests.Put(q)
		if aborted {
			panic(p)
		}
	}()
	q.serve()
}

// logRequest writes the request's log record: at debug level when it
// succeeded, at info level with the error code when the client erred
// (4xx) or went away before its answer, at error level when the server
// erred (5xx).
func (q *request) logRequest(took time.Duration) {
	level := slog.LevelDebug
	switch {
	case q.status >= 500:
		level = slog.LevelError
	case q.status >= 400, q.canceled:
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !q.s.log.Enabled(ctx, level) {
		return
	}
	path, account := "", ""
	if q.r.URL != nil {
		path = q.r.URL.Path
	}
	if q.acct != nil {
		account = q.acct.acct.Name
	}
	attrs := []slog.Attr{
		slog.String("method", q.r.Method),
		slog.String("path", path),
		slog.String("op", q.op.String()),
		slog.String("account", account),
		slog.String("queue", q.queue),
		slog.Int("status", q.status),
	}
	if q.errCode != "" {
		attrs = append(attrs, slog.String("error_code", q.errCode))
	}
	if q.canceled {
		attrs = append(attrs, slog.Bool("client_canceled", true))
	}
	if q.cause != nil {
		attrs = append(attrs, slog.String("error", q.cause.Error()))
	}
	attrs = append(attrs,
		slog.Duration("duration", took),
		slog.String("x_ms_version", q.r.Header.Get("X-Ms-Version")),
		slog.String("user_agent", q.r.UserAgent()),
		slog.String("request_id", q.reqID))
	if id := q.r.Header["X-Ms-Client-Request-Id"]; len(id) > 0 {
		attrs = append(attrs, slog.String("client_request_id", truncate(id[0], maxLoggedHeader)))
	}
	attrs = q.traceAttrs(attrs)
	q.s.log.LogAttrs(ctx, level, "request", attrs...)
}

func (q *request) serve() {
	if q.s.hosts != nil && !q.s.hosts.Allowed(q.r.Host) {
		q.fail(errHostNotAllowed(q.r.Host))
		return
	}
	if err := q.resolveAccount(); err != nil {
		q.fail(err)
		return
	}
	q.now = q.acct.clock.Now()
	if err := q.checkClientRequestID(); err != nil {
		q.fail(err)
		return
	}
	if err := q.parseVersion(); err != nil {
		q.fail(err)
		return
	}
	if err := q.query.parse(q.r.URL.RawQuery); err != nil {
		q.fail(err)
		return
	}
	q.sasVersion()
	if err := q.classify(); err != nil {
		q.fail(err)
		return
	}
	if q.queue != "" {
		if err := azq.ValidateQueueName(q.queue); err != nil {
			q.fail(err)
			return
		}
	}
	if q.op == opPreflight {
		q.preflight()
		return
	}
	if err := authorize(authRequest{
		r: q.r, query: &q.query, account: &q.acct.acct, keys: q.acct.keys, secondary: q.secondary, queue: q.queue,
		op: q.op, now: q.now, checkDateSkew: q.s.checkDateSkew, policy: q.acct.lookupPolicy, allowAnonymous: q.s.anon,
		oauth: q.s.oauth,
	}); err != nil {
		if e, ok := err.(*azq.Error); ok && e.StatusCode == http.StatusUnauthorized {
			q.w.Header().Set("WWW-Authenticate", bearerChallenge)
		}
		q.fail(err)
		return
	}
	if err := q.checkTimeout(); err != nil {
		q.fail(err)
		return
	}
	if q.s.faults != nil && q.injectFault() {
		return
	}
	if err := q.runOperation(); err != nil {
		q.fail(err)
	}
}

// maxServerTimeout is Azure's ceiling on the time a queue operation takes
// on the server, and the time it has when the request gives no timeout
// parameter: Azure cuts a larger timeout to it.
const maxServerTimeout = 30 * time.Second

// serverTimeout is the time the request's operation has: its timeout
// parameter (seconds, checked by checkTimeout), at most maxServerTimeout.
// A timeout of 0 is taken as none given, the ceiling.
func (q *request) serverTimeout() time.Duration {
	v, ok := q.query.get("timeout")
	if !ok {
		return maxServerTimeout
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n >= int64(maxServerTimeout/time.Second) {
		return maxServerTimeout
	}
	return time.Duration(n) * time.Second
}

// runOperation runs the request's operation with a context that ends at
// its deadline (serverTimeout, on the real clock: it bounds the work, not
// the queue's time), so that a back end that waits on a database or a
// network gives up in time. A back end that gave up at the deadline is
// answered 500 OperationTimedOut, as Azure answers an operation that did
// not finish within its timeout; one that completed is answered as
// usual, however late.
func (q *request) runOperation() error {
	base := q.r
	ctx, cancel := context.WithTimeout(base.Context(), q.serverTimeout())
	defer cancel()
	q.r = base.WithContext(ctx)
	err := operations[q.op].serve(q)
	q.r = base
	if err != nil && errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) && base.Context().Err() == nil {
		return errOperationTimedOut(err)
	}
	return err
}

// resolveAccount finds the account the request addresses: host-style when
// the first DNS label of a non-IP host names a served account (or its
// "-secondary") and Options.PathStyleOnly is off, else path-style from the
// first path segment. It leaves
// the path below the account, as sent, in q.rest for classify.
//
// Routing reads the path as sent (requestPath), not the decoded
// r.URL.Path: a percent-encoded "/" is part of its segment, so
// "/devstoreaccount1/victim%2Fmessages" names the queue "victim/messages"
// (an invalid name), never the messages of queue "victim". That is also
// the path the Shared Key signature covers and the one a proxy in front
// sees.
func (q *request) resolveAccount() error {
	raw := strings.TrimPrefix(requestPath(q.r), "/")
	host := hostWithoutPort(q.r.Host)
	if label, _, _ := strings.Cut(host, "."); label != "" && !q.s.pathOnly {
		// Only a label that names an account is worth the IP check; an
		// emulator address such as 127.0.0.1 never gets that far.
		if a, sec := q.s.lookupAccount(strings.ToLower(label)); a != nil && net.ParseIP(host) == nil {
			q.acct, q.secondary, q.rest = a, sec, raw
			return nil
		}
	}
	rawSeg, rest, _ := strings.Cut(raw, "/")
	seg, err := url.PathUnescape(rawSeg)
	if err != nil {
		return errInvalidURI()
	}
	if seg == "" {
		return errInvalidURI()
	}
	a, sec := q.s.lookupAccount(seg)
	if a == nil {
		// Azure answers a request for an account it does not serve
		// before looking at its credentials.
		return errResourceNotFound()
	}
	q.acct, q.secondary, q.pathStyle, q.accountSeg, q.rest = a, sec, true, rawSeg, rest
	return nil
}

// hostWithoutPort strips the port and IPv6 brackets from a Host header.
func hostWithoutPort(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return h[1:i]
		}
		return h
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.IndexByte(h[:i], ':') < 0 {
		return h[:i]
	}
	return h
}

func (s *Server) lookupAccount(name string) (*accountState, bool) {
	if a, ok := s.accounts[name]; ok {
		return a, false
	}
	if base, ok := strings.CutSuffix(name, "-secondary"); ok {
		if a, ok := s.accounts[base]; ok {
			return a, true
		}
	}
	return nil, false
}

// classify decides the operation from the method, the path below the
// account and the comp and restype parameters, by the route table.
func (q *request) classify() error {
	m := q.r.Method
	if m == http.MethodOptions {
		q.op = opPreflight
		return nil
	}
	p := strings.TrimSuffix(q.rest, "/")
	var parts [4]string
	n := 0
	for p != "" && n < len(parts) {
		var seg string
		seg, p, _ = strings.Cut(p, "/")
		seg, err := url.PathUnescape(seg)
		if err != nil {
			return errInvalidURI()
		}
		parts[n] = seg
		n++
	}
	if p != "" || n > int(resMessage) || n >= 2 && parts[1] != "messages" {
		return errInvalidURI()
	}
	res := resource(n)
	q.queue = parts[0]
	q.msgID = parts[2]
	comp, _ := q.query.get("comp")
	restype, _ := q.query.get("restype")
	rt, found, allowed := findRoute(res, m, comp, restype)
	switch {
	case !found && res == resService && restype != "" && restype != "service":
		return invalidQueryValue("restype", restype, "")
	case !found:
		return invalidQueryValue("comp", comp, "")
	case res == resQueue && comp == "" && (m == http.MethodGet || m == http.MethodHead):
		// A queue without comp has no operation to read; Azure reports
		// the missing comp as an invalid value, not the method.
		return invalidQueryValue("comp", comp, "")
	case !allowed || q.verNum < rt.minVersion:
		return errUnsupportedVerb()
	}
	q.op = rt.op
	if q.op == opGetMessages {
		if v, ok := q.query.get("peekonly"); ok {
			switch strings.ToLower(v) {
			case "true":
				q.op = opPeekMessages
			case "false":
			default:
				return invalidQueryValue("peekonly", v, "")
			}
		}
	}
	return nil
}

// checkTimeout validates the timeout parameter every operation accepts.
func (q *request) checkTimeout() error {
	v, ok := q.query.get("timeout")
	if !ok {
		return nil
	}
	if _, err := parseInt32("timeout", v); err != nil {
		return err
	}
	if v[0] == '-' {
		return outOfRange("timeout", v, "0", "")
	}
	return nil
}

// failure converts err into the *azq.Error the response reports.
func failure(err error) *azq.Error {
	var e *azq.Error
	if errors.As(err, &e) && e.StatusCode >= 400 && e.Code != "" {
		return e
	}
	return errInternal()
}
