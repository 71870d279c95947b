package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// testcontainersArgs is the command line testcontainers-go's Azurite
// module gives the image's "azurite" entrypoint, always: all three
// services on every interface, at Azurite's default ports.
var testcontainersArgs = []string{"--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"}

// onLoopback is testcontainersArgs with every host on 127.0.0.1 and every
// port free, so that the test stays on this machine and never collides
// with a running emulator.
func onLoopback(args []string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == "0.0.0.0" {
			out[i] = "127.0.0.1"
		}
	}
	return append(out, "--blobPort", "0", "--queuePort", "0", "--tablePort", "0")
}

// listening matches Azurite's start-up line for a service, as azqd prints
// it, and captures the service and its address.
var listening = regexp.MustCompile(`(Blob|Queue|Table) service is successfully listening at http://([^\s,]+)`)

// services returns the address each service announced in lines.
func services(lines []string) map[string]string {
	addrs := map[string]string{}
	for _, l := range lines {
		if m := listening.FindStringSubmatch(l); m != nil {
			addrs[m[1]] = m[2]
		}
	}
	return addrs
}

// TestTestcontainersGoCommandLine runs azqd, in this process, with
// testcontainers-go's Azurite command line and checks what that module
// waits for before it hands out the container: each port accepts
// connections and its log line has appeared. It runs no testcontainers
// code and no container. Then queues work on the queue port, and the blob and
// table ports refuse every request with a clear Azure error.
func TestTestcontainersGoCommandLine(t *testing.T) {
	d := start(t, onLoopback(testcontainersArgs)...)
	out := strings.Join(d.printed, "\n")
	// The wait strategies of the Testcontainers Azurite modules.
	for _, want := range []string{
		"Blob service is successfully listening",
		"Queue service is successfully listening",
		"Table service is successfully listening",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line containing %q in %q", want, out)
		}
	}
	addrs := services(d.printed)
	if len(addrs) != 3 {
		t.Fatalf("announced %v, want Blob, Queue and Table", addrs)
	}
	for name, addr := range addrs {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("%s port: %v", name, err)
		}
		c.Close()
	}
	if !strings.HasSuffix(d.base, addrs["Queue"]) {
		t.Fatalf("queue endpoint %s, announced the Queue service at %s", d.base, addrs["Queue"])
	}
	for _, l := range d.printed {
		if strings.Contains(l, "Blob service") || strings.Contains(l, "Table service") {
			if !strings.Contains(l, "refuses every request") || !strings.Contains(l, "Queue service only") {
				t.Errorf("line %q does not say that the service is refused", l)
			}
		}
	}

	roundTrip(t, queueClient(t, d.conns["devstoreaccount1"], "testcontainers"))

	_, queuePort, _ := net.SplitHostPort(addrs["Queue"])
	for _, name := range []string{"Blob", "Table"} {
		for _, req := range []struct{ method, path string }{
			{"PUT", "/devstoreaccount1/container?restype=container"},
			{"GET", "/devstoreaccount1?comp=list"},
			{"POST", "/devstoreaccount1/Tables"},
			{"DELETE", "/devstoreaccount1/container/blob"},
			{"GET", "/_azq/health"},
			{"HEAD", "/devstoreaccount1/container/blob"},
		} {
			t.Run(name+" "+req.method+" "+req.path, func(t *testing.T) {
				r, err := http.NewRequestWithContext(testContext(t), req.method, "http://"+addrs[name]+req.path, strings.NewReader("<x/>"))
				if err != nil {
					t.Fatal(err)
				}
				r.Header.Set("x-ms-version", "2023-11-03")
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusNotImplemented || resp.Header.Get("x-ms-error-code") != "NotImplemented" {
					t.Fatalf("%s %s: %d, x-ms-error-code %q; want 501 NotImplemented",
						req.method, req.path, resp.StatusCode, resp.Header.Get("x-ms-error-code"))
				}
				if req.method == "HEAD" {
					if len(body) != 0 {
						t.Fatalf("HEAD answered a body: %q", body)
					}
					return
				}
				text := string(body)
				for _, want := range []string{
					`<?xml version="1.0" encoding="utf-8"?><Error><Code>NotImplemented</Code><Message>`,
					"azqd serves the Azure Queue service only, on its port " + queuePort,
					"stands in for the " + name + " service",
					"Nothing is stored here.",
				} {
					if !strings.Contains(text, want) {
						t.Errorf("body %q lacks %q", text, want)
					}
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/xml" {
					t.Errorf("Content-Type %q", ct)
				}
			})
		}
	}

	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	// Shut down with the rest: nothing listens any more.
	for name, addr := range addrs {
		if c, err := net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
			c.Close()
			t.Errorf("%s port %s still accepts connections after shutdown", name, addr)
		}
	}
}

// TestAzuriteLinesWithPrintConnectionString: with
// -print-connection-string, Azurite's start-up lines go to stderr with
// the other notes (a container's log shows both streams), and stdout
// keeps the connection strings alone.
func TestAzuriteLinesWithPrintConnectionString(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lockedBuffer{}
	var stdout lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append(onLoopback(testcontainersArgs), "-print-connection-string"), &stdout, stderr)
	}()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(stdout.String(), "\n") {
		select {
		case err := <-done:
			t.Fatalf("run returned %v: %s", err, stderr.String())
		case <-deadline:
			t.Fatal("no connection string printed")
		case <-time.After(10 * time.Millisecond): // polling the buffer
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "DefaultEndpointsProtocol=") {
		t.Fatalf("stdout %q, want the connection string alone", out)
	}
	if got := services(strings.Split(stderr.String(), "\n")); len(got) != 3 {
		t.Fatalf("stderr announced %v, want Blob, Queue and Table: %q", got, stderr.String())
	}
}

// TestRefusedServiceInUse: a blob or table address azqd cannot listen on
// stops it at start, saying which service's address it was, and leaves
// nothing listening.
func TestRefusedServiceInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, port, _ := net.SplitHostPort(busy.Addr().String())
	var stdout, stderr strings.Builder
	err = run(context.Background(), []string{"-addr", "127.0.0.1:0", "--blobPort", "0", "--tableHost", "127.0.0.1", "--tablePort", port}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "Table service") {
		t.Fatalf("run: %v, want an error naming the Table service's address", err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("printed %q before failing", stdout.String())
	}
}

// TestAzuriteCommandAsArgument: Azurite's command name given to azqd as
// an argument, as people type it after reading an Azurite command line,
// is refused with the command that works: azqd with the same flags, or
// azqd under that name, as the image's link runs it.
func TestAzuriteCommandAsArgument(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"azurite-queue", "--queueHost", "0.0.0.0", "--location", "/data"}, []string{
			`azqd: "azurite-queue" is Azurite's command, not an argument of azqd`,
			`azqd: hint: azqd takes Azurite's flags itself: azqd --queueHost 0.0.0.0 --location /data; or run azqd under that name, as the image does with a link: ln -s "$(command -v azqd)" azurite-queue && ./azurite-queue --queueHost 0.0.0.0 --location /data`,
			"azqd -h for help",
		}},
		{[]string{"azurite", "-l", "my data"}, []string{
			`azqd: "azurite" is Azurite's command, not an argument of azqd`,
			`azqd: hint: azqd takes Azurite's flags itself: azqd -l 'my data'; or run azqd under that name, as the image does with a link: ln -s "$(command -v azqd)" azurite && ./azurite -l 'my data'`,
			"azqd -h for help",
		}},
		{[]string{"azurite-queue"}, []string{
			`azqd: "azurite-queue" is Azurite's command, not an argument of azqd`,
			`azqd: hint: azqd takes Azurite's flags itself: azqd; or run azqd under that name, as the image does with a link: ln -s "$(command -v azqd)" azurite-queue && ./azurite-queue`,
			"azqd -h for help",
		}},
		{[]string{"azurite-blob", "--blobHost", "0.0.0.0"}, []string{
			`azqd: "azurite-blob" is Azurite's command for a service azqd does not serve`,
			"azqd: hint: azqd serves the Queue service only; azurite-queue's flags (--queueHost, --queuePort, --location …) are azqd's own: azqd -h lists them",
			"azqd -h for help",
		}},
	} {
		var stdout, stderr strings.Builder
		_, err := parseFlags(c.args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", c.args, err)
		}
		if got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); !slices.Equal(got, c.want) {
			t.Errorf("%q: stderr\n%q\nwant\n%q", c.args, got, c.want)
		}
	}
	// The suggested command works: azqd takes the flags as they were.
	if _, err := parseFlags([]string{"--queueHost", "0.0.0.0", "--location", t.TempDir()}, io.Discard, io.Discard); err != nil {
		t.Errorf("the suggested command line: %v", err)
	}
}
