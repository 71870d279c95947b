package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestHints: mistakes whose error alone does not say what to type get a
// hint that does: a port or a host alone for -addr, a bare number for any
// duration flag, and another server's name for the listening address.
// Each case is the whole of stderr.
func TestHints(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-addr", "24712"}, []string{`azqd: -addr "24712": want host:port`,
			"azqd: hint: did you mean -addr 127.0.0.1:24712? (0.0.0.0:24712 listens beyond this machine too)"}},
		{[]string{"-addr", "localhost"}, []string{`azqd: -addr "localhost": want host:port`, "azqd: hint: did you mean -addr localhost:10001?"}},
		{[]string{"-addr", "::1"}, []string{`azqd: -addr "::1": want host:port`, "azqd: hint: did you mean -addr [::1]:10001?"}},
		{[]string{"-addr", "127.0.0.1:"}, []string{`azqd: -addr "127.0.0.1:": no port`, "azqd: hint: did you mean -addr 127.0.0.1:10001? (port 0 picks a free one)"}},
		{[]string{"-addr", ":99999"}, []string{`azqd: -addr ":99999": the port must be a number from 0 to 65535`}},
		{[]string{"-addr", "99999"}, []string{`azqd: -addr "99999": want host:port, with a port from 0 to 65535`}},
		{[]string{"-addr", "a/b"}, []string{`azqd: -addr "a/b": want host:port`,
			"azqd: hint: give a host and a port, such as -addr 127.0.0.1:10001, or 127.0.0.1:0 for a free port"}},

		// Every duration flag, given a bare number.
		{[]string{"-shutdown-timeout", "10"}, []string{`azqd: invalid value "10" for flag -shutdown-timeout: parse error`,
			"azqd: hint: -shutdown-timeout takes a duration with its unit: did you mean -shutdown-timeout 10s? (ms, s, m and h are units)"}},
		{[]string{"-read-timeout=2.5"}, []string{`azqd: invalid value "2.5" for flag -read-timeout: parse error`,
			"azqd: hint: -read-timeout takes a duration with its unit: did you mean -read-timeout 2.5s? (ms, s, m and h are units)"}},
		{[]string{"-keep-alive-timeout", "5"}, []string{`azqd: invalid value "5" for flag -keep-alive-timeout: parse error`,
			"azqd: hint: -keep-alive-timeout takes a duration with its unit: did you mean -keep-alive-timeout 5s? (ms, s, m and h are units)"}},
		{[]string{"-shutdown-timeout", "soon"}, []string{`azqd: invalid value "soon" for flag -shutdown-timeout: parse error`,
			"azqd: hint: -shutdown-timeout takes a duration such as 10s, 1m30s or 500ms"}},
		// A number where a number belongs gets no duration hint.
		{[]string{"-max-connections", "many"}, []string{`azqd: invalid value "many" for flag -max-connections: parse error`}},

		// Other servers' names for the listening address.
		{[]string{"--port", "24712"}, []string{"azqd: flag provided but not defined: -port",
			"azqd: hint: azqd listens on -addr host:port: did you mean -addr 127.0.0.1:24712, or Azurite's --queuePort 24712?"}},
		{[]string{"-port=9"}, []string{"azqd: flag provided but not defined: -port",
			"azqd: hint: azqd listens on -addr host:port: did you mean -addr 127.0.0.1:9, or Azurite's --queuePort 9?"}},
		{[]string{"--port"}, []string{"azqd: flag provided but not defined: -port",
			"azqd: hint: azqd listens on -addr host:port: did you mean -addr 127.0.0.1:PORT, or Azurite's --queuePort PORT?"}},
		{[]string{"--host", "0.0.0.0"}, []string{"azqd: flag provided but not defined: -host",
			"azqd: hint: azqd listens on -addr host:port: did you mean -addr 0.0.0.0:10001, or Azurite's --queueHost 0.0.0.0?"}},
		{[]string{"-bind", "127.0.0.1:8080"}, []string{"azqd: flag provided but not defined: -bind",
			"azqd: hint: azqd listens on -addr host:port: did you mean -addr 127.0.0.1:8080, or Azurite's --queueHost 127.0.0.1?"}},
		// Close names still get the flag they resemble, but four letters
		// two edits apart are not close: --port is not --cert.
		{[]string{"--queueport", "1"}, []string{"azqd: flag provided but not defined: -queueport", "azqd: hint: did you mean --queuePort?"}},
		{[]string{"-crt", "x"}, []string{"azqd: flag provided but not defined: -crt", "azqd: hint: did you mean --cert?"}},
		{[]string{"-xyzw"}, []string{"azqd: flag provided but not defined: -xyzw"}},
	} {
		var stdout, stderr strings.Builder
		_, err := parseFlags(c.args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", c.args, err)
		}
		want := append(c.want, "azqd -h for help")
		if got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); !slices.Equal(got, want) {
			t.Errorf("%q: stderr\n%q\nwant\n%q", c.args, got, want)
		}
	}
}

// TestGoodAddrsPass: checkAddr lets through every form net.Listen takes
// that names a port.
func TestGoodAddrsPass(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:10001", "0.0.0.0:0", ":10001", "[::1]:10001", "localhost:http", "example.test:65535"} {
		if err := checkAddr(addr); err != nil {
			t.Errorf("checkAddr(%q) = %v", addr, err)
		}
	}
}
