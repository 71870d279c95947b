package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/azqlib/azq/internal/editdist"
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
	oauthBasic      bool // given as Azurite's --oauth basic
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

	// postgresURL is -postgres: every account's queues in a PostgreSQL
	// database (postgres.go), each in the schema postgresSchema names.
	postgresURL    string
	postgresSchema string

	// healthcheck is -healthcheck URL: ask a running azqd's health
	// endpoint and exit (healthcheck.go), the image's HEALTHCHECK.
	healthcheck string

	// debugLog is Azurite's --debug FILE: the request log at debug
	// level, written to FILE.
	debugLog string
	// pathStyleOnly is Azurite's --disableProductStyleUrl: the account
	// is always the first path segment, never the host's first label.
	pathStyleOnly bool
	// notes are said at start-up: Azurite flags accepted with a caveat.
	notes []string

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

// flagGroups are the headings of azqd -h and the flags under each, in
// order. Every flag belongs to exactly one group (TestEveryFlagIsInAGroup):
// a new flag is defined in parseArgs and named here. An entry may list
// aliases of one flag separated by commas ("location,l"); the first is the
// name shown first.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Queue service", []string{"addr", "account", "strict-version", "clock-control", "ui"}},
	{"Authentication and TLS", []string{"allow-anonymous", "tls-cert", "tls-key", "oauth", "oauth-key"}},
	{"Durability", []string{"data", "postgres", "postgres-schema"}},
	{"Faults, metrics and the admin endpoints", []string{"faults", "fault-control", "metrics", "allow-host", "admin-remote"}},
	{"Operability", []string{"log-level", "log-format", "shutdown-timeout", "read-timeout", "keep-alive-timeout",
		"max-connections", "print-connection-string", "version,v", "healthcheck"}},
	{"Azurite compatibility (azurite-queue 3.37's flags, so that its command lines start azqd;\n" +
		"also --oauth basic, which is -oauth, and -v, -h)", azuriteFlagNames},
}

// usage writes azqd -h: a synopsis and the flags by group.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: azqd [flags]

azqd serves the Azure Queue REST API for the development account
devstoreaccount1 on 127.0.0.1:10001, in memory unless -data is given, and
prints the connection string. Manual: docs/emulator.md in the azq repository.
`)
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, entry := range g.flags {
			names := strings.Split(entry, ",")
			f := fs.Lookup(names[0])
			if f == nil {
				continue
			}
			dash := "-"
			if g.flags[0] == azuriteFlagNames[0] {
				dash = "--" // as Azurite writes them
			}
			var shown []string
			for _, n := range names {
				d := dash
				if len(n) == 1 {
					d = "-"
				}
				shown = append(shown, d+n)
			}
			arg, help := flag.UnquoteUsage(f)
			line := "  " + strings.Join(shown, ", ")
			if arg != "" {
				line += " " + arg
			}
			fmt.Fprintln(w, line)
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				help += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(w, "    \t%s\n", strings.ReplaceAll(help, "\n", "\n    \t"))
		}
	}
}

// parseFlags parses args (without the program name). On a mistake it
// writes the error alone on stderr, with a hint where one is known and a
// pointer to -h, and returns an error wrapping errUsage; -h writes the
// help on stdout and returns flag.ErrHelp.
func parseFlags(args []string, stdout, stderr io.Writer) (*config, error) {
	cfg, fs, err := parseArgs(args)
	switch {
	case err == nil:
		return cfg, nil
	case errors.Is(err, flag.ErrHelp):
		usage(stdout, fs)
		return nil, err
	}
	fmt.Fprintln(stderr, "azqd:", err)
	if h := hintFor(err, fs, args); h != "" {
		fmt.Fprintln(stderr, "azqd: hint:", h)
	}
	fmt.Fprintln(stderr, "azqd -h for help")
	return nil, fmt.Errorf("%w: %v", errUsage, err)
}

// hintFor has advice for a command-line error in args: the form a
// duration takes (hints.go), what azqd calls a flag known by another name
// elsewhere (--port), and the flag meant when an unknown one is close to
// a known one.
func hintFor(err error, fs *flag.FlagSet, args []string) string {
	var h *hintError
	if errors.As(err, &h) {
		return h.hint
	}
	if name, value, ok := invalidValue(err); ok {
		return durationHint(fs, name, value)
	}
	const unknown = "flag provided but not defined: "
	msg := err.Error()
	i := strings.Index(msg, unknown)
	if i < 0 {
		return ""
	}
	name := strings.TrimLeft(msg[i+len(unknown):], "-")
	if h := synonymHint(name, args); h != "" {
		return h
	}
	// Close means at most two edits, and at most one for every three
	// letters: "port" is not "cert".
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editdist.Distance(strings.ToLower(name), strings.ToLower(f.Name)); d < bestDist && 3*d <= len(name) {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	dash := "-"
	for _, n := range azuriteFlagNames {
		if strings.Split(n, ",")[0] == best {
			dash = "--"
		}
	}
	return fmt.Sprintf("did you mean %s%s?", dash, best)
}

// hintError is an error with advice for the person at the command line.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func parseArgs(args []string) (*config, *flag.FlagSet, error) {
	cfg := &config{}
	var accounts accountsFlag
	fs := flag.NewFlagSet("azqd", flag.ContinueOnError)
	// Errors and help are written by parseFlags, the errors alone.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}

	// Queue service.
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:10001", "`host:port` to listen on; port 0 picks a free port, and the port bound is printed")
	fs.Var(&accounts, "account", "account as `name:base64key`; repeat for more accounts or keys (default devstoreaccount1 with its well-known key)")
	fs.BoolVar(&cfg.strictVersion, "strict-version", false, "reject x-ms-version values newer than azq knows, as Azure rejects unknown ones")
	fs.BoolVar(&cfg.clockControl, "clock-control", false, "run on a clock that stands still until POST /_azq/clock/advance?by=DURATION moves it")
	fs.BoolVar(&cfg.ui, "ui", false, "serve a web page showing the queues under /_azq/ui/")

	// Authentication and TLS.
	fs.BoolVar(&cfg.allowAnonymous, "allow-anonymous", false, "accept requests that carry no credentials (curl without a signature)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "PEM certificate `file`; serve HTTPS (needs -tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "PEM private key `file` for -tls-cert")
	fs.Var(&oauthFlag{on: &cfg.oauth, basic: &cfg.oauthBasic}, "oauth", "accept Microsoft Entra ID bearer tokens (needs -tls-cert); signatures are not checked without -oauth-key. Azurite's --oauth basic is the same, with Azurite's token issuers")
	fs.StringVar(&cfg.oauthKey, "oauth-key", "", "PEM public keys or certificates, or a JSON Web Key Set, `file` that verifies bearer token signatures; implies -oauth")

	// Durability.
	fs.StringVar(&cfg.dataDir, "data", "", "keep queues and messages in `dir` across restarts, one subdirectory per account (default: in memory only)")
	fs.StringVar(&cfg.postgresURL, "postgres", "", "keep queues and messages in the PostgreSQL database at `url` (postgres://user:password@host/db), which any number of azqd serve together; not with -data")
	fs.StringVar(&cfg.postgresSchema, "postgres-schema", defaultPostgresSchema, "the PostgreSQL `schema` of each account's queues; "+accountPlaceholder+" stands for the account's name")

	// Faults, metrics and the admin endpoints.
	adminFlags(fs, &cfg.admin)

	// Operability.
	fs.StringVar(&cfg.logLevel, "log-level", "off", "request log `level` on stderr: off, debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `format`: text or json")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
	fs.DurationVar(&cfg.readTimeout, "read-timeout", 30*time.Second, "how long a client may take to send a request, headers and body")
	fs.DurationVar(&cfg.keepAliveTimeout, "keep-alive-timeout", 5*time.Second, "how long an idle keep-alive connection stays open")
	fs.IntVar(&cfg.maxConnections, "max-connections", 1024, "most connections served at once; more wait to be accepted")
	fs.BoolVar(&cfg.printConnString, "print-connection-string", false, "print only the connection strings on stdout, one per account, and the rest on stderr")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")
	fs.BoolVar(&cfg.version, "v", false, "print the version and exit")
	fs.StringVar(&cfg.healthcheck, "healthcheck", "", "ask the azqd serving at `URL` (its /_azq/health) whether it is healthy, and exit 0 if so, 1 if not: a container's health check")

	az := azuriteFlags(fs, cfg)
	if err := fs.Parse(azuriteArgs(args)); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		if err := azuriteCommand(fs.Args()); err != nil {
			return nil, fs, err
		}
		return nil, fs, fmt.Errorf("unexpected arguments %q: azqd takes flags only", fs.Args())
	}
	if err := checkAddr(cfg.addr); err != nil {
		return nil, fs, err
	}
	if err := az.apply(cfg); err != nil {
		return nil, fs, err
	}
	if err := cfg.admin.check(); err != nil {
		return nil, fs, err
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		return nil, fs, errors.New("-tls-cert and -tls-key go together")
	}
	if cfg.oauthKey != "" {
		cfg.oauth = true
	}
	if cfg.oauth && cfg.tlsCert == "" && !cfg.oauthBasic {
		// Azurite starts with --oauth basic over HTTP and refuses
		// tokens there; so does azqd. Its own -oauth insists.
		return nil, fs, errors.New("-oauth needs -tls-cert and -tls-key: the Azure SDKs send bearer tokens over HTTPS only")
	}
	if cfg.shutdownTimeout <= 0 {
		return nil, fs, errors.New("-shutdown-timeout must be positive")
	}
	if cfg.readTimeout <= 0 || cfg.keepAliveTimeout <= 0 {
		return nil, fs, errors.New("-read-timeout and -keep-alive-timeout must be positive")
	}
	if cfg.maxConnections < 1 {
		return nil, fs, errors.New("-max-connections must be at least 1")
	}
	if _, err := parseLevel(cfg.logLevel); err != nil {
		return nil, fs, err
	}
	if cfg.logFormat != "text" && cfg.logFormat != "json" {
		return nil, fs, fmt.Errorf("-log-format %q: want text or json", cfg.logFormat)
	}
	cfg.accounts = accounts.accounts
	if len(cfg.accounts) == 0 {
		cfg.accounts = []server.Account{server.DevelopmentAccount()}
	}
	if err := checkPostgresFlags(cfg, fs); err != nil {
		return nil, fs, err
	}
	return cfg, fs, nil
}

// checkPostgresFlags checks -postgres against the flags it excludes, and
// -postgres-schema against the accounts.
func checkPostgresFlags(cfg *config, fs *flag.FlagSet) error {
	if cfg.postgresURL == "" {
		schemaSet := false
		fs.Visit(func(f *flag.Flag) { schemaSet = schemaSet || f.Name == "postgres-schema" })
		if schemaSet {
			return errors.New("-postgres-schema needs -postgres")
		}
		return nil
	}
	switch {
	case cfg.dataDir != "":
		return errors.New("-postgres and -data (or Azurite's --location) exclude each other: the queues are kept in the database or in the directory, not both")
	case cfg.clockControl:
		return errors.New("-postgres and -clock-control exclude each other: on PostgreSQL the time is the database's, which every azqd on it shares, not a clock of this process")
	}
	return checkPostgresSchemas(cfg.postgresSchema, cfg.accounts)
}

// oauthFlag is -oauth, a boolean that also takes Azurite's one level,
// "basic" (--oauth basic): tokens' claims are checked, not signatures,
// which is what -oauth without -oauth-key does.
type oauthFlag struct{ on, basic *bool }

func (f *oauthFlag) String() string {
	if f == nil || f.on == nil {
		return "false"
	}
	return strconv.FormatBool(*f.on)
}

func (f *oauthFlag) Set(v string) error {
	if strings.EqualFold(v, "basic") {
		*f.on, *f.basic = true, true
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New(`want true, false or Azurite's "basic"`)
	}
	*f.on = b
	return nil
}

func (f *oauthFlag) IsBoolFlag() bool { return true }

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

// newLogger returns the logger -log-level and -log-format ask for, or
// Azurite's --debug FILE's, or nil when logging is off; close closes the
// file.
func newLogger(cfg *config, stderr io.Writer) (logger *slog.Logger, close func(), err error) {
	close = func() {}
	w, level := stderr, slog.LevelDebug
	switch {
	case cfg.debugLog != "":
		f, err := os.OpenFile(cfg.debugLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--debug: %w", err)
		}
		w, close = f, func() { f.Close() }
	case strings.EqualFold(cfg.logLevel, "off") || cfg.logLevel == "":
		return nil, close, nil
	default:
		level, _ = parseLevel(cfg.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), close, nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), close, nil
}
