package sdktest_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/azqlib/azq/server"
)

// foreignHosts are Host headers that do not name this machine, in the
// spellings the admin guard's tests use, and names whose first label is
// a served account, which host-style addressing would otherwise route.
var foreignHosts = []string{
	"rebind.evil.example:10001",
	"rebind.evil.example",
	"REBIND.Evil.Example.:10001",
	"localhost.evil.example",
	"localhost.evil.example:10001",
	"127.0.0.1.nip.io:10001",
	"devstoreaccount1.evil.example:10001",
	"devstoreaccount1.queue.core.windows.net.evil.example",
	"queues.test.evil.example",
	"xn--e1afmkfd.example",
}

// localHosts are Host headers that do: IP literals, localhost and names
// under it, a served account's production names, and an allowed name.
var localHosts = []string{
	"127.0.0.1:10001",
	"127.0.0.1",
	"[::1]:10001",
	"[fe80::1%25eth0]:10001",
	"192.168.1.20:10001",
	"localhost:10001",
	"LOCALHOST.:10001",
	"devstoreaccount1.localhost:10001",
	"devstoreaccount1.queue.localhost",
	"devstoreaccount1.queue.core.windows.net",
	"DevStoreAccount1-Secondary.Queue.Core.Windows.Net.:443",
	"queues.test",
	"QUEUES.TEST.:10001",
}

// TestCheckHostRefusesForeignHosts: with Options.CheckHost, a request
// naming a Host that is not this machine, a served account's name or an
// allowed one is refused with 421 and Azure's error document before
// anything else is looked at, preflights included, and changes nothing;
// the others are served. Without the option every Host is served, as by
// Azurite.
func TestCheckHostRefusesForeignHosts(t *testing.T) {
	e := newRawEnv(t, server.Options{CheckHost: true, AllowedHosts: []string{"Queues.Test."}})
	e.queue(t, "kept")
	if r := e.do(t, "POST", acct+"/kept/messages", "", strings.NewReader("<QueueMessage><MessageText>still here</MessageText></QueueMessage>"), nil); r.status != 201 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	for _, host := range foreignHosts {
		for _, req := range []struct{ method, path string }{
			{"GET", acct + "/kept/messages?peekonly=true"},
			{"DELETE", acct + "/kept/messages"},
			{"DELETE", acct + "/kept"},
			{"GET", acct + "?comp=list"},
			{"GET", "/kept/messages?peekonly=true"}, // host-style
		} {
			r := e.do(t, req.method, req.path, host, nil, nil)
			checkError(t, r, http.StatusMisdirectedRequest, "HostNotAllowed")
			if strings.Contains(r.body, "still here") || !strings.Contains(r.body, "AllowedHosts") {
				t.Fatalf("%s %s for Host %s: %s", req.method, req.path, host, r.body)
			}
		}
		r := e.do(t, "OPTIONS", acct+"/kept/messages", host, nil, map[string]string{"Origin": "http://" + host, "Access-Control-Request-Method": "DELETE"})
		checkError(t, r, http.StatusMisdirectedRequest, "HostNotAllowed")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("a refused preflight allows its origin: %v", r.header)
		}
	}
	if n := e.count(t, "kept"); n != 1 {
		t.Fatalf("after the refusals the queue holds %d messages", n)
	}
	for _, host := range localHosts {
		if r := e.do(t, "GET", peekPath(host), host, nil, nil); r.status != 200 || !strings.Contains(r.body, "still here") {
			t.Errorf("Host %s: %d %s", host, r.status, r.body)
		}
	}

	open := newRawEnv(t, server.Options{})
	open.queue(t, "kept")
	for _, host := range foreignHosts {
		if r := open.do(t, "GET", peekPath(host), host, nil, nil); r.status != 200 {
			t.Errorf("without CheckHost, Host %s: %d %s", host, r.status, r.body)
		}
	}
}

// peekPath is the path of a peek at the queue kept for a request to
// host: host-style when the host's first label names the account.
func peekPath(host string) string {
	if strings.HasPrefix(strings.ToLower(host), "devstoreaccount1") {
		return "/kept/messages?peekonly=true"
	}
	return acct + "/kept/messages?peekonly=true"
}

// TestCheckHostSDK: the Go SDK reads the refusal as an Azure error, code
// HostNotAllowed, status 421, with the reason in its message.
func TestCheckHostSDK(t *testing.T) {
	e := newEnv(t, server.Options{CheckHost: true})
	u, _ := url.Parse(e.hs.URL)
	// A transport that reaches the server under a name of its own, as a
	// page does whose name resolves to 127.0.0.1.
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, u.Host)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	opts := clientOptions()
	opts.Transport = &http.Client{Transport: tr}
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential("http://rebind.evil.example:"+u.Port()+"/devstoreaccount1/", e.cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.CreateQueue(context.Background(), "rebound", nil)
	wantCode(t, err, queueerror.Code("HostNotAllowed"))
	wantStatus(t, err, http.StatusMisdirectedRequest)
	if !strings.Contains(err.Error(), "rebind.evil.example") {
		t.Fatalf("the refusal does not name the Host: %v", err)
	}
	if _, err := e.srv.Service("devstoreaccount1").Queue("rebound"); err == nil {
		t.Fatal("a refused request made the queue")
	}
}
