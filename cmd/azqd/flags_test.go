package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAzuriteFlags: Azurite's queue flags are accepted with one or two
// dashes and do what they do in Azurite, or nothing where azqd already
// behaves that way.
func TestAzuriteFlags(t *testing.T) {
	cases := []struct {
		args   []string
		addr   string
		strict bool
	}{
		{nil, "127.0.0.1:10001", false},
		{[]string{"--queueHost", "0.0.0.0"}, "0.0.0.0:10001", false},
		{[]string{"--queueHost=0.0.0.0", "--queuePort=10011"}, "0.0.0.0:10011", false},
		{[]string{"-queuePort", "0"}, "127.0.0.1:0", false},
		{[]string{"--queueHost", "::"}, "[::]:10001", false},
		{[]string{"--queueHost", "[::1]", "--queuePort", "20001"}, "[::1]:20001", false},
		{[]string{"--queueHost", "localhost"}, "localhost:10001", false},
		// The aliases replace parts of -addr, in whatever order they come.
		{[]string{"--queuePort", "10009", "-addr", "0.0.0.0:1234"}, "0.0.0.0:10009", false},
		{[]string{"-addr", ":7000", "--queueHost", "127.0.0.2"}, "127.0.0.2:7000", false},
		// No effect: azqd is in memory, ignores unsupported headers and
		// parameters, and accepts every version unless told otherwise.
		{[]string{"--inMemoryPersistence", "--loose", "--skipApiVersionCheck"}, "127.0.0.1:10001", false},
		{[]string{"--queueHost", "0.0.0.0", "--queuePort", "10001", "--inMemoryPersistence", "--loose", "--skipApiVersionCheck"}, "0.0.0.0:10001", false},
		{[]string{"-strict-version"}, "127.0.0.1:10001", true},
		{[]string{"--disableTelemetry", "-L", "-s"}, "127.0.0.1:10001", false},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cfg, err := parseFlags(c.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.addr != c.addr || cfg.strictVersion != c.strict {
				t.Fatalf("addr %q strict %v, want %q %v", cfg.addr, cfg.strictVersion, c.addr, c.strict)
			}
		})
	}
}

func TestAzuriteFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--queuePort", "65536"}, "--queuePort"},
		{[]string{"--queuePort", "http"}, "--queuePort"},
		{[]string{"--queuePort", "-1"}, "--queuePort"},
		{[]string{"--queuePort"}, "flag needs an argument"},
		{[]string{"--skipApiVersionCheck", "-strict-version"}, "contradict"},
		{[]string{"--inMemoryPersistence", "-data", "/tmp/azqd-data"}, "contradict"},
		{[]string{"-addr", "nonsense", "--queueHost", "0.0.0.0"}, "-addr"},
		{[]string{"--blobPort", "65536"}, "--blobPort"},
		{[]string{"--tablePort", "x"}, "--tablePort"},
		{[]string{"--tableHost"}, "flag needs an argument"},
		{[]string{"--silent", "-log-level", "info"}, "contradict"},
		{[]string{"--location", "/a", "-data", "/b"}, "different directories"},
		{[]string{"--location", "/a", "--inMemoryPersistence"}, "contradict"},
		{[]string{"--extentMemoryLimit", "64"}, "goes with --inMemoryPersistence"},
		{[]string{"--inMemoryPersistence", "--extentMemoryLimit", "lots"}, "--extentMemoryLimit"},
		{[]string{"--oauth", "full"}, `"basic"`},
		{[]string{"--oauth=full"}, `"basic"`},
		{[]string{"--cert", "c.pem"}, "--cert and --key go together"},
		{[]string{"--cert", "c.pem", "--key", "k.pem", "-tls-cert", "c.pem", "-tls-key", "k.pem"}, "one pair"},
		{[]string{"--cert", "c.pfx", "--pwd", "secret"}, "openssl pkcs12"},
		{[]string{"--debug", "d.log", "-log-level", "info"}, "contradict"},
		{[]string{"--queueKeepAliveTimeout", "0"}, "--queueKeepAliveTimeout"},
		{[]string{"--blobKeepAliveTimeout", "soon"}, "--blobKeepAliveTimeout"},
	} {
		var stderr strings.Builder
		_, err := parseFlags(c.args, io.Discard, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: %v, stderr %q; want a usage error mentioning %q", c.args, err, stderr.String(), c.want)
		}
	}
}

// TestAzuriteRefusedServiceFlags: Azurite's blob and table flags name
// addresses azqd listens on to refuse every request, with Azurite's
// defaults (127.0.0.1, ports 10000 and 10002) for the part not given,
// and none without them.
func TestAzuriteRefusedServiceFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []refusedService
	}{
		{nil, nil},
		{[]string{"--queueHost", "0.0.0.0", "--silent"}, nil},
		{[]string{"--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"},
			[]refusedService{{"Blob", "0.0.0.0:10000"}, {"Table", "0.0.0.0:10002"}}},
		{[]string{"--blobPort", "0"}, []refusedService{{"Blob", "127.0.0.1:0"}}},
		{[]string{"-tableHost", "[::1]", "-tablePort", "20002"}, []refusedService{{"Table", "[::1]:20002"}}},
		{[]string{"--tableHost=::", "--blobHost=localhost", "--blobPort=20000"},
			[]refusedService{{"Blob", "localhost:20000"}, {"Table", "[::]:10002"}}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cfg, err := parseFlags(c.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.refused, c.want) {
				t.Fatalf("refused %v, want %v", cfg.refused, c.want)
			}
		})
	}
}

// azurite337QueueFlags are the options azurite-queue 3.37.0 lists in its
// --help, and the queue-side ones azurite adds (the keep-alive timeouts,
// the blob and table addresses), each with its short form where it has
// one.
var azurite337QueueFlags = []string{
	"cert", "d", "debug", "disableProductStyleUrl", "disableTelemetry", "extentMemoryLimit", "h", "help",
	"inMemoryPersistence", "key", "l", "location", "L", "loose", "oauth", "pwd", "queueHost", "queuePort",
	"s", "silent", "skipApiVersionCheck", "v", "version",
	"queueKeepAliveTimeout", "blobHost", "blobPort", "blobKeepAliveTimeout", "tableHost", "tablePort", "tableKeepAliveTimeout",
}

// TestEveryAzuriteFlagIsKnown: azqd defines every flag of azurite-queue
// 3.37 (-h and -help are the flag package's own), so none of them is
// "not defined".
func TestEveryAzuriteFlagIsKnown(t *testing.T) {
	_, fs, err := parseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range azurite337QueueFlags {
		if name == "h" || name == "help" {
			continue
		}
		if fs.Lookup(name) == nil {
			t.Errorf("Azurite's flag %q is not defined", name)
		}
	}
}

// TestAzuriteFlagsMeanWhatTheyMeanInAzurite checks each accepted Azurite
// flag's effect on the configuration.
func TestAzuriteFlagsMeanWhatTheyMeanInAzurite(t *testing.T) {
	for _, c := range []struct {
		args  []string
		check func(*config) bool
	}{
		{[]string{"--location", "/var/azq"}, func(c *config) bool { return c.dataDir == "/var/azq" }},
		{[]string{"-l", "/var/azq", "-data", "/var/azq"}, func(c *config) bool { return c.dataDir == "/var/azq" }},
		{[]string{"--cert", "c.pem", "--key", "k.pem"}, func(c *config) bool { return c.tlsCert == "c.pem" && c.tlsKey == "k.pem" }},
		{[]string{"--oauth", "basic", "--cert", "c.pem", "--key", "k.pem"}, func(c *config) bool { return c.oauth && c.oauthBasic }},
		{[]string{"--oauth=basic"}, func(c *config) bool { return c.oauth && c.oauthBasic }}, // HTTP: tokens refused, as in Azurite
		{[]string{"-d", "debug.log"}, func(c *config) bool { return c.debugLog == "debug.log" }},
		{[]string{"--queueKeepAliveTimeout", "7"}, func(c *config) bool { return c.keepAliveTimeout == 7*time.Second }},
		{[]string{"--disableProductStyleUrl"}, func(c *config) bool { return c.pathStyleOnly }},
		{[]string{"--inMemoryPersistence", "--extentMemoryLimit", "256.000000"}, func(c *config) bool {
			return c.dataDir == "" && len(c.notes) == 1 && strings.Contains(c.notes[0], "not enforced")
		}},
		{[]string{"-v"}, func(c *config) bool { return c.version }},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cfg, err := parseFlags(c.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Errorf("config %+v", cfg)
			}
		})
	}
}

// TestEveryFlagIsInAGroup: azqd -h lists every flag once, under a group.
func TestEveryFlagIsInAGroup(t *testing.T) {
	_, fs, err := parseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, g := range flagGroups {
		for _, entry := range g.flags {
			for _, n := range strings.Split(entry, ",") {
				listed[n]++
				if fs.Lookup(n) == nil {
					t.Errorf("group %q lists %q, which is not a flag", g.title, n)
				}
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if listed[f.Name] != 1 {
			t.Errorf("flag -%s is listed %d times in flagGroups, want once", f.Name, listed[f.Name])
		}
	})
}

// TestHelpIsGrouped: -h writes the groups in order on stdout, and nothing
// on stderr.
func TestHelpIsGrouped(t *testing.T) {
	var stdout, stderr strings.Builder
	if _, err := parseFlags([]string{"-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q", stderr.String())
	}
	out := stdout.String()
	at := 0
	for _, title := range []string{"Queue service:", "Authentication and TLS:", "Durability:", "Operability:", "Azurite compatibility"} {
		i := strings.Index(out[at:], "\n"+title)
		if i < 0 {
			t.Fatalf("no group %q after offset %d in:\n%s", title, at, out)
		}
		at += i + 1
	}
	for _, want := range []string{"  -data dir\n", "  --location, -l dir\n", "  -version, -v\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestUsageErrorsStandAlone: a mistake on the command line prints the
// error, a hint where one is known, and where help is, and no usage.
func TestUsageErrorsStandAlone(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-nonsense"}, []string{"azqd: flag provided but not defined: -nonsense", "azqd -h for help"}},
		{[]string{"--locaton", "/data"}, []string{"azqd: flag provided but not defined: -locaton", "azqd: hint: did you mean --location?", "azqd -h for help"}},
		{[]string{"-allow-anonymus"}, []string{"azqd: flag provided but not defined: -allow-anonymus", "azqd: hint: did you mean -allow-anonymous?", "azqd -h for help"}},
		{[]string{"-addr"}, []string{"azqd: flag needs an argument: -addr", "azqd -h for help"}},
		{[]string{"extra"}, []string{`azqd: unexpected arguments ["extra"]: azqd takes flags only`, "azqd -h for help"}},
	} {
		var stdout, stderr strings.Builder
		_, err := parseFlags(c.args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", c.args, err)
		}
		if got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); !slices.Equal(got, c.want) {
			t.Errorf("%q: stderr\n%q\nwant\n%q", c.args, got, c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: stdout %q", c.args, stdout.String())
		}
	}
}
