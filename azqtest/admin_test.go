package azqtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/server/admin"
)

// adminCall sends one request as another process would, over c, and
// returns the status and the body.
func adminCall(t *testing.T, c *http.Client, method, url, host string, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func clockOf(t *testing.T, body string) time.Time {
	t.Helper()
	var reply struct{ Now time.Time }
	if err := json.Unmarshal([]byte(body), &reply); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return reply.Now
}

// Another process moves the server's clock and sets its faults over
// HTTP, and sees the server's health, as it would azqd's;
// a foreign Host and a cross-site page are refused.
func TestNewServerAdminEndpoints(t *testing.T) {
	ctx := context.Background()
	srv := azqtest.NewServer(t)
	c := &http.Client{}
	t.Cleanup(c.CloseIdleConnections)

	status, body := adminCall(t, c, "GET", srv.URL+"/_azq/clock", "", "", nil)
	if status != 200 || !clockOf(t, body).Equal(srv.Clock.Now()) {
		t.Fatalf("GET /_azq/clock: %d %s; the clock is at %v", status, body, srv.Clock.Now())
	}
	before := srv.Clock.Now()
	status, body = adminCall(t, c, "POST", srv.URL+"/_azq/clock/advance?by=1h", "", "", nil)
	if want := before.Add(time.Hour); status != 200 || !clockOf(t, body).Equal(want) || !srv.Clock.Now().Equal(want) {
		t.Fatalf("POST /_azq/clock/advance: %d %s; the clock is at %v, want %v", status, body, srv.Clock.Now(), want)
	}
	to := before.Add(48 * time.Hour)
	status, body = adminCall(t, c, "POST", srv.URL+"/_azq/clock/set?to="+to.Format(time.RFC3339), "", "", nil)
	if status != 200 || !srv.Clock.Now().Equal(to) {
		t.Fatalf("POST /_azq/clock/set: %d %s; the clock is at %v, want %v", status, body, srv.Clock.Now(), to)
	}

	rule := `{"rules": [{"name": "busy", "when": {"operations": ["CreateQueue"], "times": 1}, "then": {"error": "ServerBusy"}}]}`
	if status, body := adminCall(t, c, "POST", srv.URL+"/_azq/faults", "", rule, map[string]string{"Content-Type": "application/json"}); status != 200 ||
		!strings.Contains(body, `"name":"busy"`) {
		t.Fatalf("POST /_azq/faults: %d %s", status, body)
	}
	svc, err := azqueue.NewServiceClientFromConnectionString(srv.ConnectionString,
		&azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateQueue(ctx, "orders", nil); !queueerror.HasCode(err, queueerror.ServerBusy) {
		t.Fatalf("create under the rule: %v", err)
	}
	if _, err := svc.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatalf("create after the rule's one time: %v", err)
	}
	if st := srv.Faults.Status(); len(st.Rules) != 1 || st.Rules[0].Hits != 1 {
		t.Fatalf("the rule set over HTTP is not the server's: %+v", st)
	}

	var health admin.Health
	status, body = adminCall(t, c, "GET", srv.URL+"/_azq/health", "", "", nil)
	if err := json.Unmarshal([]byte(body), &health); err != nil || status != 200 ||
		health != (admin.Health{Status: "ok", Version: azq.Version, ClockControl: true}) {
		t.Fatalf("GET /_azq/health: %d %s", status, body)
	}
	// azqtest links no metrics stack, so /_azq/metrics is not served:
	// a test that wants counts sets a Recorder with SetObserve.
	if status, body := adminCall(t, c, "GET", srv.URL+"/_azq/metrics", "", "", nil); status != http.StatusNotFound {
		t.Fatalf("GET /_azq/metrics: %d %s, want 404", status, body)
	}

	// The guard: a page under a name of its own that resolves to this
	// machine, and another site's form, change nothing.
	now := srv.Clock.Now()
	for _, r := range []struct{ method, path string }{{"GET", "/_azq/clock"}, {"POST", "/_azq/clock/advance?by=1h"}, {"GET", "/_azq/faults"}, {"POST", "/_azq/reset"}} {
		if status, body := adminCall(t, c, r.method, srv.URL+r.path, "rebind.evil.example", "", nil); status != http.StatusMisdirectedRequest {
			t.Errorf("%s %s for a foreign Host: %d %s", r.method, r.path, status, body)
		}
	}
	crossSite := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}
	for _, p := range []string{"/_azq/clock/advance?by=1h", "/_azq/reset"} {
		if status, body := adminCall(t, c, "POST", srv.URL+p, "", "", crossSite); status != http.StatusForbidden {
			t.Errorf("a cross-site POST %s: %d %s", p, status, body)
		}
	}
	if !srv.Clock.Now().Equal(now) {
		t.Fatalf("a refused request moved the clock from %v to %v", now, srv.Clock.Now())
	}
	if _, err := srv.Service.Queue("orders"); err != nil {
		t.Fatalf("a refused reset deleted the queue: %v", err)
	}

	if status, body := adminCall(t, c, "POST", srv.URL+"/_azq/reset", "", "", nil); status != 200 {
		t.Fatalf("POST /_azq/reset: %d %s", status, body)
	}
	if _, err := srv.Service.Queue("orders"); err == nil {
		t.Fatal("the queue is there after a reset")
	}
}

// The in-process server serves the admin endpoints through its Transport
// too, at InProcessURL.
func TestInProcessServerAdminEndpoints(t *testing.T) {
	srv := azqtest.NewInProcessServer(t)
	c := &http.Client{Transport: srv.Transport()}
	status, body := adminCall(t, c, "POST", srv.URL+"/_azq/clock/advance?by=90s", "", "", nil)
	if want := srv.Clock.Now(); status != 200 || !clockOf(t, body).Equal(want) {
		t.Fatalf("POST /_azq/clock/advance: %d %s; the clock is at %v", status, body, want)
	}
	if status, body := adminCall(t, c, "GET", srv.URL+"/_azq/faults", "rebind.evil.example", "", nil); status != http.StatusMisdirectedRequest {
		t.Fatalf("a foreign Host: %d %s", status, body)
	}
}
