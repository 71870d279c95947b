package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/azqlib/azq"
)

// adminCall sends method to url and decodes the JSON reply into v.
func adminCall(t *testing.T, method, url string, wantStatus int, v any) {
	t.Helper()
	status, body := send(t, method, url, "", nil, nil)
	if status != wantStatus {
		t.Fatalf("%s %s: status %d %s, want %d", method, url, status, body, wantStatus)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, body)
		}
	}
}

func TestHealth(t *testing.T) {
	for _, clockCtl := range []bool{false, true} {
		var args []string
		if clockCtl {
			args = append(args, "-clock-control")
		}
		d := start(t, args...)
		var h healthReply
		adminCall(t, "GET", d.base+"/_azq/health", 200, &h)
		if h.Status != "ok" || h.ClockControl != clockCtl || !strings.Contains(h.Version, "go1.") {
			t.Fatalf("health with -clock-control=%v: %+v", clockCtl, h)
		}
		adminCall(t, "HEAD", d.base+"/_azq/health", 200, nil)
		adminCall(t, "POST", d.base+"/_azq/health", 405, nil)
	}
}

func TestReset(t *testing.T) {
	// Off without -clock-control.
	off := start(t)
	qc := queueClient(t, off.conns["devstoreaccount1"], "kept")
	ctx := testContext(t)
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	adminCall(t, "POST", off.base+"/_azq/reset", 404, nil)
	if _, err := qc.GetProperties(ctx, nil); err != nil {
		t.Fatalf("the queue is gone after a refused reset: %v", err)
	}

	d := start(t, "-clock-control", "-account", "one:"+key1, "-account", "two:"+key2)
	for _, name := range []string{"one", "two"} {
		svc, err := azqueue.NewServiceClientFromConnectionString(d.conns[name], clientOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"a", "b", "c"} {
			if _, err := svc.CreateQueue(ctx, name+q, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.NewQueueClient(name+q).EnqueueMessage(ctx, "m", nil); err != nil {
				t.Fatal(err)
			}
		}
		rule := azqueue.CORSRule{AllowedOrigins: ptrTo("*"), AllowedMethods: ptrTo("GET"), AllowedHeaders: ptrTo(""), ExposedHeaders: ptrTo(""), MaxAgeInSeconds: ptrTo(int32(5))}
		if _, err := svc.SetProperties(ctx, &azqueue.SetPropertiesOptions{CORS: []*azqueue.CORSRule{&rule}}); err != nil {
			t.Fatal(err)
		}
	}
	adminCall(t, "GET", d.base+"/_azq/reset", 405, nil)
	var r struct{ Status string }
	adminCall(t, "POST", d.base+"/_azq/reset", 200, &r)
	for _, name := range []string{"one", "two"} {
		svc, _ := azqueue.NewServiceClientFromConnectionString(d.conns[name], clientOptions(nil))
		page, err := svc.NewListQueuesPager(nil).NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Queues) != 0 {
			t.Fatalf("account %s has %d queues after reset", name, len(page.Queues))
		}
		props, err := svc.GetServiceProperties(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(props.CORS) != 0 {
			t.Fatalf("account %s keeps %d CORS rules after reset", name, len(props.CORS))
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// Two valid account keys for tests with several accounts.
const (
	key1 = "a2V5LW9uZS1mb3ItdGVzdHMtb25seS0wMTIzNDU2Nzg5"
	key2 = "a2V5LXR3by1mb3ItdGVzdHMtb25seS0wMTIzNDU2Nzg5"
)

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "azqd "+azq.Version+" (") || !strings.Contains(out, "go1.") || strings.Count(out, "\n") != 1 {
		t.Fatalf("-version printed %q", out)
	}
	if stderr.Len() != 0 {
		t.Fatalf("-version wrote to stderr: %q", stderr.String())
	}
}

// TestPrintConnectionString: with -print-connection-string, stdout
// carries the connection strings alone, with the port actually bound when
// -addr asks for port 0, so a script can read the first line.
func TestPrintConnectionString(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-print-connection-string"}, pw, stderr)
		pw.Close()
		done <- err
	}()
	var stdout []string
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		stdout = append(stdout, l)
	case <-time.After(20 * time.Second):
		t.Fatal("no connection string printed")
	}
	conn := stdout[0]
	if !strings.HasPrefix(conn, "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;") ||
		strings.Contains(conn, ":0/") || !strings.Contains(conn, "QueueEndpoint=http://127.0.0.1:") {
		t.Fatalf("first stdout line %q, want the connection string with the bound port", conn)
	}
	roundTrip(t, queueClient(t, conn, "printed"))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		stdout = append(stdout, l)
	}
	if len(stdout) != 1 {
		t.Fatalf("stdout has more than the connection string: %q", stdout)
	}
	if !strings.Contains(stderr.String(), ", serving the Azure Queue REST API on http://127.0.0.1:") {
		t.Fatalf("the notes did not go to stderr: %q", stderr.String())
	}
}

// TestWarnsBeyondLoopback: azqd says so when it listens on more than the
// loopback interface, where the well-known development key would let
// anyone in. (It only binds; all traffic stays on loopback.)
func TestWarnsBeyondLoopback(t *testing.T) {
	quiet := start(t)
	if err := quiet.stop(); err != nil {
		t.Fatal(err)
	}
	if s := quiet.stderr.String(); strings.Contains(s, "warning") {
		t.Fatalf("warned on loopback: %q", s)
	}
	d := start(t, "-addr", "0.0.0.0:0")
	if !strings.HasPrefix(d.base, "http://127.0.0.1:") {
		t.Fatalf("endpoint %q, want the loopback address for clients on this machine", d.base)
	}
	if s := d.stderr.String(); !strings.Contains(s, "azqd: warning: listening on ") || !strings.Contains(s, "beyond loopback") {
		t.Fatalf("no warning for 0.0.0.0: %q", s)
	}
	for _, c := range []struct {
		addr string
		want bool
	}{{"127.0.0.1:1", true}, {"[::1]:1", true}, {"0.0.0.0:1", false}, {"[::]:1", false}, {"192.0.2.1:1", false}} {
		a, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := isLoopback(a); got != c.want {
			t.Errorf("isLoopback(%s) = %v", c.addr, got)
		}
	}
}

// TestSlowClientsAreCut is an integration test on the real clock: it opens
// many slow connections to azqd on loopback (silent, trickling headers,
// trickling a body, idle after a request) and checks that azqd closes
// each within its timeouts while a normal client is served, and that
// clients beyond the connection limit wait for a slot rather than fail.
// Every connection and loop is bounded; the test ends by itself in a few
// seconds.
func TestSlowClientsAreCut(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock integration test")
	}
	const (
		readTimeout = time.Second
		limit       = 24
		slow        = 16 // below the limit: normal clients keep a slot
		deadline    = 6 * time.Second
	)
	d := start(t, "-read-timeout", readTimeout.String(), "-keep-alive-timeout", readTimeout.String(),
		"-max-connections", fmt.Sprint(limit))
	host := strings.TrimPrefix(d.base, "http://")

	// kinds of slow client; each writes at most a few bytes a second.
	kinds := []func(c net.Conn){
		func(c net.Conn) {}, // connects and says nothing
		func(c net.Conn) { trickle(c, "GET /devstoreaccount1?comp=list HTTP/1.1\r\nHost: x\r\n") },
		func(c net.Conn) {
			io.WriteString(c, "POST /devstoreaccount1/q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
			trickle(c, strings.Repeat("a", 1000))
		},
		func(c net.Conn) { // one request, then idles on keep-alive
			io.WriteString(c, "GET /_azq/health HTTP/1.1\r\nHost: x\r\n\r\n")
		},
	}
	start := time.Now()
	var wg sync.WaitGroup
	closedAfter := make(chan time.Duration, slow)
	for i := 0; i < slow; i++ {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(2)
		go func(kind func(net.Conn)) { defer wg.Done(); kind(c) }(kinds[i%len(kinds)])
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(deadline))
			_, err := io.Copy(io.Discard, c) // until azqd closes the connection
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				closedAfter <- -1
				return
			}
			closedAfter <- time.Since(start)
		}()
	}
	// Meanwhile a normal client is served.
	roundTrip(t, queueClient(t, d.conns["devstoreaccount1"], "normal"))
	wg.Wait()
	close(closedAfter)
	for took := range closedAfter {
		if took < 0 || took > readTimeout+2*time.Second {
			t.Fatalf("a slow connection was held open for %v (negative: still open after %v)", took, deadline)
		}
	}

	// Beyond the limit: silent connections fill every slot; a normal
	// client waits for one and is served once they are cut.
	var held []net.Conn
	for i := 0; i < limit+8; i++ {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	began := time.Now()
	var h healthReply
	adminCall(t, "GET", d.base+"/_azq/health", 200, &h)
	if took := time.Since(began); took > 3*readTimeout+2*time.Second {
		t.Fatalf("a client beyond the limit waited %v", took)
	}
}

// trickle writes s one byte every 200 ms, for at most 5 s, until the
// connection fails.
func trickle(c net.Conn, s string) {
	stop := time.Now().Add(5 * time.Second)
	for i := 0; i < len(s) && time.Now().Before(stop); i++ {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
