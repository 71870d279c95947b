package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/azqlib/azq/server"
)

// config is azqd's parsed command line.
type config struct {
	addr            string
	accounts        []server.Account
	tlsCert         string
	tlsKey          string
	allowAnonymous  bool
	strictVersion   bool
	clockControl    bool
	oauth           bool
	ui              bool
	oauthKey        string
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration

	// Operability: what clients may hold and how start-up reports.
	readTimeout      time.Duration // reading a request, headers and body
	keepAliveTimeout time.Duration // an idle keep-alive connection
	maxConnections   int
	printConnString  bool
	version          bool
	dataDir          string

	// refused are Azurite's blob and table services, listened for and
	// refused (--blobHost, --tableHost …; see azurite.go).
	refused []refusedService

	// admin is fault injection, metrics and the admin endpoints' reach
	// (adminflags.go).
	admin adminConfig
}

// accountsFlag collects repeated -account name:key values, merging the
// keys of repeated names in order.
type accountsFlag struct{ accounts []server.Account }

func (f *accountsFlag) String() string {
	if f == nil {
		return ""
	}
	names := make([]string, len(f.accounts))
	for i, a := range f.accounts {
		names[i] = a.Name
	}
	return strings.Join(names, ",")
}

func (f *accountsFlag) Set(v string) error {
	name, key, ok := strings.Cut(v, ":")
	if !ok || key == "" {
		return errors.New("want name:base64key")
	}
	if err := validAccountName(name); err != nil {
		return err
	}
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) == 0 {
		return fmt.Errorf("the key of account %q is not base64", name)
	}
	for i := range f.accounts {
		if f.accounts[i].Name == name {
			f.accounts[i].Keys = append(f.accounts[i].Keys, key)
			return nil
		}
	}
	f.accounts = append(f.accounts, server.Account{Name: name, Keys: []string{key}})
	return nil
}

// validAccountName applies Azure's storage account naming rule: 3 to 24
// lower-case letters and digits.
func validAccountName(name string) error {
	if len(name) < 3 || len(name) > 24 {
		return fmt.Errorf("account name %q: want 3 to 24 characters", name)
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("account name %q: want lower-case letters and digits only", name)
		}
	}
	return nil
}

// parseFlags parses args (without the program name). It reports errors
// on stderr and returns them wrapping errUsage; -h gives flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	cfg, err := parseArgs(args, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return cfg, err
	case errors.Is(err, errUsage):
		// The flag package has reported it, with the usage.
		return nil, err
	}
	fmt.Fprintln(stderr, "azqd:", err)
	return nil, fmt.Errorf("%w: %v", errUsage, err)
}

func parseArgs(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	var accounts accountsFlag
	fs := flag.NewFlagSet("azqd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: azqd [flags]\n\nazqd serves the Azure Queue REST API from memory. Flags:\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:10001", "`host:port` to listen on; port 0 picks a free port")
	fs.Var(&accounts, "account", "account as `name:base64key`; repeat for more accounts or keys (default devstoreaccount1 with its well-known key)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "PEM certificate `file`; serve HTTPS (needs -tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "PEM private key `file` for -tls-cert")
	fs.BoolVar(&cfg.allowAnonymous, "allow-anonymous", false, "accept requests that carry no credentials")
	fs.BoolVar(&cfg.strictVersion, "strict-version", false, "reject unknown x-ms-version values as Azure does")
	fs.BoolVar(&cfg.clockControl, "clock-control", false, "run on a controllable clock served under /_azq/clock")
	fs.BoolVar(&cfg.ui, "ui", false, "serve a web page showing the queues under /_azq/ui")
	fs.BoolVar(&cfg.oauth, "oauth", false, "accept Microsoft Entra ID bearer tokens (needs -tls-cert); signatures are not checked without -oauth-key")
	fs.StringVar(&cfg.oauthKey, "oauth-key", "", "PEM public keys or certificates, or a JSON Web Key Set, `file` that verifies bearer token signatures; implies -oauth")
	fs.StringVar(&cfg.logLevel, "log-level", "off", "request log `level`: off, debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `format`: text or json")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
	az := azuriteFlags(fs)

	fs.DurationVar(&cfg.readTimeout, "read-timeout", 30*time.Second, "how long a client may take to send a request, headers and body")
	fs.DurationVar(&cfg.keepAliveTimeout, "keep-alive-timeout", 5*time.Second, "how long an idle keep-alive connection stays open")
	fs.IntVar(&cfg.maxConnections, "max-connections", 1024, "most connections served at once; more wait to be accepted")
	fs.BoolVar(&cfg.printConnString, "print-connection-string", false, "print only the connection strings on stdout, one per account, and the rest on stderr")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")

	fs.StringVar(&cfg.dataDir, "data", "", "keep queues and messages in `dir` across restarts (default: in memory only)")
	adminFlags(fs, &cfg.admin)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := az.apply(cfg); err != nil {
		return nil, err
	}
	if err := cfg.admin.check(); err != nil {
		return nil, err
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if cfg.oauthKey != "" {
		cfg.oauth = true
	}
	if cfg.oauth && cfg.tlsCert == "" {
		return nil, errors.New("-oauth needs -tls-cert and -tls-key: the Azure SDKs send bearer tokens over HTTPS only")
	}
	if cfg.shutdownTimeout <= 0 {
		return nil, errors.New("-shutdown-timeout must be positive")
	}
	if cfg.readTimeout <= 0 || cfg.keepAliveTimeout <= 0 {
		return nil, errors.New("-read-timeout and -keep-alive-timeout must be positive")
	}
	if cfg.maxConnections < 1 {
		return nil, errors.New("-max-connections must be at least 1")
	}
	if _, err := parseLevel(cfg.logLevel); err != nil {
		return nil, err
	}
	if cfg.logFormat != "text" && cfg.logFormat != "json" {
		return nil, fmt.Errorf("-log-format %q: want text or json", cfg.logFormat)
	}
	cfg.accounts = accounts.accounts
	if len(cfg.accounts) == 0 {
		cfg.accounts = []server.Account{server.DevelopmentAccount()}
	}
	return cfg, nil
}

// parseLevel maps -log-level to a slog level; ok is false for "off".
func parseLevel(s string) (level slog.Level, err error) {
	switch strings.ToLower(s) {
	case "off", "":
		return 0, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("-log-level %q: want off, debug, info, warn or error", s)
}

// newLogger returns the logger -log-level and -log-format ask for, or nil
// when logging is off.
func newLogger(cfg *config, stderr io.Writer) *slog.Logger {
	if s := strings.ToLower(cfg.logLevel); s == "off" || s == "" {
		return nil
	}
	level, _ := parseLevel(cfg.logLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// azurite holds the Azurite queue flags azqd accepts as aliases, so that
// command lines written for Azurite's image ("azurite-queue --queueHost
// 0.0.0.0 --skipApiVersionCheck") start azqd unchanged. Each maps to what
// it means in Azurite; the ones with nothing to change in azqd are
// accepted and have no effect.
type azurite struct {
	// queueHost and queuePort are Azurite's listening address and port for
	// the queue service: they replace the host and the port of -addr.
	queueHost, queuePort string
	// inMemoryPersistence keeps Azurite's data off disk; azqd keeps it in
	// memory unless -data is given, so the two conflict.
	inMemoryPersistence bool
	// loose makes Azurite ignore headers and query parameters it does not
	// support instead of refusing them; azqd always ignores them, so it
	// changes nothing.
	loose bool
	// skipApiVersionCheck makes Azurite accept any x-ms-version; azqd
	// does so unless -strict-version asks otherwise, so the two conflict.
	skipAPIVersionCheck bool
	// blobHost, blobPort, tableHost and tablePort are where Azurite
	// serves blobs and tables. azqd listens there to refuse every request
	// (refusedService), so that tools waiting for all three ports start.
	blobHost, blobPort, tableHost, tablePort string
	// silent turns Azurite's access log off; azqd's is off unless
	// -log-level turns it on, so the two conflict.
	silent bool
}

func azuriteFlags(fs *flag.FlagSet) *azurite {
	az := &azurite{}
	fs.StringVar(&az.queueHost, "queueHost", "", "Azurite alias: listen on this `host` (replaces the host of -addr)")
	fs.StringVar(&az.queuePort, "queuePort", "", "Azurite alias: listen on this `port` (replaces the port of -addr)")
	fs.BoolVar(&az.inMemoryPersistence, "inMemoryPersistence", false, "Azurite alias: keep everything in memory, azqd's default (conflicts with -data)")
	fs.BoolVar(&az.loose, "loose", false, "Azurite alias, no effect: azqd ignores headers and query parameters it does not support anyway")
	fs.BoolVar(&az.skipAPIVersionCheck, "skipApiVersionCheck", false, "Azurite alias: accept every x-ms-version, azqd's default (conflicts with -strict-version)")
	fs.StringVar(&az.blobHost, "blobHost", "", "Azurite alias: listen on this `host` (port 10000 unless --blobPort) and refuse every request: azqd serves queues only")
	fs.StringVar(&az.blobPort, "blobPort", "", "Azurite alias: as --blobHost, on this `port` (host 127.0.0.1 unless --blobHost)")
	fs.StringVar(&az.tableHost, "tableHost", "", "Azurite alias: listen on this `host` (port 10002 unless --tablePort) and refuse every request: azqd serves queues only")
	fs.StringVar(&az.tablePort, "tablePort", "", "Azurite alias: as --tableHost, on this `port` (host 127.0.0.1 unless --tableHost)")
	fs.BoolVar(&az.silent, "silent", false, "Azurite alias, no effect: azqd logs no requests unless -log-level asks (conflicts with it)")
	return az
}

// apply folds the aliases into cfg.
func (az *azurite) apply(cfg *config) error {
	if az.skipAPIVersionCheck && cfg.strictVersion {
		return errors.New("--skipApiVersionCheck and -strict-version contradict each other")
	}
	if az.inMemoryPersistence && cfg.dataDir != "" {
		return errors.New("--inMemoryPersistence and -data contradict each other")
	}
	if az.silent && !strings.EqualFold(cfg.logLevel, "off") {
		return errors.New("--silent and -log-level contradict each other")
	}
	for _, s := range []struct{ name, host, port, defaultPort string }{
		{"Blob", az.blobHost, az.blobPort, "10000"},
		{"Table", az.tableHost, az.tablePort, "10002"},
	} {
		if s.host == "" && s.port == "" {
			continue
		}
		addr, err := azuriteAddr("127.0.0.1", s.defaultPort, s.host, s.port, "--"+strings.ToLower(s.name)+"Port")
		if err != nil {
			return err
		}
		cfg.refused = append(cfg.refused, refusedService{name: s.name, addr: addr})
	}
	if az.queueHost == "" && az.queuePort == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(cfg.addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %v", cfg.addr, err)
	}
	cfg.addr, err = azuriteAddr(host, port, az.queueHost, az.queuePort, "--queuePort")
	return err
}

// azuriteAddr is host:port with Azurite's host and port flags, where
// given, in place of the defaults.
func azuriteAddr(host, port, flagHost, flagPort, portFlag string) (string, error) {
	if flagHost != "" {
		host = strings.TrimSuffix(strings.TrimPrefix(flagHost, "["), "]")
	}
	if flagPort != "" {
		n, err := strconv.ParseUint(flagPort, 10, 16)
		if err != nil {
			return "", fmt.Errorf("%s %q: want a port number from 0 to 65535", portFlag, flagPort)
		}
		port = strconv.FormatUint(n, 10)
	}
	return net.JoinHostPort(host, port), nil
}
