package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/internal/buildinfo"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/observe"
	"github.com/azqlib/azq/server"
	"github.com/azqlib/azq/server/admin"
	"github.com/azqlib/azq/ui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a
		// second one ends a shutdown that takes too long.
		<-ctx.Done()
		stop()
	}()
	err := becomeImageUser(os.Args[1:], os.Getenv(imageUserEnv), os.Stderr)
	if err == nil {
		err = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "azqd:", err)
		var h *hintError
		if errors.As(err, &h) {
			fmt.Fprintln(os.Stderr, "azqd: hint:", h.hint)
		}
		os.Exit(1)
	}
}

// errUsage marks command-line errors, which parseFlags has already
// reported on stderr.
var errUsage = errors.New("usage")

// run is azqd: it serves until ctx is done, then shuts down gracefully.
// It prints the listening address and the connection strings on stdout;
// logs and usage go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, "azqd", buildinfo.Describe())
		return nil
	}
	if cfg.healthcheck != "" {
		return healthcheck(ctx, cfg.healthcheck, stdout)
	}
	out := outputs{stdout: stdout, stderr: stderr, notes: stdout}
	if cfg.printConnString {
		// With -print-connection-string, stdout carries the connection
		// strings alone, for scripts; everything else goes to stderr.
		out.notes = stderr
	}
	logger, closeLog, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return err
	}
	oauth, err := oauthOptions(cfg)
	if err != nil {
		return err
	}

	back, err := openBackend(ctx, cfg, out, logger)
	if err != nil {
		return err
	}
	ln, refused, err := listen(cfg)
	if err != nil {
		closeAll(back.services)
		return err
	}
	// On loopback only, every request must name this machine as its
	// Host (see server.Options.CheckHost); beyond, clients reach azqd by
	// names it cannot know, a container's service name, as with Azurite.
	onLoopback := isLoopback(ln.Addr())
	api, rec, err := buildServer(cfg, back, logger, oauth, onLoopback)
	if err != nil {
		ln.Close()
		refused.close()
		return err
	}
	handler := mountAdmin(cfg, api, back, rec, onLoopback, stderr, logger)

	r := serve(newHTTPServer(cfg, handler, tlsConfig, logger), ln, refused, api, tlsConfig != nil)
	announce(out, startup{cfg: cfg, addr: ln.Addr(), tls: tlsConfig != nil, refused: refused, back: back, rec: rec, oauth: oauth, logger: logger})
	if err := r.untilDone(ctx); err != nil {
		return err
	}
	return r.shutdown(cfg.shutdownTimeout, out.notes, logger)
}

// outputs are where azqd prints: notes are the start-up and shutdown
// lines, on stdout unless -print-connection-string keeps stdout for the
// connection strings alone.
type outputs struct {
	stdout, stderr, notes io.Writer
}

// loadTLS returns the TLS configuration of -tls-cert and -tls-key, or nil
// for plain HTTP.
func loadTLS(cfg *config) (*tls.Config, error) {
	if cfg.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// oauthOptions returns the bearer-token options of -oauth, with the keys
// of -oauth-key, or nil without -oauth.
func oauthOptions(cfg *config) (*server.OAuthOptions, error) {
	if !cfg.oauth {
		return nil, nil
	}
	// Azurite's --oauth basic takes Azurite's issuers, pre-production
	// ones among them; azqd's own -oauth production Entra ID's only.
	oauth := &server.OAuthOptions{AzuriteIssuers: cfg.oauthBasic}
	if cfg.oauthKey != "" {
		data, err := os.ReadFile(cfg.oauthKey)
		if err != nil {
			return nil, fmt.Errorf("reading the OAuth keys: %w", err)
		}
		if oauth.Keys, err = server.ParseOAuthKeys(data); err != nil {
			return nil, fmt.Errorf("reading the OAuth keys from %s: %w", cfg.oauthKey, err)
		}
	}
	return oauth, nil
}

// backend is what the accounts' queues live in, and the time and the
// faults their requests meet.
type backend struct {
	// services are the accounts' queues by account name: with -data
	// durable, with -postgres in the database; nil keeps every account
	// in memory, in the server.
	services map[string]azq.QueueService
	clk      clock.Clock      // -clock-control's mock; nil: real time
	ctl      *admin.Clock     // moves clk (-clock-control), saving it with -data
	inj      *faults.Injector // -faults or -fault-control's
}

// openBackend makes the clock and the fault injector and opens the
// accounts' queues: on PostgreSQL with -postgres, else durable with
// -data, else (services nil) in memory.
func openBackend(ctx context.Context, cfg *config, out outputs, logger *slog.Logger) (*backend, error) {
	b := &backend{}
	var mock *clock.Mock
	if cfg.clockControl {
		mock = clock.NewMock()
		// Round(0) drops the monotonic reading: the mock clock is wall time only.
		mock.Set(time.Now().Round(0))
		b.clk = mock
	}
	var err error
	if b.inj, err = newInjector(cfg, b.clk); err != nil {
		return nil, err
	}
	var saveClock func(time.Time) error
	if cfg.postgresURL != "" {
		if b.services, err = openPostgres(ctx, cfg); err != nil {
			return nil, err
		}
	} else {
		warnAzuriteWorkspace(cfg.dataDir, cfg.accounts, out.stderr)
		if b.services, saveClock, err = openData(cfg, mock, out.stdout, storageLogger(logger, out.stderr)); err != nil {
			return nil, dataDirError(cfg.dataDir, err)
		}
	}
	if mock != nil {
		b.ctl = admin.NewClock(mock, saveClock)
	}
	return b, nil
}

// newInjector returns the fault injector of -faults or -fault-control on
// clk (nil: real time), with the rules of the -faults file, or nil.
func newInjector(cfg *config, clk clock.Clock) (*faults.Injector, error) {
	if !cfg.admin.faultControl {
		return nil, nil
	}
	var fc faults.Config
	if cfg.admin.faultsFile != "" {
		var err error
		if fc, err = faults.Load(cfg.admin.faultsFile); err != nil {
			return nil, fmt.Errorf("reading the fault rules: %w", err)
		}
	}
	if clk == nil {
		clk = clock.New()
	}
	inj, err := faults.New(faults.Options{Config: fc, Clock: clk})
	if err != nil {
		return nil, fmt.Errorf("the fault rules of %s: %w", cfg.admin.faultsFile, err)
	}
	return inj, nil
}

// listen listens on -addr, with at most -max-connections connections at
// a time, and on the Azurite ports azqd refuses (its blob and table
// services').
func listen(cfg *config) (*limitListener, refusers, error) {
	tcp, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, nil, listenError("the queue service's address", cfg.addr, err)
	}
	ln := newLimitListener(tcp, cfg.maxConnections)
	refused, err := listenRefused(cfg.refused, cfg.maxConnections)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, refused, nil
}

// buildServer returns the Azure Queue REST API of the accounts on b, with
// the service properties -data saved, and the metrics recorder it reports
// to (nil with -metrics=false).
func buildServer(cfg *config, b *backend, logger *slog.Logger, oauth *server.OAuthOptions, onLoopback bool) (*server.Server, *metrics.Recorder, error) {
	var rec *metrics.Recorder
	var observer func(observe.Observation)
	if cfg.admin.metrics {
		rec = metrics.NewRecorder()
		observer = rec.Observe
	}
	api := server.New(server.Options{
		Accounts:       cfg.accounts,
		Services:       b.services,
		Clock:          b.clk,
		AllowAnonymous: cfg.allowAnonymous,
		StrictVersion:  cfg.strictVersion,
		Logger:         logger,
		OAuth:          oauth,
		Faults:         b.inj,
		Observe:        observer,
		PathStyleOnly:  cfg.pathStyleOnly,
		SaveProperties: saveProperties(cfg),
		CheckHost:      onLoopback,
		AllowedHosts:   adminHosts(cfg),
	})
	if err := loadProperties(cfg, api, cfg.accounts); err != nil {
		api.Close()
		return nil, nil, err
	}
	return api, rec, nil
}

// mountAdmin returns azqd's handler: the admin endpoints under /_azq/
// (package server/admin) with the metrics of rec and the web view of
// -ui, the metrics at /metrics, and api.
func mountAdmin(cfg *config, api *server.Server, b *backend, rec *metrics.Recorder, onLoopback bool, stderr io.Writer, logger *slog.Logger) http.Handler {
	opts := admin.Options{Clock: b.ctl, Faults: b.inj, Version: buildinfo.Describe()}
	if b.ctl != nil {
		// Reset comes with -clock-control, which is what makes a test
		// run reproducible.
		opts.Reset = api.Reset
	}
	var rootMetrics http.Handler
	if rec != nil {
		for _, a := range cfg.accounts {
			// Any back end's queues are watched: the in-memory and
			// durable Services give each queue's figures at the cost of
			// a few field reads (azq.QueueStatsReader); another back end
			// gives its counts through each queue's properties.
			if svc := api.QueueService(a.Name); svc != nil {
				rec.WatchService(a.Name, svc)
			}
		}
		if b.inj != nil {
			rec.WatchFaults(b.inj)
		}
		opts.Metrics = rec.Handler()
		rootMetrics = servesMetricsAtRoot(cfg, rec)
	}
	if onLoopback {
		// The metrics name the queues and their depths: on loopback they
		// take the admin endpoints' guard, Host check included.
		guard := newAdminGuard(cfg)
		opts.Metrics, rootMetrics = guard.Wrap(opts.Metrics), guard.Wrap(rootMetrics)
	}
	if cfg.ui {
		opts.UI = newUI(cfg, api, b.clk, b.ctl, b.inj)
	}
	return newHandler(unsignedHint(api, cfg.allowAnonymous, stderr), newAdminHandler(cfg, opts, b.services, logger), rootMetrics)
}

// newHTTPServer returns the HTTP server of handler, with azqd's timeouts
// and protocols.
func newHTTPServer(cfg *config, handler http.Handler, tlsConfig *tls.Config, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:   handler,
		TLSConfig: tlsConfig,
		// A TLSNextProto that is not nil keeps net/http from offering
		// HTTP/2: Azure Storage speaks HTTP/1.1 only, so a client meets
		// here the protocol it meets in production.
		TLSNextProto: noHTTP2,
		// Slow and idle clients must not hold connections: a request
		// (headers and body) has -read-timeout to arrive, its headers at
		// most 10 s of it, and an idle keep-alive connection is closed
		// after -keep-alive-timeout (Azurite's default is 5 s).
		ReadHeaderTimeout: min(cfg.readTimeout, maxHeaderTimeout),
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.readTimeout + writeAllowance,
		IdleTimeout:       cfg.keepAliveTimeout,
		ErrorLog:          errorLog(logger),
	}
}

// running is azqd while it serves: its HTTP servers and the API behind
// them.
type running struct {
	hs       *http.Server
	serveErr chan error // hs's Serve's result
	refused  refusers
	api      *server.Server
}

// serve starts serving hs on ln (TLS with useTLS) and the refusals on
// the refused Azurite ports.
func serve(hs *http.Server, ln net.Listener, refused refusers, api *server.Server, useTLS bool) *running {
	refused.start(hs, ln.Addr())
	r := &running{hs: hs, serveErr: make(chan error, 1), refused: refused, api: api}
	go func() {
		if useTLS {
			r.serveErr <- hs.ServeTLS(ln, "", "")
		} else {
			r.serveErr <- hs.Serve(ln)
		}
	}()
	return r
}

// untilDone waits until ctx is done (a signal) and returns nil, or
// until serving fails, and then closes everything and returns why.
func (r *running) untilDone(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-r.serveErr:
		r.refused.close()
		r.api.Close()
		return fmt.Errorf("serving: %w", err)
	}
}

// shutdown stops serving, letting requests in flight finish within
// timeout, and closes the API and its Services.
func (r *running) shutdown(timeout time.Duration, notes io.Writer, logger *slog.Logger) error {
	fmt.Fprintln(notes, "azqd: shutting down")
	if logger != nil {
		logger.Info("azqd shutting down", "timeout", timeout)
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	if err := r.hs.Shutdown(sctx); err != nil {
		r.hs.Close()
		errs = append(errs, fmt.Errorf("in-flight requests did not finish within %v; closed them", timeout))
	}
	if err := <-r.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serving: %w", err))
	}
	if err := r.refused.shutdown(sctx); err != nil {
		errs = append(errs, err)
	}
	if err := r.api.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the service: %w", err))
	}
	fmt.Fprintln(notes, "azqd: stopped")
	err := errors.Join(errs...)
	if logger != nil {
		if err != nil {
			logger.Error("azqd stopped", "err", err)
		} else {
			logger.Info("azqd stopped")
		}
	}
	return err
}

// startup is what the start-up lines describe.
type startup struct {
	cfg     *config
	addr    net.Addr // the queue service's
	tls     bool
	refused refusers
	back    *backend
	rec     *metrics.Recorder // nil: -metrics=false
	oauth   *server.OAuthOptions
	logger  *slog.Logger
}

// announce prints the start-up lines: the mode and the endpoint first,
// then what else azqd serves and how it takes requests, and the
// connection strings last, where scripts find them.
func announce(out outputs, s startup) {
	cfg, notes, stdout, stderr := s.cfg, out.notes, out.stdout, out.stderr
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	base := scheme + "://" + endpointHost(s.addr)
	if !isLoopback(s.addr) {
		fmt.Fprintf(stderr, "azqd: warning: listening on %s, beyond loopback: anyone who can reach it can use the accounts, and devstoreaccount1's key is public; use -addr 127.0.0.1:PORT unless that is what you want\n", listenAddr(cfg.addr, s.addr))
	}
	mode := "in memory (queues are lost on exit; -data DIR keeps them)"
	if cfg.dataDir != "" {
		mode = "durable in " + cfg.dataDir
	}
	if cfg.postgresURL != "" {
		mode = postgresMode(cfg)
	}
	fmt.Fprintf(notes, "azqd: %s, serving the Azure Queue REST API on %s\n", mode, base)
	s.refused.announce(notes, scheme, cfg.addr, s.addr) // Azurite's start-up lines
	for _, n := range cfg.notes {
		fmt.Fprintln(stderr, "azqd: note:", n)
	}
	if s.back.ctl != nil {
		fmt.Fprintf(notes, "azqd: clock control on %s/_azq/clock; the clock stands still at %s until advanced\n",
			base, s.back.clk.Now().UTC().Format(time.RFC3339))
	}
	if cfg.ui {
		fmt.Fprintf(stdout, "azqd: the queues are on view at %s%s/\n", base, admin.UIPrefix)
	}
	announceAdmin(notes, stderr, cfg, base, s.addr, s.back.inj, s.rec)
	if cfg.allowAnonymous {
		fmt.Fprintln(notes, "azqd: requests without credentials are allowed")
	} else {
		fmt.Fprintln(notes, "azqd: requests must be signed, as the SDKs do with the connection string below; -allow-anonymous accepts unsigned ones (curl)")
	}
	if s.oauth != nil && !s.tls {
		fmt.Fprintln(stderr, "azqd: note: --oauth basic over HTTP: bearer tokens are refused, as Azurite refuses them, until --cert and --key (or -tls-cert and -tls-key) serve HTTPS")
	}
	switch {
	case s.oauth != nil && len(s.oauth.Keys) > 0:
		fmt.Fprintf(stdout, "azqd: Microsoft Entra ID bearer tokens are accepted; signatures are checked against %d key(s) from %s\n", len(s.oauth.Keys), cfg.oauthKey)
	case s.oauth != nil:
		fmt.Fprintln(stdout, "azqd: Microsoft Entra ID bearer tokens are accepted; signatures are not checked (give -oauth-key to check them)")
	}
	if n := developmentStorageNote(cfg.accounts, base); n != "" {
		fmt.Fprintln(notes, n)
	}
	for _, a := range cfg.accounts {
		if cfg.printConnString {
			fmt.Fprintln(stdout, a.ConnectionString(base+"/"+a.Name))
		} else {
			fmt.Fprintf(stdout, "%s: %s\n", a.Name, a.ConnectionString(base+"/"+a.Name))
		}
	}
	if s.logger != nil {
		s.logger.Info("azqd started", "endpoint", base, "accounts", len(cfg.accounts), "clock_control", s.back.ctl != nil)
	}
}

// newUI returns the web view of -ui: the accounts of api on clk, with the
// clock buttons of ctl and the rules of inj when they are not nil. It
// answers the Host names the admin guard lets through (adminHosts).
func newUI(cfg *config, api *server.Server, clk clock.Clock, ctl *admin.Clock, inj *faults.Injector) http.Handler {
	opts := ui.Options{Clock: clk, Prefix: admin.UIPrefix, Hosts: adminHosts(cfg), Faults: inj}
	for _, a := range cfg.accounts {
		opts.Accounts = append(opts.Accounts, ui.Account{Name: a.Name, Service: api.QueueService(a.Name)})
	}
	if ctl != nil {
		opts.Advance = ctl.Advance
	}
	return ui.New(opts)
}

// noHTTP2 is the TLSNextProto of azqd's servers: no protocol besides
// HTTP/1.1 (net/http's own HTTP/2 among them) may be negotiated.
var noHTTP2 = map[string]func(*http.Server, *tls.Conn, http.Handler){}

// maxHeaderTimeout bounds the time a client has to send its request
// headers; writeAllowance is the time to answer beyond -read-timeout.
const (
	maxHeaderTimeout = 10 * time.Second
	writeAllowance   = 30 * time.Second
)

// newHandler routes /_azq/ to azqd's own endpoints, /metrics (when
// metrics is not nil) to the metrics, and everything else to the Azure
// Queue REST API.
func newHandler(api, adm, metrics http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if admin.Owns(r.URL.Path) {
			adm.ServeHTTP(w, r)
			return
		}
		if metrics != nil && r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// unsignedHint passes requests to api and, the first time one that carries
// no credentials at all (no Authorization header, no SAS) is refused with
// 401, tells stderr that -allow-anonymous exists: the person trying azqd
// with curl sees why, in the terminal where azqd runs. With
// allowAnonymous it is api itself.
func unsignedHint(api http.Handler, allowAnonymous bool, stderr io.Writer) http.Handler {
	if allowAnonymous {
		return api
	}
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.URL.Query().Has("sig") {
			api.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		api.ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized {
			once.Do(func() {
				fmt.Fprintf(stderr, "azqd: refused %s %s with 401: it carries no credentials; sign requests with the connection string's key, or start azqd with -allow-anonymous to accept unsigned ones\n",
					r.Method, r.URL.Path)
			})
		}
	})
}

// statusWriter notes the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// isLoopback reports whether a listener's address is reachable from this
// machine only.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// listenAddr is the address a listener is on as the command line named
// it, with the port it bound: "0.0.0.0:10001" rather than the "[::]:10001"
// a dual-stack listener reports. An address without a host is the
// listener's.
func listenAddr(asked string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(asked)
	if err != nil || host == "" {
		return bound.String()
	}
	return net.JoinHostPort(host, fmt.Sprint(portOf(bound)))
}

// listenError explains a failure to listen on addr for what; a port in use
// gets a hint, since Azurite or another azqd holding 10001 is common.
func listenError(what, addr string, err error) error {
	err = fmt.Errorf("listening on %s, %s: %w", addr, what, err)
	if errors.Is(err, syscall.EADDRINUSE) {
		return &hintError{err, fmt.Sprintf("another program listens on %s, perhaps Azurite or another azqd; stop it, or give another address (-addr 127.0.0.1:0 picks a free port)", addr)}
	}
	return err
}

// endpointHost is the host:port clients should use for a listener: an
// unspecified address (0.0.0.0, ::) becomes the loopback address.
func endpointHost(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port))
}

// errorLog routes net/http's own errors (TLS handshakes, malformed
// requests) to the logger at warn level, or discards them when logging is
// off.
func errorLog(logger *slog.Logger) *log.Logger {
	if logger == nil {
		return log.New(io.Discard, "", 0)
	}
	return slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
}
