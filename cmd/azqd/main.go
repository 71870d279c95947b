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
	"syscall"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/azqlib/azq/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a
		// second one ends a shutdown that takes too long.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "azqd:", err)
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
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)

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

	var clk clock.Clock
	var ctl *clockControl
	if cfg.clockControl {
		mock := clock.NewMock()
		// Round(0) drops the monotonic reading: the mock clock is wall time only.
		mock.Set(time.Now().Round(0))
		clk = mock
		ctl = &clockControl{clk: mock}
	}

	services, err := openData(cfg, ctl, stdout)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		closeAll(services)
		return err
	}
	api := server.New(server.Options{
		Accounts:       cfg.accounts,
		Services:       services,
		Clock:          clk,
		AllowAnonymous: cfg.allowAnonymous,
		StrictVersion:  cfg.strictVersion,
		Logger:         logger,
	})
	hs := &http.Server{
		Handler:           newHandler(api, ctl),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          errorLog(logger),
	}
	serveErr := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			serveErr <- hs.ServeTLS(ln, "", "")
		} else {
			serveErr <- hs.Serve(ln)
		}
	}()

	base := scheme + "://" + endpointHost(ln.Addr())
	fmt.Fprintf(stdout, "azqd: serving the Azure Queue REST API on %s\n", base)
	if ctl != nil {
		fmt.Fprintf(stdout, "azqd: clock control on %s/_azq/clock; the clock stands still at %s until advanced\n",
			base, clk.Now().UTC().Format(time.RFC3339))
	}
	if cfg.allowAnonymous {
		fmt.Fprintln(stdout, "azqd: requests without credentials are allowed")
	}
	for _, a := range cfg.accounts {
		fmt.Fprintf(stdout, "%s: %s\n", a.Name, a.ConnectionString(base+"/"+a.Name))
	}
	if logger != nil {
		logger.Info("azqd started", "endpoint", base, "accounts", len(cfg.accounts), "clock_control", ctl != nil)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		api.Close()
		return fmt.Errorf("serving: %w", err)
	}

	fmt.Fprintln(stdout, "azqd: shutting down")
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
	if err := api.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the service: %w", err))
	}
	fmt.Fprintln(stdout, "azqd: stopped")
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

// newHandler routes /_azq/ to clock control (nil: off, every such path
// answers 404) and everything else to the Azure Queue REST API.
func newHandler(api http.Handler, ctl *clockControl) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, clockPrefix) || r.URL.Path == strings.TrimSuffix(clockPrefix, "/") {
			ctl.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
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
