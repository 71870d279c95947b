package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	dataDir         string
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
	fs.StringVar(&cfg.logLevel, "log-level", "off", "request log `level`: off, debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `format`: text or json")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
	fs.StringVar(&cfg.dataDir, "data", "", "keep queues and messages in `dir` across restarts (default: in memory only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if cfg.shutdownTimeout <= 0 {
		return nil, errors.New("-shutdown-timeout must be positive")
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
