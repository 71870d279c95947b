package azure_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/server"
)

// TestUseDevelopmentStorage: Azure's shortcut for the local emulator is
// devstoreaccount1 at http://127.0.0.1:10001/devstoreaccount1, and
// DevelopmentStorageProxyUri lends it another scheme and host, keeping
// the queue port and the account's path, as Azure's parsers do; anything
// else beside the shortcut is refused, saying what to write instead.
// Other connection strings reach the SDK unchanged.
func TestUseDevelopmentStorage(t *testing.T) {
	for _, c := range []struct {
		conn, url, err string
	}{
		{conn: "UseDevelopmentStorage=true", url: "http://127.0.0.1:10001/devstoreaccount1/"},
		{conn: "UseDevelopmentStorage=true;", url: "http://127.0.0.1:10001/devstoreaccount1/"},
		{conn: "usedevelopmentstorage=TRUE", url: "http://127.0.0.1:10001/devstoreaccount1/"},
		{conn: "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://ipv4.fiddler", url: "http://ipv4.fiddler:10001/devstoreaccount1/"},
		{conn: "DevelopmentStorageProxyUri=https://proxy.test:8888/some/path;UseDevelopmentStorage=true", url: "https://proxy.test:10001/devstoreaccount1/"},
		{conn: "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://[::1]:8888", url: "http://[::1]:10001/devstoreaccount1/"},
		{conn: devConn("http://127.0.0.1:7777/devstoreaccount1"), url: "http://127.0.0.1:7777/devstoreaccount1/"},

		{conn: "UseDevelopmentStorage=false", err: "UseDevelopmentStorage=false: the only value is true"},
		{conn: "UseDevelopmentStorage=true;AccountName=devstoreaccount1", err: "takes no other setting than DevelopmentStorageProxyUri, and AccountName is one"},
		{conn: "UseDevelopmentStorage=true;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1", err: "give the full connection string"},
		{conn: "UseDevelopmentStorage=true;UseDevelopmentStorage=true", err: "UseDevelopmentStorage is given twice"},
		{conn: "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=ipv4.fiddler", err: "want an absolute http or https URI"},
		{conn: "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=ftp://ipv4.fiddler", err: "want an absolute http or https URI"},
		{conn: "UseDevelopmentStorage=true;junk", err: `"junk" is not name=value`},
	} {
		svc, err := azure.NewServiceFromConnectionString(c.conn, nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error saying %q", c.conn, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.conn, err)
			continue
		}
		if got := svc.Client().URL(); got != c.url {
			t.Errorf("%q: service URL %q, want %q", c.conn, got, c.url)
		}
	}
	q, err := azure.NewQueueFromConnectionString("UseDevelopmentStorage=true", "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.Client().URL(), "http://127.0.0.1:10001/devstoreaccount1/jobs"; got != want {
		t.Errorf("NewQueueFromConnectionString: queue URL %q, want %q", got, want)
	}
}

// redirect sends every request to the server at base instead of the host
// it names; the Shared Key signature does not cover the host.
type redirect struct {
	base   *url.URL
	client *http.Client
}

func (r redirect) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = r.base.Scheme, r.base.Host
	req.Host = ""
	return r.client.Do(req)
}

// TestUseDevelopmentStorageSignsAsTheDevelopmentAccount: a queue made
// from UseDevelopmentStorage=true signs its requests with the development
// account's key and names it in the path, so a server that serves only
// that account (as azqd and Azurite do by default) accepts them.
func TestUseDevelopmentStorageSignsAsTheDevelopmentAccount(t *testing.T) {
	srv := server.New(server.Options{Accounts: []server.Account{server.DevelopmentAccount()}})
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	base, err := url.Parse(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := azure.NewServiceFromConnectionString("UseDevelopmentStorage=true", &azure.Options{
		ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
			Transport: redirect{base, hs.Client()}, Retry: policy.RetryOptions{MaxRetries: -1}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, _, err := svc.CreateQueue(ctx, "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "hello", nil); err != nil {
		t.Fatal(err)
	}
	got, err := srv.Service("devstoreaccount1").Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := got.ApproximateCount(ctx); err != nil || n != 1 {
		t.Errorf("the development account's queue holds %d messages (%v), want 1", n, err)
	}
}
