package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/azqlib/azq/server"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a
// logger and the reads of a test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// daemon is one azqd run inside the test process.
type daemon struct {
	t       *testing.T
	cancel  context.CancelFunc
	done    chan error // run's result
	lines   chan string
	stderr  *lockedBuffer
	base    string            // e.g. http://127.0.0.1:41234
	conns   map[string]string // account name → connection string
	printed []string          // the lines start read, up to the last connection string
}

// start runs azqd with args on an ephemeral port and waits until it has
// printed its connection strings.
func start(t *testing.T, args ...string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &daemon{t: t, cancel: cancel, done: make(chan error, 1), lines: make(chan string, 100),
		stderr: &lockedBuffer{}, conns: map[string]string{}}
	go func() {
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw, d.stderr)
		pw.Close()
		d.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(20 * time.Second):
			t.Error("azqd did not stop")
		}
	})
	// The connection strings come last, one per account.
	accounts := 1
	if indexOf(args, "-account") >= 0 {
		accounts = countAccounts(args)
	}
	for len(d.conns) < accounts {
		line := d.next("a connection string")
		d.printed = append(d.printed, line)
		if _, rest, ok := strings.Cut(line, ", serving the Azure Queue REST API on "); ok && strings.HasPrefix(line, "azqd: ") {
			d.base = rest
			continue
		}
		if name, conn, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(conn, "DefaultEndpointsProtocol=") {
			d.conns[name] = conn
		}
	}
	if d.base == "" {
		t.Fatal("azqd printed no endpoint")
	}
	return d
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

// countAccounts counts the distinct account names among -account flags.
func countAccounts(args []string) int {
	names := map[string]bool{}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-account" {
			name, _, _ := strings.Cut(args[i+1], ":")
			names[name] = true
		}
	}
	return len(names)
}

// next returns the next line azqd prints on stdout.
func (d *daemon) next(what string) string {
	d.t.Helper()
	select {
	case line, ok := <-d.lines:
		if !ok {
			d.t.Fatalf("azqd stopped before printing %s (stderr: %s)", what, d.stderr.String())
		}
		return line
	case err := <-d.done:
		d.done <- err
		d.t.Fatalf("azqd returned %v before printing %s", err, what)
	case <-time.After(20 * time.Second):
		d.t.Fatalf("timed out waiting for %s", what)
	}
	return ""
}

// waitFor skips lines until one equal to want.
func (d *daemon) waitFor(want string) {
	d.t.Helper()
	for d.next(fmt.Sprintf("%q", want)) != want {
	}
}

// stop cancels the run and returns its result.
func (d *daemon) stop() error {
	d.t.Helper()
	d.cancel()
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(20 * time.Second):
		d.t.Fatal("azqd did not stop")
	}
	return nil
}

func clientOptions(transport policy.Transporter) *azqueue.ClientOptions {
	return &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: transport,
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}}
}

func queueClient(t *testing.T, conn, queue string) *azqueue.QueueClient {
	t.Helper()
	qc, err := azqueue.NewQueueClientFromConnectionString(conn, queue, clientOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	return qc
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// roundTrip creates a queue, puts, gets and deletes a message through qc.
func roundTrip(t *testing.T, qc *azqueue.QueueClient) {
	t.Helper()
	ctx := testContext(t)
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatalf("create queue: %v", err)
	}
	if _, err := qc.EnqueueMessage(ctx, "hello", nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := qc.DequeueMessage(ctx, nil)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Messages) != 1 || *resp.Messages[0].MessageText != "hello" {
		t.Fatalf("get returned %d messages, want the one put", len(resp.Messages))
	}
	m := resp.Messages[0]
	if _, err := qc.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

func TestDefaultsServeTheDevelopmentAccount(t *testing.T) {
	d := start(t)
	if !strings.HasPrefix(d.base, "http://127.0.0.1:") || strings.HasSuffix(d.base, ":0") {
		t.Fatalf("printed endpoint %q, want the bound loopback address", d.base)
	}
	dev := server.DevelopmentAccount()
	want := dev.ConnectionString(d.base + "/devstoreaccount1")
	if got := d.conns["devstoreaccount1"]; got != want {
		t.Fatalf("connection string\n got %q\nwant %q", got, want)
	}
	roundTrip(t, queueClient(t, want, "defaults"))

	// Without -clock-control the clock endpoints do not exist.
	for _, c := range []struct{ method, path string }{
		{"GET", "/_azq/clock"}, {"POST", "/_azq/clock/advance?by=1h"}, {"POST", "/_azq/clock/set?to=2099-01-01T00:00:00Z"},
	} {
		req, _ := http.NewRequest(c.method, d.base+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s with clock control off: %s, want 404", c.method, c.path, resp.Status)
		}
	}
	// Logging is off by default.
	if err := d.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if s := d.stderr.String(); s != "" {
		t.Errorf("stderr not quiet by default: %q", s)
	}
}

func TestUnauthenticatedRequestsNeedAllowAnonymous(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allow=", allow), func(t *testing.T) {
			var args []string
			if allow {
				args = append(args, "-allow-anonymous")
			}
			d := start(t, args...)
			qc, err := azqueue.NewQueueClientWithNoCredential(d.base+"/devstoreaccount1/anon", clientOptions(nil))
			if err != nil {
				t.Fatal(err)
			}
			_, err = qc.Create(testContext(t), nil)
			if allow && err != nil {
				t.Fatalf("anonymous create with -allow-anonymous: %v", err)
			}
			var re *azcore.ResponseError
			if !allow && (!errors.As(err, &re) || re.StatusCode < 400) {
				t.Fatalf("anonymous create without -allow-anonymous: %v, want an Azure error", err)
			}
		})
	}
}

func TestStrictVersion(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprint("strict=", strict), func(t *testing.T) {
			args := []string{"-allow-anonymous"}
			if strict {
				args = append(args, "-strict-version")
			}
			d := start(t, args...)
			req, err := http.NewRequest("GET", d.base+"/devstoreaccount1?comp=list", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("x-ms-version", "2099-01-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.StatusCode == http.StatusOK; got == strict {
				t.Fatalf("x-ms-version 2099-01-01 with -strict-version=%v: %s", strict, resp.Status)
			}
		})
	}
}

type clockJSON struct {
	Now   time.Time `json:"now"`
	Error string    `json:"error"`
}

func clockCall(t *testing.T, method, url string, wantStatus int) clockJSON {
	t.Helper()
	var v clockJSON
	adminCall(t, method, url, wantStatus, &v)
	return v
}

func TestClockControl(t *testing.T) {
	before := time.Now()
	d := start(t, "-clock-control")
	ctx := testContext(t)
	qc := queueClient(t, d.conns["devstoreaccount1"], "clocked")
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	hour := int32(3600)
	if _, err := qc.EnqueueMessage(ctx, "later", &azqueue.EnqueueMessageOptions{VisibilityTimeout: &hour}); err != nil {
		t.Fatal(err)
	}

	t0 := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now
	if t0.Before(before.Add(-time.Second)) || t0.After(time.Now().Add(time.Second)) {
		t.Fatalf("clock starts at %v, want the real time (%v)", t0, before)
	}
	if again := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now; !again.Equal(t0) {
		t.Fatalf("clock moved by itself from %v to %v", t0, again)
	}

	resp, err := qc.DequeueMessage(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Messages) != 0 {
		t.Fatal("a message put with a 1 h visibility timeout is visible at once")
	}

	after := clockCall(t, "POST", d.base+"/_azq/clock/advance?by=1h", 200).Now
	if want := t0.Add(time.Hour); !after.Equal(want) {
		t.Fatalf("advance by 1h: now %v, want %v", after, want)
	}
	resp, err = qc.DequeueMessage(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Messages) != 1 || *resp.Messages[0].MessageText != "later" {
		t.Fatalf("after advancing 1h, get returned %d messages, want the one put", len(resp.Messages))
	}
	if tnv := *resp.Messages[0].TimeNextVisible; tnv.Before(after) {
		t.Errorf("the service's time is not the mock clock: next visible %v, clock %v", tnv, after)
	}

	// Seconds work too, and set moves to a given instant.
	if got := clockCall(t, "POST", d.base+"/_azq/clock/advance?by=90", 200).Now; !got.Equal(after.Add(90 * time.Second)) {
		t.Fatalf("advance by 90 seconds: now %v", got)
	}
	target := t0.Add(7*24*time.Hour + time.Second).Truncate(time.Second)
	if got := clockCall(t, "POST", d.base+"/_azq/clock/set?to="+target.Format(time.RFC3339), 200).Now; !got.Equal(target) {
		t.Fatalf("set to %v: now %v", target, got)
	}
	// Seven days on, the message (default time-to-live 7 days) is gone.
	peek, err := qc.PeekMessage(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(peek.Messages) != 0 {
		t.Errorf("message still there after its 7-day time-to-live")
	}

	// Refusals.
	clockCall(t, "POST", d.base+"/_azq/clock/set?to="+t0.Format(time.RFC3339), 400)
	clockCall(t, "POST", d.base+"/_azq/clock/advance?by=-1h", 400)
	clockCall(t, "POST", d.base+"/_azq/clock/advance?by=soon", 400)
	clockCall(t, "POST", d.base+"/_azq/clock/advance", 400)
	clockCall(t, "POST", d.base+"/_azq/clock/set?to=tomorrow", 400)
	clockCall(t, "GET", d.base+"/_azq/clock/advance?by=1h", 405)
	clockCall(t, "POST", d.base+"/_azq/clock", 405)
	clockCall(t, "GET", d.base+"/_azq/nothing", 404)
	if got := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now; !got.Equal(target) {
		t.Fatalf("refused requests moved the clock to %v", got)
	}
}

func TestShutdownLetsInFlightRequestsFinish(t *testing.T) {
	d := start(t, "-allow-anonymous")
	qc := queueClient(t, d.conns["devstoreaccount1"], "inflight")
	if _, err := qc.Create(testContext(t), nil); err != nil {
		t.Fatal(err)
	}

	// Send a Put Message whose body is withheld until the server has
	// started reading it, so the request is certainly in flight when the
	// shutdown begins.
	body := `<?xml version="1.0" encoding="utf-8"?><QueueMessage><MessageText>in flight</MessageText></QueueMessage>`
	br, conn := startPut(t, d, "inflight", len(body))
	defer conn.Close()

	d.cancel()
	d.waitFor("azqd: shutting down")
	// Shutdown closes the listener first; once new connections are
	// refused, it is waiting for the request to finish.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", strings.TrimPrefix(d.base, "http://"))
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("azqd kept accepting connections after shutting down began")
		}
	}
	select {
	case err := <-d.done:
		t.Fatalf("run returned %v while a request was in flight", err)
	default:
	}

	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response of the in-flight request: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("in-flight Put Message: %s, want 201 Created", resp.Status)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(d.base, "http://")); err == nil {
		c.Close()
		t.Fatal("azqd still accepts connections after shutdown")
	}
}

// startPut sends the headers of an anonymous Put Message with a body of
// n bytes and waits for 100 Continue, which the server sends when the
// handler starts reading the body.
func startPut(t *testing.T, d *daemon, queue string, n int) (*bufio.Reader, net.Conn) {
	t.Helper()
	host := strings.TrimPrefix(d.base, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "POST /devstoreaccount1/%s/messages HTTP/1.1\r\nHost: %s\r\nx-ms-version: 2018-03-28\r\n"+
		"Content-Type: application/xml\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", queue, host, n)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100") {
		conn.Close()
		t.Fatalf("want 100 Continue, got %q, %v", status, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		conn.Close()
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	return br, conn
}

func TestShutdownTimeoutIsReported(t *testing.T) {
	d := start(t, "-allow-anonymous", "-shutdown-timeout", "50ms")
	qc := queueClient(t, d.conns["devstoreaccount1"], "stuck")
	if _, err := qc.Create(testContext(t), nil); err != nil {
		t.Fatal(err)
	}
	// A Put Message whose body never comes stays in flight once the
	// server has started reading it.
	_, conn := startPut(t, d, "stuck", 100)
	defer conn.Close()
	err := d.stop()
	if err == nil || !strings.Contains(err.Error(), "did not finish within 50ms") {
		t.Fatalf("run: %v, want a shutdown timeout error", err)
	}
}

func TestAccountsFlag(t *testing.T) {
	key1 := "a2V5MQ==" // "key1"
	key2 := "a2V5Mg==" // "key2"
	key3 := "a2V5Mw==" // "key3"
	d := start(t, "-account", "first:"+key1, "-account", "first:"+key2, "-account", "second:"+key3)
	if len(d.conns) != 2 {
		t.Fatalf("printed %d connection strings, want 2: %v", len(d.conns), d.conns)
	}
	if want := (server.Account{Name: "first", Keys: []string{key1}}).ConnectionString(d.base + "/first"); d.conns["first"] != want {
		t.Fatalf("first: %q, want %q", d.conns["first"], want)
	}
	roundTrip(t, queueClient(t, d.conns["second"], "qtwo"))

	// The second key of the first account works too (key rotation).
	cred, err := azqueue.NewSharedKeyCredential("first", key2)
	if err != nil {
		t.Fatal(err)
	}
	qc, err := azqueue.NewQueueClientWithSharedKeyCredential(d.base+"/first/rotated", cred, clientOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, qc)

	// Given accounts replace the development account.
	dev := server.DevelopmentAccount()
	_, err = queueClient(t, dev.ConnectionString(d.base+"/devstoreaccount1"), "dev").Create(testContext(t), nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode < 400 {
		t.Fatalf("devstoreaccount1 with -account given: %v, want an Azure error", err)
	}
}

// selfSigned writes a certificate and key for 127.0.0.1 and returns their
// paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "azqd test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	d := start(t, "-tls-cert", certFile, "-tls-key", keyFile)
	conn := d.conns["devstoreaccount1"]
	if !strings.HasPrefix(d.base, "https://") || !strings.Contains(conn, "DefaultEndpointsProtocol=https;") ||
		!strings.Contains(conn, "QueueEndpoint=https://") {
		t.Fatalf("TLS endpoint %q, connection string %q", d.base, conn)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	defer tr.CloseIdleConnections()
	qc, err := azqueue.NewQueueClientFromConnectionString(conn, "secure", clientOptions(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, qc)
}

// TestTLSSpeaksHTTP1Only: Azure Storage speaks HTTP/1.1 only, so azqd
// does too over TLS, on the queue port and on the ports it refuses for
// Azurite's other services: a client that offers h2 first gets
// HTTP/1.1, in ALPN and on the wire.
func TestTLSSpeaksHTTP1Only(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	d := start(t, "-tls-cert", certFile, "-tls-key", keyFile, "--blobPort", "0")
	var blob string
	for _, l := range d.printed {
		if m := regexp.MustCompile(`Blob service is successfully listening at https://([^\s,]+)`).FindStringSubmatch(l); m != nil {
			blob = m[1]
		}
	}
	if blob == "" {
		t.Fatalf("no Blob service announced: %q", d.printed)
	}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}},
		ForceAttemptHTTP2: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, u := range []string{d.base + "/_azq/health", d.base + "/devstoreaccount1?comp=list", "https://" + blob + "/devstoreaccount1?comp=list"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 1 || resp.ProtoMinor != 1 || resp.TLS == nil || resp.TLS.NegotiatedProtocol == "h2" {
			t.Fatalf("%s: %s, ALPN %q, want HTTP/1.1", u, resp.Proto, resp.TLS.NegotiatedProtocol)
		}
	}
	// A client that offers h2 alone is not served it either.
	conn, err := tls.Dial("tcp", strings.TrimPrefix(d.base, "https://"), &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	if err == nil {
		p := conn.ConnectionState().NegotiatedProtocol
		conn.Close()
		if p == "h2" {
			t.Fatal("an h2-only client negotiated h2")
		}
	}
}

func TestLogging(t *testing.T) {
	d := start(t, "-log-level", "debug", "-log-format", "json")
	roundTrip(t, queueClient(t, d.conns["devstoreaccount1"], "logged"))
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	out := d.stderr.String()
	n, mentions := 0, false
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		n++
		if strings.Contains(line, "/devstoreaccount1/logged") {
			mentions = true
		}
	}
	if n < 5 || !mentions {
		t.Fatalf("want a record per request naming the queue, got %d records:\n%s", n, out)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-account", "nocolon"},
		{"-account", "UPPER:a2V5MQ=="},
		{"-account", "ok1:not base64!"},
		{"-tls-cert", "x.pem"},
		{"-log-level", "loud"},
		{"-log-format", "xml"},
		{"-shutdown-timeout", "0s"},
		{"-no-such-flag"},
		{"extra"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), args, io.Discard, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("run %q: %v, want a usage error", args, err)
		}
		if stderr.Len() == 0 {
			t.Errorf("run %q reported nothing on stderr", args)
		}
	}
	if err := run(context.Background(), []string{"-h"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	// A port in use is an error, not a hang.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = run(context.Background(), []string{"-addr", ln.Addr().String()}, io.Discard, io.Discard)
	var h *hintError
	if !errors.As(err, &h) || !strings.Contains(h.hint, "Azurite") || !strings.Contains(h.hint, "-addr 127.0.0.1:0") {
		t.Errorf("listening on a busy port: %v, want an error with a hint naming Azurite and -addr 127.0.0.1:0", err)
	}
}
