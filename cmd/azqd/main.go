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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/internal/buildinfo"
	"github.com/azqlib/azq/metrics"
	"github.com/azqlib/azq/server"
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
	// With -print-connection-string, stdout carries the connection
	// strings alone, for scripts; everything else goes to stderr.
	notes := stdout
	if cfg.printConnString {
		notes = stderr
	}
	logger, closeLog, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	defer closeLog()

	var tlsConfig *tls.Config
	scheme := "http"
	if cfg.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return fmt.Errorf("loading the TLS certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}

	var oauth *server.OAuthOptions
	if cfg.oauth {
		// Azurite's --oauth basic takes Azurite's issuers, pre-production
		// ones among them; azqd's own -oauth production Entra ID's only.
		oauth = &server.OAuthOptions{AzuriteIssuers: cfg.oauthBasic}
		if cfg.oauthKey != "" {
			data, err := os.ReadFile(cfg.oauthKey)
			if err != nil {
				return fmt.Errorf("reading the OAuth keys: %w", err)
			}
			if oauth.Keys, err = server.ParseOAuthKeys(data); err != nil {
				return fmt.Errorf("reading the OAuth keys from %s: %w", cfg.oauthKey, err)
			}
		}
	}

	var clk clock.Clock
	var ctl *clockControl
	if cfg.clockControl {
		mock := clock.NewMock()
		// Round(0) drops the monotonic reading: the mock clock is wall time only.
		mock.Set(time.Now().Round(0))
		clk = mock
		ctl = &clockControl{clk: mock}
	}

	var inj *faults.Injector
	if cfg.admin.faultControl {
		var fc faults.Config
		if cfg.admin.faultsFile != "" {
			if fc, err = faults.Load(cfg.admin.faultsFile); err != nil {
				return fmt.Errorf("reading the fault rules: %w", err)
			}
		}
		var fclk clock.Clock = clk
		if fclk == nil {
			fclk = clock.New()
		}
		if inj, err = faults.New(faults.Options{Config: fc, Clock: fclk}); err != nil {
			return fmt.Errorf("the fault rules of %s: %w", cfg.admin.faultsFile, err)
		}
	}

	var services map[string]azq.QueueService
	if cfg.postgresURL != "" {
		if services, err = openPostgres(ctx, cfg); err != nil {
			return err
		}
	} else {
		warnAzuriteWorkspace(cfg.dataDir, cfg.accounts, stderr)
		if services, err = openData(cfg, ctl, stdout, storageLogger(logger, stderr)); err != nil {
			return dataDirError(cfg.dataDir, err)
		}
	}
	tcp, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		closeAll(services)
		return listenError("the queue service's address", cfg.addr, err)
	}
	ln := newLimitListener(tcp, cfg.maxConnections)
	refused, err := listenRefused(cfg.refused, cfg.maxConnections)
	if err != nil {
		ln.Close()
		return err
	}
	// On loopback only, every request must name this machine as its
	// Host (see server.Options.CheckHost); beyond, clients reach azqd by
	// names it cannot know, a container's service name, as with Azurite.
	onLoopback := isLoopback(ln.Addr())
	var rec *metrics.Recorder
	var observe func(metrics.Observation)
	if cfg.admin.metrics {
		rec = metrics.NewRecorder()
		observe = rec.Observe
	}
	api := server.New(server.Options{
		Accounts:       cfg.accounts,
		Services:       services,
		Clock:          clk,
		AllowAnonymous: cfg.allowAnonymous,
		StrictVersion:  cfg.strictVersion,
		Logger:         logger,
		OAuth:          oauth,
		Faults:         inj,
		Observe:        observe,
		PathStyleOnly:  cfg.pathStyleOnly,
		SaveProperties: saveProperties(cfg),
		CheckHost:      onLoopback,
		AllowedHosts:   adminHosts(cfg),
	})
	if err := loadProperties(cfg, api, cfg.accounts); err != nil {
		ln.Close()
		refused.close()
		api.Close()
		return err
	}
	admin := &adminHandler{api: api, ctl: ctl, version: buildinfo.Describe(), guard: newAdminGuard(cfg),
		storage: storageStates(services), databases: pingers(services, logger)}
	if inj != nil {
		admin.faults = &faultControl{inj: inj}
	}
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
		if inj != nil {
			rec.WatchFaults(inj)
		}
		admin.metrics = rec.Handler()
	}
	rootMetrics := servesMetricsAtRoot(cfg, rec)
	if onLoopback {
		// The metrics name the queues and their depths: on loopback they
		// take the admin endpoints' guard, Host check included.
		admin.metrics, rootMetrics = admin.guard.guarded(admin.metrics), admin.guard.guarded(rootMetrics)
	}
	if cfg.ui {
		admin.web = newUI(cfg, api, clk, ctl, inj)
	}
	hs := &http.Server{
		Handler:   newHandler(unsignedHint(api, cfg.allowAnonymous, stderr), admin, rootMetrics),
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
	refused.start(hs, ln.Addr())
	serveErr := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			serveErr <- hs.ServeTLS(ln, "", "")
		} else {
			serveErr <- hs.Serve(ln)
		}
	}()

	base := scheme + "://" + endpointHost(ln.Addr())
	if !isLoopback(ln.Addr()) {
		fmt.Fprintf(stderr, "azqd: warning: listening on %s, beyond loopback: anyone who can reach it can use the accounts, and devstoreaccount1's key is public; use -addr 127.0.0.1:PORT unless that is what you want\n", listenAddr(cfg.addr, ln.Addr()))
	}
	// The mode comes first and the endpoint last, where scripts find it.
	mode := "in memory (queues are lost on exit; -data DIR keeps them)"
	if cfg.dataDir != "" {
		mode = "durable in " + cfg.dataDir
	}
	if cfg.postgresURL != "" {
		mode = postgresMode(cfg)
	}
	fmt.Fprintf(notes, "azqd: %s, serving the Azure Queue REST API on %s\n", mode, base)
	refused.announce(notes, scheme, cfg.addr, ln.Addr()) // Azurite's start-up lines
	for _, n := range cfg.notes {
		fmt.Fprintln(stderr, "azqd: note:", n)
	}
	if ctl != nil {
		fmt.Fprintf(notes, "azqd: clock control on %s/_azq/clock; the clock stands still at %s until advanced\n",
			base, clk.Now().UTC().Format(time.RFC3339))
	}
	if admin.web != nil {
		fmt.Fprintf(stdout, "azqd: the queues are on view at %s%s/\n", base, uiPrefix)
	}
	announceAdmin(notes, stderr, cfg, base, ln.Addr(), inj, rec)
	if cfg.allowAnonymous {
		fmt.Fprintln(notes, "azqd: requests without credentials are allowed")
	} else {
		fmt.Fprintln(notes, "azqd: requests must be signed, as the SDKs do with the connection string below; -allow-anonymous accepts unsigned ones (curl)")
	}
	if oauth != nil && tlsConfig == nil {
		fmt.Fprintln(stderr, "azqd: note: --oauth basic over HTTP: bearer tokens are refused, as Azurite refuses them, until --cert and --key (or -tls-cert and -tls-key) serve HTTPS")
	}
	switch {
	case oauth != nil && len(oauth.Keys) > 0:
		fmt.Fprintf(stdout, "azqd: Microsoft Entra ID bearer tokens are accepted; signatures are checked against %d key(s) from %s\n", len(oauth.Keys), cfg.oauthKey)
	case oauth != nil:
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
	if logger != nil {
		logger.Info("azqd started", "endpoint", base, "accounts", len(cfg.accounts), "clock_control", ctl != nil)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		refused.close()
		api.Close()
		return fmt.Errorf("serving: %w", err)
	}

	fmt.Fprintln(notes, "azqd: shutting down")
	if logger != nil {
		logger.Info("azqd shutting down", "timeout", cfg.shutdownTimeout)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	var errs []error
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		errs = append(errs, fmt.Errorf("in-flight requests did not finish within %v; closed them", cfg.shutdownTimeout))
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serving: %w", err))
	}
	if err := refused.shutdown(sctx); err != nil {
		errs = append(errs, err)
	}
	if err := api.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the service: %w", err))
	}
	fmt.Fprintln(notes, "azqd: stopped")
	err = errors.Join(errs...)
	if logger != nil {
		if err != nil {
			logger.Error("azqd stopped", "err", err)
		} else {
			logger.Info("azqd stopped")
		}
	}
	return err
}

// newUI returns the web view of -ui: the accounts of api on clk, with the
// clock buttons of ctl and the rules of inj when they are not nil. It
// answers the Host names the admin guard lets through (adminHosts).
func newUI(cfg *config, api *server.Server, clk clock.Clock, ctl *clockControl, inj *faults.Injector) http.Handler {
	opts := ui.Options{Clock: clk, Prefix: uiPrefix, Hosts: adminHosts(cfg), Faults: inj}
	for _, a := range cfg.accounts {
		opts.Accounts = append(opts.Accounts, ui.Account{Name: a.Name, Service: api.QueueService(a.Name)})
	}
	if ctl != nil {
		opts.Advance = ctl.advanceUI
	}
	return ui.New(opts)
}

// uiPrefix is where -ui serves the web page, beside azqd's other
// endpoints.
const uiPrefix = "/_azq/ui"

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
func newHandler(api, admin, metrics http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, adminPrefix) || r.URL.Path == strings.TrimSuffix(adminPrefix, "/") {
			admin.ServeHTTP(w, r)
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
