package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

// refusedService is an Azurite service azqd does not serve (Blob, Table)
// but listens for when Azurite's flags name it, because tools written for
// Azurite's image (the Testcontainers Azurite modules) wait until every
// port they asked for accepts connections and has announced itself.
// Every request there is refused with a 501 that says why: azqd never
// pretends to store blobs or tables.
type refusedService struct {
	name string // "Blob" or "Table", as in Azurite's start-up lines
	addr string // host:port to listen on
}

// refuser serves one refusedService.
type refuser struct {
	name string
	addr string // as asked for, before the port was bound
	ln   net.Listener
	hs   *http.Server
	done chan error // the result of hs.Serve, once
}

// refusers are the listeners of the refused services.
type refusers []*refuser

// listenRefused listens for every refused service; on an error it closes
// those already listening.
func listenRefused(services []refusedService, maxConnections int) (refusers, error) {
	var rs refusers
	for _, s := range services {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			for _, r := range rs {
				r.ln.Close()
			}
			return nil, listenError(fmt.Sprintf("the %s service's address (azqd refuses its requests there)", s.name), s.addr, err)
		}
		rs = append(rs, &refuser{name: s.name, addr: s.addr, ln: newLimitListener(ln, maxConnections), done: make(chan error, 1)})
	}
	return rs, nil
}

// start starts serving, with the timeouts, TLS and protocols of the
// queue server qs, which it reads before qs serves. Each server gets its
// own copy of the TLS configuration, which ServeTLS writes to (its
// NextProtos).
func (rs refusers) start(qs *http.Server, queue net.Addr) {
	for _, r := range rs {
		r.hs = &http.Server{
			Handler:           refusal(r.name, portOf(queue)),
			TLSConfig:         qs.TLSConfig.Clone(),
			TLSNextProto:      qs.TLSNextProto,
			ReadHeaderTimeout: qs.ReadHeaderTimeout,
			ReadTimeout:       qs.ReadTimeout,
			WriteTimeout:      qs.WriteTimeout,
			IdleTimeout:       qs.IdleTimeout,
			ErrorLog:          qs.ErrorLog,
		}
		go func() {
			if r.hs.TLSConfig != nil {
				r.done <- r.hs.ServeTLS(r.ln, "", "")
			} else {
				r.done <- r.hs.Serve(r.ln)
			}
		}()
	}
}

// announce prints Azurite's start-up line for each service on notes: the
// Queue service at queue, then each refused one, saying that it refuses.
func (rs refusers) announce(notes io.Writer, scheme, queueAddr string, queue net.Addr) {
	fmt.Fprintf(notes, "azqd: Queue service is successfully listening at %s://%s\n", scheme, listenAddr(queueAddr, queue))
	for _, r := range rs {
		fmt.Fprintf(notes, "azqd: %s service is successfully listening at %s://%s, and refuses every request with 501 %s: azqd serves the Queue service only (port %d)\n",
			r.name, scheme, listenAddr(r.addr, r.ln.Addr()), notImplemented, portOf(queue))
	}
}

// portOf is the port of a TCP address.
func portOf(addr net.Addr) int {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.Port
	}
	return 0
}

// close closes the refused services at once and waits for them.
func (rs refusers) close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs.shutdown(ctx)
}

// shutdown stops the refused services gracefully within ctx, closing
// them when it runs out, and waits for their Serve calls to return.
func (rs refusers) shutdown(ctx context.Context) error {
	var errs []error
	for _, r := range rs {
		if err := r.hs.Shutdown(ctx); err != nil {
			r.hs.Close()
		}
		if err := <-r.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serving the %s service's refusals: %w", r.name, err))
		}
	}
	return errors.Join(errs...)
}

// notImplemented is the error code of the refusals, Azure's (and
// Azurite's) code for an operation the service does not implement.
const notImplemented = "NotImplemented"

// refusal answers every request with 501 and Azure's Error XML, whose
// x-ms-error-code and message the Azure SDKs show: service (Blob, Table)
// is not served here, and queues are on port queuePort.
func refusal(service string, queuePort int) http.Handler {
	e := &azq.Error{
		Code:       notImplemented,
		StatusCode: http.StatusNotImplemented,
		Message:    fmt.Sprintf("azqd serves the Azure Queue service only, on its port %d (a container may publish it under another); this port stands in for the %s service so that tools written for Azurite start, and refuses every request. Nothing is stored here.", queuePort, service),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server.WriteError(w, r, e)
	})
}

// azuriteFlagNames are azurite-queue's flags (3.37) and the blob and table
// ones of azurite, in the order azqd -h lists them; "location,l" is
// --location with its short form -l.
var azuriteFlagNames = []string{
	"queueHost", "queuePort", "queueKeepAliveTimeout",
	"location,l", "inMemoryPersistence", "extentMemoryLimit",
	"cert", "key", "pwd",
	"debug,d", "silent,s", "loose,L", "skipApiVersionCheck", "disableProductStyleUrl", "disableTelemetry",
	"blobHost", "blobPort", "blobKeepAliveTimeout", "tableHost", "tablePort", "tableKeepAliveTimeout",
}

// azurite holds Azurite's command-line flags, so that command lines
// written for Azurite ("azurite-queue --queueHost 0.0.0.0 --loose",
// Testcontainers' "azurite --blobHost 0.0.0.0 …") start azqd unchanged.
// Each does in azqd what it does in Azurite, or nothing where azqd
// already behaves that way, or is refused with the reason and azqd's
// equivalent (--pwd: azqd reads no PFX files).
type azurite struct {
	// queueHost and queuePort are Azurite's listening address and port for
	// the queue service: they replace the host and the port of -addr.
	queueHost, queuePort string
	// queueKeepAliveTimeout is -keep-alive-timeout, in seconds.
	queueKeepAliveTimeout string
	// location is Azurite's workspace directory, where it keeps its data:
	// azqd keeps its own there, as -data does.
	location string
	// inMemoryPersistence keeps Azurite's data off disk; azqd keeps it in
	// memory unless -data is given, so the two conflict, and Azurite
	// refuses it with --location.
	inMemoryPersistence bool
	// extentMemoryLimit caps Azurite's in-memory message store, in
	// megabytes; azqd has no such cap, which it says at start-up.
	extentMemoryLimit string
	// cert and key are a PEM certificate and key: -tls-cert and -tls-key.
	// pwd is the password of a PFX certificate, which azqd cannot read.
	cert, key, pwd string
	// debug is a file for Azurite's debug log: azqd writes its request
	// log there, at debug level.
	debug string
	// silent turns Azurite's access log off; azqd's is off unless
	// -log-level turns it on, so the two conflict.
	silent bool
	// loose makes Azurite ignore headers and query parameters it does not
	// support instead of refusing them; azqd always ignores them.
	loose bool
	// skipApiVersionCheck makes Azurite accept any x-ms-version; azqd
	// does so unless -strict-version asks otherwise, so the two conflict.
	skipAPIVersionCheck bool
	// disableProductStyleUrl takes the account from the first path
	// segment always, never from the host name.
	disableProductStyleURL bool
	// disableTelemetry turns off Azurite's telemetry; azqd sends none.
	disableTelemetry bool
	// blobHost, blobPort, tableHost and tablePort are where Azurite
	// serves blobs and tables. azqd listens there to refuse every request
	// (refusedService), so that tools waiting for all three ports start.
	// Their keep-alive timeouts change nothing that matters there.
	blobHost, blobPort, tableHost, tablePort string
	blobKeepAlive, tableKeepAlive            string
}

func azuriteFlags(fs *flag.FlagSet, cfg *config) *azurite {
	az := &azurite{}
	str := func(p *string, names, help string) {
		for _, n := range strings.Split(names, ",") {
			fs.StringVar(p, n, "", help)
		}
	}
	boolean := func(p *bool, names, help string) {
		for _, n := range strings.Split(names, ",") {
			fs.BoolVar(p, n, false, help)
		}
	}
	str(&az.queueHost, "queueHost", "listen on this `host`: the host of -addr")
	str(&az.queuePort, "queuePort", "listen on this `port`: the port of -addr")
	str(&az.queueKeepAliveTimeout, "queueKeepAliveTimeout", "-keep-alive-timeout, in `seconds`")
	str(&az.location, "location,l", "keep the queues in `dir`: -data dir (in azqd's format, not Azurite's)")
	boolean(&az.inMemoryPersistence, "inMemoryPersistence", "keep everything in memory, azqd's default (not with -data or --location)")
	str(&az.extentMemoryLimit, "extentMemoryLimit", "`megabytes`: accepted with --inMemoryPersistence; azqd enforces no such limit and says so")
	str(&az.cert, "cert", "PEM certificate: -tls-cert `file`")
	str(&az.key, "key", "PEM private key: -tls-key `file`")
	str(&az.pwd, "pwd", "refused: a PFX certificate's `password`; azqd reads PEM only (openssl pkcs12 -nodes converts)")
	str(&az.debug, "debug,d", "write the request log, at debug level, to `file`")
	boolean(&az.silent, "silent,s", "no access log: azqd's default (not with -log-level)")
	boolean(&az.loose, "loose,L", "no effect: azqd always ignores headers and query parameters it does not support")
	boolean(&az.skipAPIVersionCheck, "skipApiVersionCheck", "accept every x-ms-version: azqd's default (not with -strict-version)")
	boolean(&az.disableProductStyleURL, "disableProductStyleUrl", "take the account from the first path segment only, never from the host name")
	boolean(&az.disableTelemetry, "disableTelemetry", "no effect: azqd collects no telemetry")
	str(&az.blobHost, "blobHost", "listen on `host` (port 10000 unless --blobPort) and refuse every request: azqd serves queues only")
	str(&az.blobPort, "blobPort", "as --blobHost, on this `port` (host 127.0.0.1 unless --blobHost)")
	str(&az.blobKeepAlive, "blobKeepAliveTimeout", "no effect (`seconds`): the blob port only refuses")
	str(&az.tableHost, "tableHost", "listen on `host` (port 10002 unless --tablePort) and refuse every request: azqd serves queues only")
	str(&az.tablePort, "tablePort", "as --tableHost, on this `port` (host 127.0.0.1 unless --tableHost)")
	str(&az.tableKeepAlive, "tableKeepAliveTimeout", "no effect (`seconds`): the table port only refuses")
	return az
}

// azuriteArgs rewrites "--oauth basic", Azurite's way of giving a value to
// a flag that is a boolean in azqd, as "--oauth=basic".
func azuriteArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if (a == "--oauth" || a == "-oauth") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		if a == "--" {
			return append(out, args[i:]...)
		}
		out = append(out, a)
	}
	return out
}

// apply folds Azurite's flags into cfg, or refuses them.
func (az *azurite) apply(cfg *config) error {
	if az.pwd != "" {
		return &hintError{errors.New("--pwd: azqd reads PEM certificates only, not PFX"),
			"convert it with: openssl pkcs12 -in cert.pfx -nodes -out cert.pem; then give --cert cert.pem --key cert.pem (or -tls-cert and -tls-key)"}
	}
	if az.skipAPIVersionCheck && cfg.strictVersion {
		return errors.New("--skipApiVersionCheck and -strict-version contradict each other")
	}
	if az.inMemoryPersistence && (cfg.dataDir != "" || az.location != "") {
		return errors.New("--inMemoryPersistence and -data (or --location) contradict each other")
	}
	if az.extentMemoryLimit != "" {
		if !az.inMemoryPersistence {
			return errors.New("--extentMemoryLimit goes with --inMemoryPersistence, as in Azurite")
		}
		if _, err := strconv.ParseFloat(az.extentMemoryLimit, 64); err != nil {
			return fmt.Errorf("--extentMemoryLimit %q: want a number of megabytes", az.extentMemoryLimit)
		}
		cfg.notes = append(cfg.notes, "--extentMemoryLimit is not enforced: azqd keeps every message in memory, as many as the process may hold")
	}
	if az.location != "" {
		if cfg.dataDir != "" && cfg.dataDir != az.location {
			return errors.New("--location and -data name different directories")
		}
		cfg.dataDir = az.location
	}
	if az.silent && !strings.EqualFold(cfg.logLevel, "off") {
		return errors.New("--silent and -log-level contradict each other")
	}
	if az.debug != "" {
		if !strings.EqualFold(cfg.logLevel, "off") {
			return errors.New("--debug and -log-level contradict each other: --debug writes the log at debug level to its file")
		}
		cfg.debugLog = az.debug
	}
	if az.queueKeepAliveTimeout != "" {
		n, err := strconv.ParseFloat(az.queueKeepAliveTimeout, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("--queueKeepAliveTimeout %q: want a positive number of seconds", az.queueKeepAliveTimeout)
		}
		cfg.keepAliveTimeout = time.Duration(n * float64(time.Second))
	}
	for _, c := range []struct{ name, v string }{{"--blobKeepAliveTimeout", az.blobKeepAlive}, {"--tableKeepAliveTimeout", az.tableKeepAlive}} {
		if c.v == "" {
			continue
		}
		if n, err := strconv.ParseFloat(c.v, 64); err != nil || n <= 0 {
			return fmt.Errorf("%s %q: want a positive number of seconds", c.name, c.v)
		}
	}
	if az.cert != "" || az.key != "" {
		if cfg.tlsCert != "" || cfg.tlsKey != "" {
			return errors.New("--cert and --key are -tls-cert and -tls-key: give one pair")
		}
		if az.cert == "" || az.key == "" {
			return &hintError{errors.New("--cert and --key go together"),
				"azqd reads a PEM certificate and its PEM key; a PFX file (--cert with --pwd) can be converted with openssl pkcs12 -nodes"}
		}
		cfg.tlsCert, cfg.tlsKey = az.cert, az.key
	}
	cfg.pathStyleOnly = az.disableProductStyleURL
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

// azuriteCommand refuses, with what to type instead, the name of one of
// Azurite's programs given to azqd as its first argument ("azqd
// azurite-queue --location /data"), where flag parsing stops. azqd takes
// Azurite's flags itself, under any program name: the image's
// azurite-queue and azurite are links to azqd, so that command lines
// written for Azurite's image start it. It returns nil when rest, the
// arguments left after the flags, does not start with such a name.
func azuriteCommand(rest []string) error {
	if len(rest) == 0 {
		return nil
	}
	name, flags := rest[0], rest[1:]
	switch name {
	case "azurite", "azurite-queue":
		bare := "azqd"
		linked := "./" + name
		if len(flags) > 0 {
			bare += " " + shellJoin(flags)
			linked += " " + shellJoin(flags)
		}
		return &hintError{
			fmt.Errorf("%q is Azurite's command, not an argument of azqd", name),
			fmt.Sprintf("azqd takes Azurite's flags itself: %s; or run azqd under that name, as the image does with a link: ln -s \"$(command -v azqd)\" %s && %s", bare, name, linked),
		}
	case "azurite-blob", "azurite-table":
		return &hintError{
			fmt.Errorf("%q is Azurite's command for a service azqd does not serve", name),
			"azqd serves the Queue service only; azurite-queue's flags (--queueHost, --queuePort, --location …) are azqd's own: azqd -h lists them",
		}
	}
	return nil
}

// shellJoin joins args for a command line to copy into a shell, quoting
// those that need it.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,@%+") == "" {
			quoted[i] = a
		} else {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}
