package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// Options configure a Server.
type Options struct {
	// Accounts are the storage accounts served. Empty means the
	// well-known development account only (DevelopmentAccount).
	Accounts []Account
	// Clock is the clock every account's azq.Service reads time from;
	// nil means the real clock. The handler takes the Date header and the
	// time SAS tokens are checked against from the same clock.
	Clock clock.Clock
	// AllowAnonymous accepts requests that carry no credentials at all.
	// Requests that do carry credentials are still verified.
	AllowAnonymous bool
	// StrictVersion rejects x-ms-version values newer than the newest
	// version this server knows. By default any well-formed version from
	// 2009-09-19 on is accepted and echoed back.
	StrictVersion bool
	// Logger receives one record per request (method, path, operation,
	// status, duration, request id); nil logs nothing.
	Logger *slog.Logger
	// Services, if set, supplies the azq.Service of each account named in
	// it (durable ones from azq.Open, say) instead of a new in-memory
	// Service; the Server closes them on Close.
	Services map[string]*azq.Service
}

// Server is an http.Handler that serves the Azure Queue Storage REST API
// for a set of accounts, each backed by its own azq.Service.
type Server struct {
	accounts map[string]*accountState
	anon     bool
	strict   bool
	log      *slog.Logger
	// clock is the clock every account shares; errors raised before the
	// request's account is known take their time from it.
	clock clock.Clock

	dateCache atomic.Pointer[cachedDate]
}

// accountState is one served account: its credentials, its queues and the
// service properties (CORS, logging and metrics settings) of its queue
// service.
type accountState struct {
	acct  Account
	keys  [][]byte // acct.Keys, decoded
	svc   *azq.Service
	clock clock.Clock

	mu    sync.RWMutex
	props serviceProperties
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
	s := &Server{
		accounts: make(map[string]*accountState, len(accts)),
		anon:     opts.AllowAnonymous,
		strict:   opts.StrictVersion,
		log:      opts.Logger,
		clock:    c,
	}
	for _, a := range accts {
		a.Keys = append([]string(nil), a.Keys...)
		svc := opts.Services[a.Name]
		if svc == nil {
			svc = azq.NewService(azq.WithClock(c))
		}
		s.accounts[a.Name] = &accountState{acct: a, keys: a.keyBytes(), svc: svc, clock: svc.Clock(), props: defaultServiceProperties()}
	}
	return s
}

// Service returns the azq.Service behind the named account, or nil if the
// server has no such account. Tests use it to seed and inspect state
// directly.
func (s *Server) Service(account string) *azq.Service {
	if a, ok := s.accounts[account]; ok {
		return a.svc
	}
	return nil
}

// Close closes every account's Service, deleting all queues of in-memory
// ones (durable ones keep theirs on disk). Requests served afterwards find
// no queues and cannot create any. It reports the Services' failures to
// close.
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
	q, err := a.svc.Queue(queue)
	if err != nil {
		return azq.AccessPolicy{}, false, err
	}
	return q.AccessPolicy(context.Background(), id)
}

// request is the state of one request as it moves through ServeHTTP.
type request struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request
	acct      *accountState
	secondary bool
	pathStyle bool
	queue     string
	msgID     string
	op        operation
	version   string
	verNum    int // the version as yyyymmdd
	reqID     string
	now       time.Time
	query     query

	status  int
	errCode string
	wrote   bool
}

// ServeHTTP serves one REST request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := request{s: s, w: w, r: r, reqID: newRequestID(), version: latestVersion, verNum: latestVersionNum}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			if s.log != nil {
				s.log.Error("panic serving request", "request_id", q.reqID, "panic", fmt.Sprint(p))
			}
			if !q.wrote {
				q.fail(errInternal())
			}
		}
		if s.log != nil {
			path := ""
			if r.URL != nil {
				path = r.URL.Path
			}
			s.log.Info("request",
				"method", r.Method, "path", path, "op", q.op.String(),
				"status", q.status, "error_code", q.errCode,
				"duration", time.Since(start), "request_id", q.reqID)
		}
	}()
	q.serve()
}

func (q *request) serve() {
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
		r: q.r, account: &q.acct.acct, keys: q.acct.keys, secondary: q.secondary, queue: q.queue,
		op: q.op, now: q.now, policy: q.acct.policy, allowAnonymous: q.s.anon,
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
	var err error
	switch q.op {
	case opListQueues:
		err = q.listQueues()
	case opGetServiceProperties:
		err = q.getServiceProperties()
	case opSetServiceProperties:
		err = q.setServiceProperties()
	case opGetServiceStats:
		err = q.getServiceStats()
	case opCreateQueue:
		err = q.createQueue()
	case opDeleteQueue:
		err = q.deleteQueue()
	case opGetQueueMetadata:
		err = q.getQueueMetadata()
	case opSetQueueMetadata:
		err = q.setQueueMetadata()
	case opGetQueueACL:
		err = q.getQueueACL()
	case opSetQueueACL:
		err = q.setQueueACL()
	case opPutMessage:
		err = q.putMessage()
	case opGetMessages:
		err = q.getMessages()
	case opPeekMessages:
		err = q.peekMessages()
	case opDeleteMessage:
		err = q.deleteMessage()
	case opClearMessages:
		err = q.clearMessages()
	case opUpdateMessage:
		err = q.updateMessage()
	default:
		err = errInternal()
	}
	if err != nil {
		q.fail(err)
	}
}

// resolveAccount finds the account the request addresses: host-style when
// the first DNS label of a non-IP host names a served account (or its
// "-secondary"), else path-style from the first path segment. It leaves
// the path below the account in q.queue and q.msgID via classify.
func (q *request) resolveAccount() error {
	host := hostWithoutPort(q.r.Host)
	if label, _, _ := strings.Cut(host, "."); label != "" {
		// Only a label that names an account is worth the IP check; an
		// emulator address such as 127.0.0.1 never gets that far.
		if a, sec := q.s.lookupAccount(strings.ToLower(label)); a != nil && net.ParseIP(host) == nil {
			q.acct, q.secondary = a, sec
			return nil
		}
	}
	p := strings.TrimPrefix(q.r.URL.Path, "/")
	seg, _, _ := strings.Cut(p, "/")
	if seg == "" {
		return errInvalidURI()
	}
	a, sec := q.s.lookupAccount(seg)
	if a == nil {
		return authFailed("The storage account " + truncate(seg, 64) + " is not served by this endpoint.")
	}
	q.acct, q.secondary, q.pathStyle = a, sec, true
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

// resourcePath returns the request path below the account.
func (q *request) resourcePath() string {
	p := q.r.URL.Path
	if q.pathStyle {
		p = strings.TrimPrefix(p, "/")
		_, rest, _ := strings.Cut(p, "/")
		return rest
	}
	return strings.TrimPrefix(p, "/")
}

// classify decides the operation from the method, the path below the
// account and the comp/restype parameters.
func (q *request) classify() error {
	p := q.resourcePath()
	p = strings.TrimSuffix(p, "/")
	m := q.r.Method
	if m == http.MethodOptions {
		q.op = opPreflight
		return nil
	}
	var parts [4]string
	n := 0
	for p != "" && n < len(parts) {
		var seg string
		seg, p, _ = strings.Cut(p, "/")
		parts[n] = seg
		n++
	}
	if p != "" {
		return errInvalidURI()
	}
	comp, _ := q.query.get("comp")
	switch n {
	case 0:
		restype, _ := q.query.get("restype")
		switch {
		case comp == "list" && restype == "":
			if m != http.MethodGet {
				return errUnsupportedVerb()
			}
			q.op = opListQueues
		case comp == "properties" && restype == "service":
			switch m {
			case http.MethodGet:
				q.op = opGetServiceProperties
			case http.MethodPut:
				q.op = opSetServiceProperties
			default:
				return errUnsupportedVerb()
			}
		case comp == "stats" && restype == "service":
			if m != http.MethodGet {
				return errUnsupportedVerb()
			}
			q.op = opGetServiceStats
		default:
			if restype != "" && restype != "service" {
				return invalidQueryValue("restype", restype, "")
			}
			return invalidQueryValue("comp", comp, "")
		}
		return nil
	case 1:
		q.queue = parts[0]
		switch comp {
		case "":
			switch m {
			case http.MethodPut:
				q.op = opCreateQueue
			case http.MethodDelete:
				q.op = opDeleteQueue
			case http.MethodGet, http.MethodHead:
				return invalidQueryValue("comp", comp, "")
			default:
				return errUnsupportedVerb()
			}
		case "metadata":
			switch m {
			case http.MethodGet, http.MethodHead:
				q.op = opGetQueueMetadata
			case http.MethodPut:
				q.op = opSetQueueMetadata
			default:
				return errUnsupportedVerb()
			}
		case "acl":
			switch m {
			case http.MethodGet, http.MethodHead:
				q.op = opGetQueueACL
			case http.MethodPut:
				q.op = opSetQueueACL
			default:
				return errUnsupportedVerb()
			}
		default:
			return invalidQueryValue("comp", comp, "")
		}
		return nil
	case 2:
		if parts[1] != "messages" {
			return errInvalidURI()
		}
		q.queue = parts[0]
		switch m {
		case http.MethodPost:
			q.op = opPutMessage
		case http.MethodGet:
			q.op = opGetMessages
			if v, ok := q.query.get("peekonly"); ok {
				switch strings.ToLower(v) {
				case "true":
					q.op = opPeekMessages
				case "false":
				default:
					return invalidQueryValue("peekonly", v, "")
				}
			}
		case http.MethodDelete:
			q.op = opClearMessages
		default:
			return errUnsupportedVerb()
		}
		return nil
	case 3:
		if parts[1] != "messages" {
			return errInvalidURI()
		}
		q.queue, q.msgID = parts[0], parts[2]
		switch m {
		case http.MethodPut:
			if q.verNum < 20110818 {
				// Update Message exists from version 2011-08-18 on.
				return errUnsupportedVerb()
			}
			q.op = opUpdateMessage
		case http.MethodDelete:
			q.op = opDeleteMessage
		default:
			return errUnsupportedVerb()
		}
		return nil
	}
	return errInvalidURI()
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
