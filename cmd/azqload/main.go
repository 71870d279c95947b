package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/azqlib/azq/internal/buildinfo"
	"github.com/azqlib/azq/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "azqload:", err)
		os.Exit(1)
	}
}

// errUsage marks command-line errors, already reported on stderr.
var errUsage = errors.New("usage")

type config struct {
	endpoint    string
	connString  string
	account     string
	key         string
	queue       string
	clients     int
	duration    time.Duration
	warmup      time.Duration
	cycles      int64
	messageSize int
	timeout     time.Duration
	floor       bool
	raw         bool
	serveFloor  string
	jsonOut     bool
	allowRemote bool
	version     bool
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	dev := server.DevelopmentAccount()
	cfg := &config{}
	fs := flag.NewFlagSet("azqload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: azqload -endpoint URL | -connection-string S | -floor [flags]\n\nazqload runs Put, Get, Delete cycles against a queue endpoint. Flags:\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.endpoint, "endpoint", "", "queue service `URL` of the account, e.g. http://127.0.0.1:10001/devstoreaccount1")
	fs.StringVar(&cfg.connString, "connection-string", "", "Azure Storage connection `string` (instead of -endpoint, -account and -key)")
	fs.StringVar(&cfg.account, "account", dev.Name, "account `name` for -endpoint")
	fs.StringVar(&cfg.key, "key", dev.Keys[0], "base64 account `key` for -endpoint")
	fs.StringVar(&cfg.queue, "queue", "azqload", "queue `name`; created if missing and cleared first")
	fs.IntVar(&cfg.clients, "clients", 1, "concurrent clients, each with its own connection")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to measure (after the warm-up)")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "uncounted warm-up before measuring")
	fs.Int64Var(&cfg.cycles, "cycles", 0, "stop after this many measured cycles (0: run for -duration)")
	fs.IntVar(&cfg.messageSize, "message-size", 64, "message content `bytes`")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "timeout of one request")
	fs.BoolVar(&cfg.floor, "floor", false, "measure plain net/http GETs to a trivial handler instead of queue cycles")
	fs.BoolVar(&cfg.raw, "raw", false, "send the queue cycles as plain unsigned REST requests instead of through the SDK (the server must allow anonymous requests)")
	fs.StringVar(&cfg.serveFloor, "serve-floor", "", "only serve the -floor handler on `host:port` for -duration, for a -floor run from another process")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the result as JSON")
	fs.BoolVar(&cfg.allowRemote, "allow-remote", false, "allow an endpoint that is not on loopback")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	var problem string
	switch {
	case cfg.version && fs.NArg() == 0:
		// Nothing else is needed.
	case fs.NArg() > 0:
		problem = fmt.Sprintf("unexpected arguments %q", fs.Args())
	case cfg.serveFloor != "":
		// Nothing else is needed.
	case !cfg.floor && (cfg.endpoint == "") == (cfg.connString == ""):
		problem = "give one of -endpoint and -connection-string"
	case (cfg.floor || cfg.raw) && cfg.connString != "":
		problem = "-floor and -raw take -endpoint, not -connection-string"
	case cfg.floor && cfg.raw:
		problem = "-floor and -raw exclude each other"
	case cfg.clients < 1 || cfg.clients > 1024:
		problem = "-clients must be 1 to 1024"
	case cfg.duration <= 0:
		problem = "-duration must be positive"
	case cfg.warmup < 0 || cfg.cycles < 0 || cfg.timeout <= 0:
		problem = "-warmup, -cycles and -timeout must not be negative"
	case cfg.messageSize < 1 || cfg.messageSize > 48<<10:
		problem = "-message-size must be 1 to 49152"
	}
	if problem != "" {
		fmt.Fprintln(stderr, "azqload:", problem)
		return nil, fmt.Errorf("%w: %s", errUsage, problem)
	}
	return cfg, nil
}

// run is azqload: it parses args, runs the load and prints the result.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, "azqload", buildinfo.Describe())
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 2*cfg.clients + 8
	tr.MaxIdleConnsPerHost = 2*cfg.clients + 8
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	if cfg.serveFloor != "" {
		return serveFloorFor(ctx, cfg.serveFloor, cfg.duration, stdout)
	}
	var w workload
	switch {
	case cfg.raw:
		if err := checkLoopback(cfg.endpoint, cfg.allowRemote); err != nil {
			return err
		}
		rw, err := newRawWorkload(ctx, cfg, hc)
		if err != nil {
			return err
		}
		w = rw
	case cfg.floor:
		target := cfg.endpoint
		if target == "" {
			stopFloor, url, err := serveFloor()
			if err != nil {
				return err
			}
			defer stopFloor()
			target = url
		}
		if err := checkLoopback(target, cfg.allowRemote); err != nil {
			return err
		}
		w = &floorWorkload{client: hc, url: target, timeout: cfg.timeout}
	default:
		qw, err := newQueueWorkload(ctx, cfg, hc)
		if err != nil {
			return err
		}
		w = qw
	}

	res, err := measure(ctx, w, cfg.clients, cfg.warmup, cfg.duration, cfg.cycles)
	if err != nil {
		return err
	}
	res.Target = w.target()
	if cfg.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.print(stdout)
	return nil
}

// newQueueWorkload builds the SDK client, checks the target, and creates
// and clears the queue.
func newQueueWorkload(ctx context.Context, cfg *config, hc *http.Client) (*queueWorkload, error) {
	opts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: hc,
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}}
	var qc *azqueue.QueueClient
	var err error
	if cfg.connString != "" {
		qc, err = azqueue.NewQueueClientFromConnectionString(cfg.connString, cfg.queue, opts)
	} else {
		var cred *azqueue.SharedKeyCredential
		cred, err = azqueue.NewSharedKeyCredential(cfg.account, cfg.key)
		if err == nil {
			qc, err = azqueue.NewQueueClientWithSharedKeyCredential(
				strings.TrimSuffix(cfg.endpoint, "/")+"/"+cfg.queue, cred, opts)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := checkLoopback(qc.URL(), cfg.allowRemote); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if _, err := qc.Create(sctx, nil); err != nil {
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.ErrorCode != "QueueAlreadyExists" {
			return nil, fmt.Errorf("creating queue %s: %w", cfg.queue, err)
		}
	}
	if _, err := qc.ClearMessages(sctx, nil); err != nil {
		return nil, fmt.Errorf("clearing queue %s: %w", cfg.queue, err)
	}
	return &queueWorkload{qc: qc, content: strings.Repeat("m", cfg.messageSize), timeout: cfg.timeout}, nil
}

// checkLoopback refuses targets off this machine unless allowed.
func checkLoopback(rawURL string, allowRemote bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("endpoint %q: want an http or https URL", rawURL)
	}
	if allowRemote {
		return nil
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("endpoint host %q is not a loopback address; pass -allow-remote to load it anyway", host)
}
