package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
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
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cfg, err := parseFlags(c.args, io.Discard)
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
		{[]string{"--location", "/data"}, "not defined"}, // no honest mapping: see README
		{[]string{"--oauth", "basic"}, "unexpected arguments"},
	} {
		var stderr strings.Builder
		_, err := parseFlags(c.args, &stderr)
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
			cfg, err := parseFlags(c.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.refused, c.want) {
				t.Fatalf("refused %v, want %v", cfg.refused, c.want)
			}
		})
	}
}
