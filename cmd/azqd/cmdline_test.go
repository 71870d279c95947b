package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
)

// TestAzuriteCommandLines starts azqd with the command lines that
// Azurite's README (3.37) and the Testcontainers Azurite modules give
// Azurite, after the program name, and uses the queue service each
// starts. Hosts 0.0.0.0 become 127.0.0.1 and ports become 0, so the test
// stays on this machine; DIR, CERT and KEY become a temporary directory
// and a self-signed certificate and key.
func TestAzuriteCommandLines(t *testing.T) {
	for _, c := range []struct {
		source, line string
	}{
		{"Azurite README, workspace and debug log", `-s -l DIR -d DIR/debug.log`},
		{"Azurite README, long forms", `--silent --location DIR --debug DIR/debug.log`},
		{"Azurite README, queue only", `-l DIR`},
		{"Azurite README, docker with every option", `-l DIR -d DIR/debug.log --blobPort 7777 --blobHost 0.0.0.0 --blobKeepAliveTimeout 5 --queuePort 8888 --queueHost 0.0.0.0 --queueKeepAliveTimeout 5 --tablePort 9999 --tableHost 0.0.0.0 --tableKeepAliveTimeout 5 --loose --skipApiVersionCheck --disableProductStyleUrl --disableTelemetry`},
		{"Azurite README, HTTPS", `--cert CERT --key KEY`},
		{"Azurite README, docker HTTPS", `--blobHost 0.0.0.0  --queueHost 0.0.0.0 --tableHost 0.0.0.0 --cert CERT --key KEY`},
		{"Azurite README, OAuth", `--oauth basic --cert CERT --key KEY`},
		{"Azurite image's CMD", `-l DIR --blobHost 0.0.0.0 --queueHost 0.0.0.0 --tableHost 0.0.0.0`},
		{"testcontainers-go", `--blobHost 0.0.0.0 --queueHost 0.0.0.0 --tableHost 0.0.0.0`},
		{"testcontainers-go, in memory with a limit", `--blobHost 0.0.0.0 --queueHost 0.0.0.0 --tableHost 0.0.0.0 --inMemoryPersistence --extentMemoryLimit 256.000000`},
		{"testcontainers-node", `--blobHost 0.0.0.0 --queueHost 0.0.0.0 --tableHost 0.0.0.0 --inMemoryPersistence --extentMemoryLimit 64 --skipApiVersionCheck`},
		{"testcontainers-dotnet, queue only", `--queueHost 0.0.0.0 --inMemoryPersistence`},
		{"azqd's image, Azurite form", `--queueHost 0.0.0.0 --loose`},
	} {
		t.Run(c.source, func(t *testing.T) {
			dir := t.TempDir()
			certFile, keyFile, pool := selfSigned(t)
			args := loopbackArgs(strings.Fields(strings.NewReplacer("DIR", dir, "CERT", certFile, "KEY", keyFile).Replace(c.line)))
			d := start(t, args...)
			https := strings.Contains(c.line, "--cert")
			if strings.HasPrefix(d.base, "https://") != https {
				t.Fatalf("endpoint %s; --cert given: %v", d.base, https)
			}
			opts := clientOptions(nil)
			if https {
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.TLSClientConfig = &tls.Config{RootCAs: pool}
				defer tr.CloseIdleConnections()
				opts = clientOptions(&http.Client{Transport: tr})
			}
			qc, err := azqueue.NewQueueClientFromConnectionString(d.conns["devstoreaccount1"], "cmdline", opts)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, qc)
			for _, svc := range []string{"Blob", "Table"} {
				if strings.Contains(c.line, "--"+strings.ToLower(svc)+"Host") != strings.Contains(strings.Join(d.printed, "\n"), svc+" service is successfully listening") {
					t.Errorf("%s service announced %v, asked for %v", svc, !strings.Contains(c.line, svc), strings.Contains(c.line, svc))
				}
			}
			if strings.Contains(c.line, "-l DIR") || strings.Contains(c.line, "--location DIR") {
				if !slicesContainsPrefix(d.printed, "azqd: durable in "+dir+", serving") {
					t.Errorf("start-up lines %q do not say durable in %s", d.printed, dir)
				}
				if _, err := os.Stat(filepath.Join(dir, "devstoreaccount1")); err != nil {
					t.Errorf("--location: %v", err)
				}
			}
			if strings.Contains(c.line, "DIR/debug.log") {
				if b, err := os.ReadFile(filepath.Join(dir, "debug.log")); err != nil || !strings.Contains(string(b), "level=DEBUG") {
					t.Errorf("--debug file: %v, %q", err, b)
				}
			}
			if err := d.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// loopbackArgs turns an Azurite command line's hosts into 127.0.0.1 and
// its ports into 0, giving a port of 0 to each service named by host
// alone, whose default port another emulator may hold.
func loopbackArgs(args []string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == "0.0.0.0" {
			out[i] = "127.0.0.1"
		}
		if i > 0 && strings.HasSuffix(out[i-1], "Port") {
			out[i] = "0"
		}
	}
	for _, svc := range []string{"blob", "table", "queue"} {
		if indexOf(out, "--"+svc+"Host") >= 0 && indexOf(out, "--"+svc+"Port") < 0 {
			out = append(out, "--"+svc+"Port", "0")
		}
	}
	return out
}

// TestAzuritePFXIsRefused: a PFX certificate with its password, which
// azqd cannot read, is refused before anything starts, with the openssl
// command that converts it.
func TestAzuritePFXIsRefused(t *testing.T) {
	var stderr lockedBuffer
	err := run(context.Background(), []string{"--cert", "cert.pfx", "--pwd", "pfxpassword"}, &lockedBuffer{}, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "openssl pkcs12") {
		t.Fatalf("%v, stderr %q", err, stderr.String())
	}
}

// TestStartupLineSaysTheMode: the first line says whether the queues are
// in memory or in a directory.
func TestStartupLineSaysTheMode(t *testing.T) {
	d := start(t)
	if !strings.HasPrefix(d.printed[0], "azqd: in memory (queues are lost on exit; -data DIR keeps them), serving the Azure Queue REST API on http://127.0.0.1:") {
		t.Errorf("in memory: %q", d.printed[0])
	}
	dir := t.TempDir()
	d = start(t, "-data", dir)
	if !slicesContainsPrefix(d.printed, "azqd: durable in "+dir+", serving the Azure Queue REST API on http://127.0.0.1:") {
		t.Errorf("-data: %q", d.printed)
	}
}

func slicesContainsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestListenAddrKeepsTheHostAsked: 0.0.0.0 is printed as 0.0.0.0, not as
// the [::] a dual-stack listener reports.
func TestListenAddrKeepsTheHostAsked(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv6unspecified, Port: 10051}
	for _, c := range []struct{ asked, want string }{
		{"0.0.0.0:10051", "0.0.0.0:10051"},
		{"0.0.0.0:0", "0.0.0.0:10051"},
		{"[::]:10051", "[::]:10051"},
		{":10051", "[::]:10051"},
	} {
		if got := listenAddr(c.asked, bound); got != c.want {
			t.Errorf("listenAddr(%q) = %q, want %q", c.asked, got, c.want)
		}
	}
}

// TestUnsignedRequestHint: the first request refused for carrying no
// credentials makes azqd say, once, that -allow-anonymous exists.
func TestUnsignedRequestHint(t *testing.T) {
	d := start(t)
	for range 2 {
		req, err := http.NewRequestWithContext(testContext(t), "PUT", d.base+"/devstoreaccount1/jobs", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
	if n := strings.Count(d.stderr.String(), "-allow-anonymous"); n != 1 {
		t.Errorf("stderr mentions -allow-anonymous %d times, want once: %q", n, d.stderr.String())
	}
}

// TestAzuriteOAuthBasicOverHTTP: Azurite starts with --oauth basic and no
// certificate, serves Shared Key as usual and refuses bearer tokens over
// HTTP; so does azqd, and it says so at start-up.
func TestAzuriteOAuthBasicOverHTTP(t *testing.T) {
	d := start(t, "--oauth", "basic")
	roundTrip(t, queueClient(t, d.conns["devstoreaccount1"], "basic"))
	req, err := http.NewRequestWithContext(testContext(t), "GET", d.base+"/devstoreaccount1?comp=list", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer e30.e30.c2ln")
	req.Header.Set("x-ms-version", "2023-11-03")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-ms-error-code") != "AuthenticationFailed" {
		t.Errorf("bearer token over HTTP: %d %s, want 403 AuthenticationFailed", resp.StatusCode, resp.Header.Get("x-ms-error-code"))
	}
	if !strings.Contains(d.stderr.String(), "bearer tokens are refused") {
		t.Errorf("stderr %q does not say that tokens are refused over HTTP", d.stderr.String())
	}
}
