package sdktest_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/sas"
	"github.com/azqlib/azq/server"
)

// The tests in this file drive the real handler with credentials the SDK
// generates: Shared Key on host-style URLs, account and service SAS
// tokens, and GetSASURL over TLS.

// serviceSAS signs a service SAS for the env's account with the SDK.
func (e *env) serviceSAS(t *testing.T, v sas.QueueSignatureValues) string {
	t.Helper()
	if v.Protocol == "" {
		v.Protocol = sas.ProtocolHTTPSandHTTP
	}
	qp, err := v.SignWithSharedKey(e.cred)
	if err != nil {
		t.Fatal(err)
	}
	return qp.Encode()
}

// accountSAS signs an account SAS for the env's account with the SDK.
func (e *env) accountSAS(t *testing.T, v sas.AccountSignatureValues) string {
	t.Helper()
	if v.Protocol == "" {
		v.Protocol = sas.ProtocolHTTPSandHTTP
	}
	qp, err := v.SignWithSharedKey(e.cred)
	if err != nil {
		t.Fatal(err)
	}
	return qp.Encode()
}

// allAccountPermissions is every account SAS permission a queue uses.
var allAccountPermissions = (&sas.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true, Process: true}).String()

// TestSDKHostStyleSharedKey: the SDK signs requests for a host-style
// endpoint (account in the first DNS label), and the handler verifies
// them; the connection goes to the test listener whatever the host.
func TestSDKHostStyleSharedKey(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	addr := e.hs.Listener.Addr().String()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	// One options value per client: the SDK appends its credential
	// policy to the options it is given.
	opts := func() *azqueue.ClientOptions {
		o := clientOptions()
		o.Transport = &http.Client{Transport: tr}
		return o
	}
	ep := "http://devstoreaccount1.queue.localhost:" + port + "/"
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(ep, e.cred, opts())
	if err != nil {
		t.Fatal(err)
	}

	if _, err := svc.CreateQueue(ctx, "hostq", &azqueue.CreateOptions{Metadata: map[string]*string{"team": to.Ptr("blue")}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	q := svc.NewQueueClient("hostq")
	put, err := q.EnqueueMessage(ctx, "host-style", nil)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := q.DequeueMessage(ctx, &azqueue.DequeueMessageOptions{VisibilityTimeout: to.Ptr(int32(30))})
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].MessageID != *put.Messages[0].MessageID || *got.Messages[0].MessageText != "host-style" {
		t.Fatalf("get: %+v %v", got.Messages, err)
	}
	upd, err := q.UpdateMessage(ctx, *got.Messages[0].MessageID, *got.Messages[0].PopReceipt, "updated", &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(int32(0))})
	if err != nil || upd.PopReceipt == nil {
		t.Fatalf("update: %+v %v", upd, err)
	}
	if _, err := q.DeleteMessage(ctx, *got.Messages[0].MessageID, *upd.PopReceipt, nil); err != nil {
		t.Fatalf("delete message: %v", err)
	}
	props, err := q.GetProperties(ctx, nil)
	if err != nil || *props.ApproximateMessagesCount != 0 || *props.Metadata["Team"] != "blue" {
		t.Fatalf("properties: %+v %v", props, err)
	}

	p, err := svc.NewListQueuesPager(&azqueue.ListQueuesOptions{Include: azqueue.ListQueuesInclude{Metadata: true}}).NextPage(ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if p.ServiceEndpoint == nil || *p.ServiceEndpoint != ep || len(p.Queues) != 1 || *p.Queues[0].Name != "hostq" {
		t.Fatalf("list: endpoint %v, queues %+v", p.ServiceEndpoint, p.Queues)
	}

	sec, err := azqueue.NewServiceClientWithSharedKeyCredential("http://devstoreaccount1-secondary.queue.localhost:"+port+"/", e.cred, opts())
	if err != nil {
		t.Fatal(err)
	}
	st, err := sec.GetStatistics(ctx, nil)
	if err != nil || st.GeoReplication == nil || *st.GeoReplication.Status != "live" || !st.GeoReplication.LastSyncTime.Equal(e.clk.Now()) {
		t.Fatalf("secondary stats: %+v %v", st, err)
	}

	// A service SAS on the host-style queue URL.
	sq, err := azqueue.NewQueueClientWithNoCredential(ep+"hostq?"+e.serviceSAS(t, sas.QueueSignatureValues{
		QueueName: "hostq", ExpiryTime: e.clk.Now().Add(time.Hour), Permissions: (&sas.QueuePermissions{Read: true, Add: true}).String(),
	}), opts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sq.EnqueueMessage(ctx, "via sas", nil); err != nil {
		t.Fatalf("service SAS put: %v", err)
	}
	peek, err := sq.PeekMessages(ctx, nil)
	if err != nil || len(peek.Messages) != 1 || *peek.Messages[0].MessageText != "via sas" {
		t.Fatalf("service SAS peek: %+v %v", peek, err)
	}

	if _, err := svc.DeleteQueue(ctx, "hostq", nil); err != nil {
		t.Fatalf("delete queue: %v", err)
	}
	if _, err := e.srv.Service("devstoreaccount1").Queue("hostq"); err == nil {
		t.Fatal("queue survived a host-style delete")
	}
}

// TestSDKSASRefusals: SDK-generated SAS tokens that the handler must
// refuse, one code per reason, through the real handler.
func TestSDKSASRefusals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	e.queue(t, "authq")
	exp := e.clk.Now().Add(time.Hour)
	acctClient := func(srt string, ip sas.IPRange) *azqueue.ServiceClient {
		c, err := azqueue.NewServiceClientWithNoCredential(e.endpoint+"/?"+e.accountSAS(t, sas.AccountSignatureValues{
			ExpiryTime: exp, Permissions: allAccountPermissions, ResourceTypes: srt, IPRange: ip,
		}), clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	svcQuery := func(ip sas.IPRange) string {
		return e.serviceSAS(t, sas.QueueSignatureValues{QueueName: "authq", ExpiryTime: exp, Permissions: "raup", IPRange: ip})
	}
	svcQueue := func(ip sas.IPRange) *azqueue.QueueClient {
		c, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/authq?"+svcQuery(ip), clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A service SAS is for one queue; on the account's URL its signature
	// names no queue and cannot match.
	svcOnService, err := azqueue.NewServiceClientWithNoCredential(e.endpoint+"/?"+svcQuery(sas.IPRange{}), clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	full := acctClient("sco", sas.IPRange{})
	other := sas.IPRange{Start: net.IPv4(10, 0, 0, 1).To4()}
	acl := []*azqueue.SignedIdentifier{{ID: to.Ptr("p"), AccessPolicy: &azqueue.AccessPolicy{Expiry: &exp, Permission: to.Ptr("r")}}}

	tests := []struct {
		name string
		call func() error
		code queueerror.Code
	}{
		{"account SAS without c: create queue", func() error { _, err := acctClient("so", sas.IPRange{}).CreateQueue(ctx, "newq", nil); return err }, queueerror.AuthorizationResourceTypeMismatch},
		{"account SAS without c: get metadata", func() error {
			_, err := acctClient("so", sas.IPRange{}).NewQueueClient("authq").GetProperties(ctx, nil)
			return err
		}, queueerror.AuthorizationResourceTypeMismatch},
		{"account SAS without o: put", func() error {
			_, err := acctClient("sc", sas.IPRange{}).NewQueueClient("authq").EnqueueMessage(ctx, "x", nil)
			return err
		}, queueerror.AuthorizationResourceTypeMismatch},
		{"account SAS without o: peek", func() error {
			_, err := acctClient("sc", sas.IPRange{}).NewQueueClient("authq").PeekMessages(ctx, nil)
			return err
		}, queueerror.AuthorizationResourceTypeMismatch},
		{"account SAS without s: list", func() error {
			_, err := acctClient("co", sas.IPRange{}).NewListQueuesPager(nil).NextPage(ctx)
			return err
		}, queueerror.AuthorizationResourceTypeMismatch},
		{"account SAS without s: service properties", func() error {
			_, err := acctClient("co", sas.IPRange{}).GetServiceProperties(ctx, nil)
			return err
		}, queueerror.AuthorizationResourceTypeMismatch},
		{"account SAS from another IP", func() error {
			_, err := acctClient("sco", other).NewQueueClient("authq").PeekMessages(ctx, nil)
			return err
		}, queueerror.AuthorizationSourceIPMismatch},
		{"service SAS from another IP", func() error { _, err := svcQueue(other).PeekMessages(ctx, nil); return err }, queueerror.AuthorizationSourceIPMismatch},
		{"account SAS: get ACL", func() error { _, err := full.NewQueueClient("authq").GetAccessPolicy(ctx, nil); return err }, queueerror.AuthorizationFailure},
		{"account SAS: set ACL", func() error {
			_, err := full.NewQueueClient("authq").SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: acl})
			return err
		}, queueerror.AuthorizationFailure},
		{"service SAS: get ACL", func() error { _, err := svcQueue(sas.IPRange{}).GetAccessPolicy(ctx, nil); return err }, queueerror.AuthorizationFailure},
		{"service SAS: set ACL", func() error {
			_, err := svcQueue(sas.IPRange{}).SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: acl})
			return err
		}, queueerror.AuthorizationFailure},
		{"service SAS: create queue", func() error { _, err := svcQueue(sas.IPRange{}).Create(ctx, nil); return err }, queueerror.AuthorizationFailure},
		{"service SAS: delete queue", func() error { _, err := svcQueue(sas.IPRange{}).Delete(ctx, nil); return err }, queueerror.AuthorizationFailure},
		{"service SAS: list", func() error { _, err := svcOnService.NewListQueuesPager(nil).NextPage(ctx); return err }, queueerror.AuthenticationFailed},
		{"service SAS: get service properties", func() error { _, err := svcOnService.GetServiceProperties(ctx, nil); return err }, queueerror.AuthenticationFailed},
		{"service SAS: set service properties", func() error { _, err := svcOnService.SetProperties(ctx, nil); return err }, queueerror.AuthenticationFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantCode(t, err, tc.code)
			wantStatus(t, err, http.StatusForbidden)
		})
	}
	// Nothing above changed anything.
	props, err := e.svc.NewQueueClient("authq").GetProperties(ctx, nil)
	if err != nil || *props.ApproximateMessagesCount != 0 {
		t.Fatalf("queue after refusals: %+v %v", props, err)
	}
	pol, err := e.svc.NewQueueClient("authq").GetAccessPolicy(ctx, nil)
	if err != nil || len(pol.SignedIdentifiers) != 0 {
		t.Fatalf("ACL after refusals: %+v %v", pol.SignedIdentifiers, err)
	}
	if _, err := e.srv.Service("devstoreaccount1").Queue("newq"); err == nil {
		t.Fatal("refused create made the queue")
	}

	// Service stats: a service SAS is refused on the secondary too.
	sec, err := azqueue.NewServiceClientWithNoCredential(e.hs.URL+"/devstoreaccount1-secondary/?"+svcQuery(sas.IPRange{}), clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, err = sec.GetStatistics(ctx, nil)
	wantCode(t, err, queueerror.AuthenticationFailed)
}

// TestSDKSASTimeWindows: the handler judges SAS start and expiry times,
// and stored access policies, by the service's (mock) clock.
func TestSDKSASTimeWindows(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	e.queue(t, "windows")
	now := e.clk.Now()

	t.Run("service SAS with a future start", func(t *testing.T) {
		q, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/windows?"+e.serviceSAS(t, sas.QueueSignatureValues{
			QueueName: "windows", StartTime: now.Add(time.Hour), ExpiryTime: now.Add(2 * time.Hour), Permissions: "r",
		}), clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.PeekMessages(ctx, nil)
		wantCode(t, err, queueerror.AuthenticationFailed)
		wantStatus(t, err, http.StatusForbidden)
		e.clk.Add(time.Hour) // the start is inclusive
		if _, err := q.PeekMessages(ctx, nil); err != nil {
			t.Fatalf("at the start time: %v", err)
		}
		e.clk.Add(time.Hour - time.Second)
		if _, err := q.PeekMessages(ctx, nil); err != nil {
			t.Fatalf("a second before expiry: %v", err)
		}
		e.clk.Add(time.Second) // the expiry is exclusive
		_, err = q.PeekMessages(ctx, nil)
		wantCode(t, err, queueerror.AuthenticationFailed)
		e.clk.Set(now)
	})

	t.Run("stored access policy expires", func(t *testing.T) {
		exp := now.Add(30 * time.Minute)
		if _, err := e.svc.NewQueueClient("windows").SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: []*azqueue.SignedIdentifier{
			{ID: to.Ptr("short"), AccessPolicy: &azqueue.AccessPolicy{Expiry: &exp, Permission: to.Ptr("ra")}},
		}}); err != nil {
			t.Fatal(err)
		}
		q, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/windows?"+e.serviceSAS(t, sas.QueueSignatureValues{
			QueueName: "windows", Identifier: "short",
		}), clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueMessage(ctx, "in time", nil); err != nil {
			t.Fatalf("within the policy: %v", err)
		}
		e.clk.Add(30 * time.Minute)
		_, err = q.EnqueueMessage(ctx, "too late", nil)
		wantCode(t, err, queueerror.AuthenticationFailed)
		wantStatus(t, err, http.StatusForbidden)
		e.clk.Set(now)
		props, err := e.svc.NewQueueClient("windows").GetProperties(ctx, nil)
		if err != nil || *props.ApproximateMessagesCount != 1 {
			t.Fatalf("count after the refused put: %+v %v", props, err)
		}
	})
}

// TestSDKSASOperationCycle runs a queue's whole life with each SAS kind:
// every operation the kind may call succeeds, the others are refused with
// the code the handler uses. Create and delete queue and the service
// properties always use the account SAS.
func TestSDKSASOperationCycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	exp := e.clk.Now().Add(time.Hour)
	acctQuery := e.accountSAS(t, sas.AccountSignatureValues{ExpiryTime: exp, Permissions: allAccountPermissions, ResourceTypes: "sco"})
	admin, err := azqueue.NewServiceClientWithNoCredential(e.endpoint+"/?"+acctQuery, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	svcQuery := e.serviceSAS(t, sas.QueueSignatureValues{QueueName: "cycle", ExpiryTime: exp, Permissions: "raup"})
	svcQueue, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/cycle?"+svcQuery, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		name    string
		q       *azqueue.QueueClient
		query   string
		refused map[string]queueerror.Code
	}{
		{"account SAS", admin.NewQueueClient("cycle"), acctQuery, nil},
		{"service SAS", svcQueue, svcQuery, map[string]queueerror.Code{
			"set metadata": queueerror.AuthorizationFailure,
			"clear":        queueerror.AuthorizationFailure,
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			q := k.q
			_, metadataRefused := k.refused["set metadata"]
			var id, receipt string
			steps := []struct {
				name string
				run  func() error
			}{
				{"create (account SAS)", func() error { _, err := admin.CreateQueue(ctx, "cycle", nil); return err }},
				{"set metadata", func() error {
					_, err := q.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: map[string]*string{"team": to.Ptr("blue")}})
					return err
				}},
				{"get metadata", func() error {
					p, err := q.GetProperties(ctx, nil)
					if err == nil && (*p.ApproximateMessagesCount != 0 || (p.Metadata["Team"] != nil) == metadataRefused) {
						t.Fatalf("properties %+v", p)
					}
					return err
				}},
				{"head metadata", func() error {
					resp, err := e.hs.Client().Head(e.endpoint + "/cycle?comp=metadata&" + k.query)
					if err != nil {
						return err
					}
					resp.Body.Close()
					if resp.StatusCode != 200 || resp.Header.Get("x-ms-approximate-messages-count") != "0" {
						t.Fatalf("HEAD metadata: %d %v", resp.StatusCode, resp.Header)
					}
					return nil
				}},
				{"put", func() error {
					put, err := q.EnqueueMessage(ctx, "cycle <1>", nil)
					if err == nil && len(put.Messages) != 1 {
						t.Fatalf("put %+v", put)
					}
					return err
				}},
				{"peek", func() error {
					p, err := q.PeekMessages(ctx, nil)
					if err == nil && (len(p.Messages) != 1 || *p.Messages[0].MessageText != "cycle <1>" || *p.Messages[0].DequeueCount != 0) {
						t.Fatalf("peek %+v", p.Messages)
					}
					return err
				}},
				{"get", func() error {
					g, err := q.DequeueMessage(ctx, nil)
					if err != nil {
						return err
					}
					if len(g.Messages) != 1 || *g.Messages[0].DequeueCount != 1 {
						t.Fatalf("get %+v", g.Messages)
					}
					id, receipt = *g.Messages[0].MessageID, *g.Messages[0].PopReceipt
					return nil
				}},
				{"update", func() error {
					u, err := q.UpdateMessage(ctx, id, receipt, "cycle <2>", &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(int32(0))})
					if err != nil {
						return err
					}
					if *u.PopReceipt == receipt {
						t.Fatal("update kept the receipt")
					}
					receipt = *u.PopReceipt
					p, err := q.PeekMessages(ctx, nil)
					if err != nil || len(p.Messages) != 1 || *p.Messages[0].MessageText != "cycle <2>" {
						t.Fatalf("peek after update: %+v %v", p, err)
					}
					return nil
				}},
				{"delete message", func() error {
					_, err := q.DeleteMessage(ctx, id, receipt, nil)
					if err == nil {
						if n := *must(admin.NewQueueClient("cycle").GetProperties(ctx, nil)).ApproximateMessagesCount; n != 0 {
							t.Fatalf("count after delete %d", n)
						}
					}
					return err
				}},
				{"clear", func() error {
					for i := 0; i < 3; i++ {
						if _, err := q.EnqueueMessage(ctx, "c", nil); err != nil {
							t.Fatal(err)
						}
					}
					_, err := q.ClearMessages(ctx, nil)
					n := *must(admin.NewQueueClient("cycle").GetProperties(ctx, nil)).ApproximateMessagesCount
					if (err == nil) != (n == 0) {
						t.Fatalf("clear said %v, count %d", err, n)
					}
					return err
				}},
				{"service properties (account SAS)", func() error {
					p, err := admin.GetServiceProperties(ctx, nil)
					if err != nil {
						return err
					}
					if _, err := admin.SetProperties(ctx, &azqueue.SetPropertiesOptions{MinuteMetrics: &azqueue.Metrics{Version: to.Ptr("1.0"), Enabled: to.Ptr(!*p.MinuteMetrics.Enabled),
						IncludeAPIs: to.Ptr(false), RetentionPolicy: &azqueue.RetentionPolicy{Enabled: to.Ptr(false)}}}); err != nil {
						return err
					}
					p2, err := admin.GetServiceProperties(ctx, nil)
					if err == nil && *p2.MinuteMetrics.Enabled == *p.MinuteMetrics.Enabled {
						t.Fatal("set properties changed nothing")
					}
					return err
				}},
				{"service stats on the secondary (account SAS)", func() error {
					sec, err := azqueue.NewServiceClientWithNoCredential(e.hs.URL+"/devstoreaccount1-secondary/?"+acctQuery, clientOptions())
					if err != nil {
						return err
					}
					st, err := sec.GetStatistics(ctx, nil)
					if err == nil && *st.GeoReplication.Status != "live" {
						t.Fatalf("stats %+v", st.GeoReplication)
					}
					return err
				}},
				{"delete queue (account SAS)", func() error { _, err := admin.DeleteQueue(ctx, "cycle", nil); return err }},
			}
			for _, s := range steps {
				ok := t.Run(s.name, func(t *testing.T) {
					err := s.run()
					if code, refused := k.refused[s.name]; refused {
						wantCode(t, err, code)
						wantStatus(t, err, http.StatusForbidden)
						return
					}
					if err != nil {
						t.Fatal(err)
					}
				})
				if !ok {
					break
				}
			}
			if _, err := e.srv.Service("devstoreaccount1").Queue("cycle"); err == nil {
				t.Fatal("queue left behind")
			}
		})
	}
}

// must returns v, for SDK calls whose failure the step reports anyway.
func must[T any](v T, _ error) T { return v }

// TestSDKGetSASURLOverTLS: the URLs GetSASURL makes are https-only
// (spr=https); over TLS the handler accepts them.
func TestSDKGetSASURLOverTLS(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	ts := httptest.NewTLSServer(e.srv)
	t.Cleanup(ts.Close)
	opts := func() *azqueue.ClientOptions {
		o := clientOptions()
		o.Transport = ts.Client()
		return o
	}
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(ts.URL+"/devstoreaccount1/", e.cred, opts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateQueue(ctx, "tlsq", nil); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	exp := e.clk.Now().Add(time.Hour)

	qu, err := svc.NewQueueClient("tlsq").GetSASURL(sas.QueuePermissions{Read: true, Add: true, Process: true}, exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	au, err := svc.GetSASURL(sas.AccountResourceTypes{Service: true, Container: true, Object: true}, sas.AccountPermissions{Read: true, List: true}, exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{qu, au} {
		if !strings.Contains(u, "spr=https&") || !strings.HasPrefix(u, "https://") {
			t.Fatalf("SAS URL %s", u)
		}
	}

	sq, err := azqueue.NewQueueClientWithNoCredential(qu, opts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sq.EnqueueMessage(ctx, "over tls", nil); err != nil {
		t.Fatalf("service SAS URL put: %v", err)
	}
	got, err := sq.DequeueMessage(ctx, nil)
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].MessageText != "over tls" {
		t.Fatalf("service SAS URL get: %+v %v", got, err)
	}

	ac, err := azqueue.NewServiceClientWithNoCredential(au, opts())
	if err != nil {
		t.Fatal(err)
	}
	p, err := ac.NewListQueuesPager(nil).NextPage(ctx)
	if err != nil || len(p.Queues) != 1 || *p.Queues[0].Name != "tlsq" {
		t.Fatalf("account SAS URL list: %+v %v", p, err)
	}
	if *p.ServiceEndpoint != ts.URL+"/devstoreaccount1/" {
		t.Fatalf("ServiceEndpoint %s", *p.ServiceEndpoint)
	}
	if _, err := ac.NewQueueClient("tlsq").GetProperties(ctx, nil); err != nil {
		t.Fatalf("account SAS URL get metadata: %v", err)
	}
	// The account SAS grants no write: put is refused after the TLS check.
	_, err = ac.NewQueueClient("tlsq").EnqueueMessage(ctx, "x", nil)
	wantCode(t, err, queueerror.AuthorizationPermissionMismatch)
}

// TestSDKQueueSASCannotManageTheQueue follows the Azure SDK for Go's own
// TestQueueGetSASURL and TestQueueGetSASURL2, which run against Azure: a
// queue's GetSASURL client, whatever its permissions, cannot create the
// queue (403 AuthorizationFailure, Azure's answer), nor delete it, set
// its metadata or clear it, which no queue SAS permission covers; one
// without r cannot read the metadata (403 AuthorizationPermissionMismatch:
// r would allow it). Raw requests get the same codes in Azure's XML.
func TestSDKQueueSASCannotManageTheQueue(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	ts := httptest.NewTLSServer(e.srv)
	t.Cleanup(ts.Close)
	// Each client gets options of its own: the SDK adds its credential's
	// policy to the options it is given.
	opts := func() *azqueue.ClientOptions {
		o := clientOptions()
		o.Transport = ts.Client()
		return o
	}
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(ts.URL+"/devstoreaccount1/", e.cred, opts())
	if err != nil {
		t.Fatal(err)
	}
	qc := svc.NewQueueClient("managed")
	start := time.Now().Add(-5 * time.Minute).UTC()
	sasClient := func(p sas.QueuePermissions) *azqueue.QueueClient {
		t.Helper()
		u, err := qc.GetSASURL(p, time.Now().Add(time.Hour), &azqueue.GetSASURLOptions{StartTime: &start})
		if err != nil {
			t.Fatal(err)
		}
		c, err := azqueue.NewQueueClientWithNoCredential(u, opts())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// TestQueueGetSASURL: read and add, before the queue exists.
	_, err = sasClient(sas.QueuePermissions{Read: true, Add: true}).Create(ctx, &azqueue.CreateOptions{Metadata: map[string]*string{"Foo": to.Ptr("Foovalue")}})
	wantCode(t, err, queueerror.AuthorizationFailure)
	wantStatus(t, err, http.StatusForbidden)
	if _, err := e.srv.Service("devstoreaccount1").Queue("managed"); err == nil {
		t.Fatal("a refused create made the queue")
	}

	// TestQueueGetSASURL2: add only cannot read the metadata; every
	// permission still cannot create the queue.
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err = sasClient(sas.QueuePermissions{Add: true}).GetProperties(ctx, nil)
	wantCode(t, err, queueerror.AuthorizationPermissionMismatch)
	all := sasClient(sas.QueuePermissions{Read: true, Add: true, Update: true, Process: true})
	if _, err := all.GetProperties(ctx, nil); err != nil {
		t.Fatalf("read metadata with r: %v", err)
	}
	for name, call := range map[string]func() error{
		"create":       func() error { _, err := all.Create(ctx, nil); return err },
		"delete":       func() error { _, err := all.Delete(ctx, nil); return err },
		"set metadata": func() error { _, err := all.SetMetadata(ctx, nil); return err },
		"clear":        func() error { _, err := all.ClearMessages(ctx, nil); return err },
		"get ACL":      func() error { _, err := all.GetAccessPolicy(ctx, nil); return err },
	} {
		err := call()
		if !queueerror.HasCode(err, queueerror.AuthorizationFailure) {
			t.Errorf("%s with a queue SAS: %v, want AuthorizationFailure", name, err)
		}
	}
	if _, err := qc.GetProperties(ctx, nil); err != nil {
		t.Fatalf("the queue after the refusals: %v", err)
	}

	// Raw, the error document names the operation in its detail.
	u, err := qc.GetSASURL(sas.QueuePermissions{Read: true, Add: true, Update: true, Process: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, u, nil)
	req.Header.Set("x-ms-version", "2020-02-10")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("x-ms-error-code") != "AuthorizationFailure" ||
		!strings.Contains(string(body), "<Code>AuthorizationFailure</Code><Message>This request is not authorized to perform this operation.") ||
		!strings.Contains(string(body), "<AuthenticationErrorDetail>CreateQueue cannot be authorized with a service SAS for a queue") {
		t.Fatalf("raw create with a queue SAS: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
}

// TestSDKCORSOnActualRequests: an actual request carrying Origin gets
// the CORS headers of the matching rule whatever authorized it.
func TestSDKCORSOnActualRequests(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	e.queue(t, "corsq")
	if _, err := e.svc.SetProperties(ctx, &azqueue.SetPropertiesOptions{CORS: []*azqueue.CORSRule{{
		AllowedOrigins: to.Ptr("https://app.example"), AllowedMethods: to.Ptr("GET"), AllowedHeaders: to.Ptr("x-ms-*"),
		ExposedHeaders: to.Ptr("x-ms-request-id"), MaxAgeInSeconds: to.Ptr(int32(60)),
	}}}); err != nil {
		t.Fatal(err)
	}
	exp := e.clk.Now().Add(time.Hour)
	acctSAS, err := azqueue.NewServiceClientWithNoCredential(e.endpoint+"/?"+e.accountSAS(t, sas.AccountSignatureValues{
		ExpiryTime: exp, Permissions: "r", ResourceTypes: "o"}), clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	svcSAS, err := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/corsq?"+e.serviceSAS(t, sas.QueueSignatureValues{
		QueueName: "corsq", ExpiryTime: exp, Permissions: "r"}), clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		q    *azqueue.QueueClient
	}{
		{"shared key", e.svc.NewQueueClient("corsq")},
		{"account SAS", acctSAS.NewQueueClient("corsq")},
		{"service SAS", svcSAS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			c := policy.WithCaptureResponse(policy.WithHTTPHeader(ctx, http.Header{"Origin": {"https://app.example"}}), &resp)
			if _, err := tc.q.PeekMessages(c, nil); err != nil {
				t.Fatal(err)
			}
			h := resp.Header
			if h.Get("Access-Control-Allow-Origin") != "https://app.example" || h.Get("Access-Control-Expose-Headers") != "x-ms-request-id" ||
				h.Get("Vary") != "Origin" || h.Get("Access-Control-Allow-Credentials") != "true" {
				t.Fatalf("CORS headers %v", h)
			}
		})
	}
}

// TestSDKAnonymousOption: with AllowAnonymous, a client without
// credentials can call every operation, except writes on the secondary.
func TestSDKAnonymousOption(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{AllowAnonymous: true})
	anon, err := azqueue.NewServiceClientWithNoCredential(e.endpoint+"/", clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	q := anon.NewQueueClient("anonq")
	exp := e.clk.Now().Add(time.Hour)
	var id, receipt string
	steps := []struct {
		name string
		run  func() error
	}{
		{"create", func() error { _, err := anon.CreateQueue(ctx, "anonq", nil); return err }},
		{"set metadata", func() error {
			_, err := q.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: map[string]*string{"k": to.Ptr("v")}})
			return err
		}},
		{"get metadata", func() error {
			p, err := q.GetProperties(ctx, nil)
			if err == nil && *p.Metadata["K"] != "v" {
				t.Fatalf("metadata %v", p.Metadata)
			}
			return err
		}},
		{"set ACL", func() error {
			_, err := q.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: []*azqueue.SignedIdentifier{
				{ID: to.Ptr("p"), AccessPolicy: &azqueue.AccessPolicy{Expiry: &exp, Permission: to.Ptr("r")}}}})
			return err
		}},
		{"get ACL", func() error {
			p, err := q.GetAccessPolicy(ctx, nil)
			if err == nil && len(p.SignedIdentifiers) != 1 {
				t.Fatalf("acl %+v", p.SignedIdentifiers)
			}
			return err
		}},
		{"put", func() error { _, err := q.EnqueueMessage(ctx, "anon", nil); return err }},
		{"peek", func() error { _, err := q.PeekMessages(ctx, nil); return err }},
		{"get", func() error {
			g, err := q.DequeueMessage(ctx, nil)
			if err == nil {
				id, receipt = *g.Messages[0].MessageID, *g.Messages[0].PopReceipt
			}
			return err
		}},
		{"update", func() error {
			u, err := q.UpdateMessage(ctx, id, receipt, "anon 2", nil)
			if err == nil {
				receipt = *u.PopReceipt
			}
			return err
		}},
		{"delete message", func() error { _, err := q.DeleteMessage(ctx, id, receipt, nil); return err }},
		{"clear", func() error { _, err := q.ClearMessages(ctx, nil); return err }},
		{"list", func() error {
			p, err := anon.NewListQueuesPager(nil).NextPage(ctx)
			if err == nil && len(p.Queues) != 1 {
				t.Fatalf("list %+v", p.Queues)
			}
			return err
		}},
		{"get service properties", func() error { _, err := anon.GetServiceProperties(ctx, nil); return err }},
		{"set service properties", func() error { _, err := anon.SetProperties(ctx, nil); return err }},
		{"stats on the secondary", func() error {
			sec, err := azqueue.NewServiceClientWithNoCredential(e.hs.URL+"/devstoreaccount1-secondary/", clientOptions())
			if err != nil {
				return err
			}
			_, err = sec.GetStatistics(ctx, nil)
			return err
		}},
		{"delete queue", func() error { _, err := anon.DeleteQueue(ctx, "anonq", nil); return err }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	if _, err := e.srv.Service("devstoreaccount1").Queue("anonq"); err == nil {
		t.Fatal("queue left behind")
	}
}
