package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/metrics"
)

// adminConfig is the part of the command line about azqd's own surface:
// fault injection, metrics, and who may reach the admin endpoints.
type adminConfig struct {
	faultsFile   string   // -faults: rules to start with
	faultControl bool     // -fault-control (or -faults): serve /_azq/faults
	metrics      bool     // -metrics: serve /metrics
	allowHosts   []string // -allow-host: more Host names for /_azq/
	remote       bool     // -admin-remote: serve /_azq/ beyond loopback
}

// hostsFlag collects repeated -allow-host values.
type hostsFlag struct{ names *[]string }

func (f hostsFlag) String() string {
	if f.names == nil {
		return ""
	}
	return strings.Join(*f.names, ",")
}

func (f hostsFlag) Set(v string) error {
	if v == "" || strings.ContainsAny(v, ":/ ") {
		return errors.New("want a host name, without port or scheme")
	}
	*f.names = append(*f.names, v)
	return nil
}

func adminFlags(fs *flag.FlagSet, c *adminConfig) {
	fs.StringVar(&c.faultsFile, "faults", "", "inject faults by the rules and throttle in this JSON `file` (see docs/faults.md), and serve /_azq/faults")
	fs.BoolVar(&c.faultControl, "fault-control", false, "serve /_azq/faults, to add, list and clear fault rules while azqd runs (implied by -faults)")
	fs.BoolVar(&c.metrics, "metrics", true, "serve Prometheus metrics at /metrics (and /_azq/metrics)")
	fs.Var(hostsFlag{&c.allowHosts}, "allow-host", "let the admin endpoints under /_azq/ answer requests for this host `name` too, besides IP addresses and localhost; repeat for more")
	fs.BoolVar(&c.remote, "admin-remote", false, "serve the web view and the reset, clock and fault endpoints to clients beyond loopback too; they take no credentials")
}

// check validates the admin flags after parsing.
func (c *adminConfig) check() error {
	if c.faultsFile != "" {
		c.faultControl = true
	}
	for _, h := range c.allowHosts {
		if strings.HasPrefix(h, ".") || strings.HasSuffix(strings.TrimSuffix(h, "."), ".") {
			return fmt.Errorf("-allow-host %q: want a host name", h)
		}
	}
	return nil
}

// servesMetricsAtRoot returns the metrics handler for /metrics, or nil
// when metrics are off or an account is named "metrics", whose path-style
// requests /metrics must then reach (/_azq/metrics still serves them).
func servesMetricsAtRoot(cfg *config, rec *metrics.Recorder) http.Handler {
	if rec == nil {
		return nil
	}
	for _, a := range cfg.accounts {
		if a.Name == "metrics" {
			return nil
		}
	}
	return rec.Handler()
}

// announceAdmin prints the start-up lines of fault injection, metrics and
// the admin endpoints' reach; serving those endpoints beyond loopback is
// a choice the line names.
func announceAdmin(notes, stderr io.Writer, cfg *config, base string, addr net.Addr, inj *faults.Injector, rec *metrics.Recorder) {
	if inj != nil {
		st := inj.Status()
		what := fmt.Sprintf("%d rule(s)", len(st.Rules))
		if cfg.admin.faultsFile != "" {
			what += " from " + cfg.admin.faultsFile
		}
		if st.Throttle != nil {
			what += ", a throttle"
		}
		fmt.Fprintf(notes, "azqd: fault injection on with %s; see and change them at %s/_azq/faults\n", what, base)
	}
	if rec != nil {
		path := "/metrics"
		if servesMetricsAtRoot(cfg, rec) == nil {
			path = "/_azq/metrics"
		}
		fmt.Fprintf(notes, "azqd: Prometheus metrics at %s%s\n", base, path)
	}
	if !(cfg.ui || cfg.clockControl || inj != nil) || isLoopback(addr) {
		return
	}
	if cfg.admin.remote {
		fmt.Fprintf(stderr, "azqd: warning: -admin-remote: the web view and the reset, clock and fault endpoints answer every client that can reach %s, without credentials\n", addr)
		return
	}
	fmt.Fprintf(notes, "azqd: the web view and the reset, clock and fault endpoints answer clients on this machine only; -admin-remote serves them to every client that can reach %s\n", addr)
}
