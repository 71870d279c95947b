package main

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Hints for command-line mistakes whose error alone does not say what to
// type instead. hintFor (flags.go) asks these first.

// flagSynonyms are flag names people type for azqd's listening address,
// from other servers' command lines; port says the flag names a port
// alone, not a host.
var flagSynonyms = map[string]struct{ port bool }{
	"port": {port: true}, "p": {port: true}, "listen-port": {port: true}, "http-port": {port: true},
	"host": {}, "bind": {}, "listen": {}, "address": {}, "listen-address": {}, "hostname": {},
}

// synonymHint is the hint for the unknown flag name when people use it
// for azqd's listening address; value is what followed it in args, if
// anything.
func synonymHint(name string, args []string) string {
	syn, ok := flagSynonyms[strings.ToLower(name)]
	if !ok {
		return ""
	}
	value := flagValue(name, args)
	if syn.port {
		port := "PORT"
		if _, err := strconv.ParseUint(value, 10, 16); err == nil {
			port = value
		}
		return fmt.Sprintf("azqd listens on -addr host:port: did you mean -addr 127.0.0.1:%s, or Azurite's --queuePort %s?", port, port)
	}
	host, addr := "HOST", "HOST:10001"
	if value != "" && !strings.HasPrefix(value, "-") {
		if h, _, err := net.SplitHostPort(value); err == nil {
			host, addr = h, value
		} else {
			host = strings.TrimSuffix(strings.TrimPrefix(value, "["), "]")
			addr = net.JoinHostPort(host, "10001")
		}
	}
	return fmt.Sprintf("azqd listens on -addr host:port: did you mean -addr %s, or Azurite's --queueHost %s?", addr, host)
}

// flagValue is the value that follows flag name in args: -name=value,
// --name=value, or the next argument after -name or --name.
func flagValue(name string, args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		bare := strings.TrimLeft(a, "-")
		if bare == a {
			continue
		}
		if v, ok := strings.CutPrefix(bare, name+"="); ok {
			return v
		}
		if bare == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// durationHint is the hint for an invalid value of flag name when the
// flag takes a duration and the value is a bare number, as Azurite's
// flags in seconds and many other servers' take them.
func durationHint(fs *flag.FlagSet, name, value string) string {
	f := fs.Lookup(name)
	if f == nil {
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	if _, ok := g.Get().(time.Duration); !ok {
		return ""
	}
	if _, err := strconv.ParseFloat(value, 64); err != nil {
		return fmt.Sprintf("-%s takes a duration such as 10s, 1m30s or 500ms", name)
	}
	return fmt.Sprintf("-%s takes a duration with its unit: did you mean -%s %ss? (ms, s, m and h are units)", name, name, value)
}

// invalidValue reads the flag package's error for a value a flag's Set
// refused: `invalid value "10" for flag -shutdown-timeout: parse error`.
func invalidValue(err error) (name, value string, ok bool) {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		return "", "", false
	}
	quoted, rest, ok := strings.Cut(rest, " for flag -")
	if !ok {
		return "", "", false
	}
	value, uerr := strconv.Unquote(quoted)
	if uerr != nil {
		return "", "", false
	}
	name, _, _ = strings.Cut(rest, ":")
	return name, value, true
}

// checkAddr checks -addr before azqd tries to listen on it, so that a
// port alone, a host alone or a port out of range gets an error that
// says what to type. A port given by service name ("http") is left to
// the listener.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		if port == "" {
			return &hintError{fmt.Errorf("-addr %q: no port", addr),
				fmt.Sprintf("did you mean -addr %s? (port 0 picks a free one)", net.JoinHostPort(host, "10001"))}
		}
		if n, err := strconv.ParseUint(port, 10, 64); err == nil && n > 65535 {
			return fmt.Errorf("-addr %q: the port must be a number from 0 to 65535", addr)
		}
		return nil
	}
	want := fmt.Errorf("-addr %q: want host:port", addr)
	if n, err := strconv.ParseUint(addr, 10, 64); err == nil {
		if n > 65535 {
			return fmt.Errorf("-addr %q: want host:port, with a port from 0 to 65535", addr)
		}
		return &hintError{want, fmt.Sprintf("did you mean -addr 127.0.0.1:%s? (0.0.0.0:%s listens beyond this machine too)", addr, addr)}
	}
	if h := strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"); net.ParseIP(h) != nil || h != "" && !strings.ContainsAny(h, ":/ ") {
		return &hintError{want, fmt.Sprintf("did you mean -addr %s?", net.JoinHostPort(h, "10001"))}
	}
	return &hintError{want, "give a host and a port, such as -addr 127.0.0.1:10001, or 127.0.0.1:0 for a free port"}
}
