package sdktest_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/sas"
	"github.com/azqlib/azq/server"
	"github.com/azqlib/azq/server/internal/sastest"
)

// secondKey is a second valid key of the account, for the rotation case.
const secondKey = "dGhpcyBpcyBhIHNlY29uZCBhY2NvdW50IGtleSBmb3IgdGVzdHMgb25seSEhISE="

// The SDK takes the development account's connection string as is.
func TestDevelopmentAccountConnectionStringInTheSDK(t *testing.T) {
	cs := server.DevelopmentAccount().ConnectionString("http://127.0.0.1:10001/devstoreaccount1")
	c, err := azqueue.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.URL(), "http://127.0.0.1:10001/devstoreaccount1") {
		t.Fatalf("SDK parsed endpoint %q", c.URL())
	}
}

// exerciseQueue runs every queue-level operation the SDK offers once, on
// a message it put and took when it could, and returns the SDK's error
// per operation.
func exerciseQueue(ctx context.Context, qc *azqueue.QueueClient) map[string]error {
	out := map[string]error{}
	_, out["CreateQueue"] = qc.Create(ctx, &azqueue.CreateOptions{Metadata: map[string]*string{"team": ptr("a b")}})
	_, out["SetQueueMetadata"] = qc.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: map[string]*string{"Mixed": ptr("v"), "other": ptr("x,y")}})
	_, out["GetQueueMetadata"] = qc.GetProperties(ctx, nil)
	_, out["PutMessage"] = qc.EnqueueMessage(ctx, "hello <world> & ünïcode", &azqueue.EnqueueMessageOptions{TimeToLive: ptr(int32(60)), VisibilityTimeout: ptr(int32(0))})
	id, receipt := "m1", "AgAAAAMAAAAAAAAAxVkNR+xc2gE="
	got, err := qc.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: ptr(int32(5)), VisibilityTimeout: ptr(int32(30))})
	out["GetMessages"] = err
	if err == nil && len(got.Messages) > 0 {
		id, receipt = *got.Messages[0].MessageID, *got.Messages[0].PopReceipt
	}
	_, out["PeekMessages"] = qc.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: ptr(int32(2))})
	updated, err := qc.UpdateMessage(ctx, id, receipt, "new text", &azqueue.UpdateMessageOptions{VisibilityTimeout: ptr(int32(10))})
	out["UpdateMessage"] = err
	if err == nil && updated.PopReceipt != nil {
		receipt = *updated.PopReceipt
	}
	_, out["DeleteMessage"] = qc.DeleteMessage(ctx, id, receipt, nil)
	_, out["ClearMessages"] = qc.ClearMessages(ctx, nil)
	_, out["GetQueueACL"] = qc.GetAccessPolicy(ctx, nil)
	_, out["SetQueueACL"] = qc.SetAccessPolicy(ctx, nil)
	_, out["DeleteQueue"] = qc.Delete(ctx, nil)
	return out
}

func sdkErrorCode(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	if err != nil {
		return "non-response error: " + err.Error()
	}
	return ""
}

// TestSDKSharedKeyEndToEnd sends real requests signed by the SDK's Shared
// Key policy (with metadata, bodies, query parameters and pop receipts
// that need escaping) to the server and checks that it accepts exactly
// those signed with a key of the account.
func TestSDKSharedKeyEndToEnd(t *testing.T) {
	ctx := context.Background()
	acct := server.DevelopmentAccount()
	acct.Keys = append(acct.Keys, secondKey)
	e := newEnv(t, server.Options{Accounts: []server.Account{acct}})

	for i, key := range acct.Keys {
		cred, err := azqueue.NewSharedKeyCredential(acct.Name, key)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := azqueue.NewServiceClientWithSharedKeyCredential(e.endpoint, cred, clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		for op, err := range exerciseQueue(ctx, svc.NewQueueClient("myqueue")) {
			if err != nil {
				t.Errorf("key %d, %s: SDK-signed request refused: %v", i, op, err)
			}
		}
		if _, err := svc.GetServiceProperties(ctx, nil); err != nil {
			t.Errorf("GetServiceProperties: %v", err)
		}
		if _, err := svc.SetProperties(ctx, nil); err != nil {
			t.Errorf("SetProperties: %v", err)
		}
		pager := svc.NewListQueuesPager(&azqueue.ListQueuesOptions{Prefix: ptr("my"), Include: azqueue.ListQueuesInclude{Metadata: true}})
		if _, err := pager.NextPage(ctx); err != nil {
			t.Errorf("ListQueues: %v", err)
		}
	}

	// A key the account does not have: every operation is refused, and the
	// answer explains the mismatch with the string to sign.
	bad, _ := azqueue.NewSharedKeyCredential(acct.Name, "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IQ==")
	svc, _ := azqueue.NewServiceClientWithSharedKeyCredential(e.endpoint, bad, clientOptions())
	for op, err := range exerciseQueue(ctx, svc.NewQueueClient("myqueue")) {
		if got := sdkErrorCode(err); got != "AuthenticationFailed" {
			t.Errorf("%s with wrong key: SDK saw %q", op, got)
		}
	}
	_, err := svc.NewQueueClient("myqueue").EnqueueMessage(ctx, "x", nil)
	if msg := err.Error(); !strings.Contains(msg, "is not the same as any computed signature") || !strings.Contains(msg, "/devstoreaccount1/devstoreaccount1/myqueue/messages") {
		t.Errorf("the answer should explain the mismatch and show the string to sign: %v", err)
	}

	// Secondary (path-style "-secondary"): reads pass, writes are refused
	// after authentication.
	if _, err := e.svc.CreateQueue(ctx, "myqueue", nil); err != nil {
		t.Fatal(err)
	}
	good, _ := azqueue.NewSharedKeyCredential(acct.Name, acct.Keys[0])
	sec, _ := azqueue.NewQueueClientWithSharedKeyCredential(e.hs.URL+"/devstoreaccount1-secondary/myqueue", good, clientOptions())
	if _, err := sec.GetProperties(ctx, nil); err != nil {
		t.Errorf("secondary read: %v", err)
	}
	if _, err := sec.PeekMessages(ctx, nil); err != nil {
		t.Errorf("secondary peek: %v", err)
	}
	if _, err := sec.Create(ctx, nil); sdkErrorCode(err) != "InsufficientAccountPermissions" {
		t.Errorf("secondary write: %v", err)
	}
	if _, err := sec.EnqueueMessage(ctx, "x", nil); sdkErrorCode(err) != "InsufficientAccountPermissions" {
		t.Errorf("secondary put: %v", err)
	}

	// No credential at all.
	anon, _ := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/myqueue", clientOptions())
	if _, err := anon.GetProperties(ctx, nil); sdkErrorCode(err) != "NoAuthenticationInformation" {
		t.Errorf("anonymous: %v", err)
	}
}

// TestSDKSASEndToEnd sends requests carrying SAS tokens generated by the
// SDK's sas package through the SDK's clients.
func TestSDKSASEndToEnd(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, server.Options{})
	now := e.clk.Now()
	if _, err := e.svc.CreateQueue(ctx, "myqueue", nil); err != nil {
		t.Fatal(err)
	}

	qsas, err := sas.QueueSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, StartTime: now.Add(-time.Hour), ExpiryTime: now.Add(time.Hour),
		Permissions: (&sas.QueuePermissions{Read: true, Add: true, Update: true, Process: true}).String(), QueueName: "myqueue",
	}.SignWithSharedKey(e.cred)
	if err != nil {
		t.Fatal(err)
	}
	qc, _ := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/myqueue?"+qsas.Encode(), clientOptions())
	want := map[string]string{
		"GetQueueMetadata": "", "PutMessage": "", "GetMessages": "", "PeekMessages": "", "UpdateMessage": "", "DeleteMessage": "",
		"CreateQueue": "AuthorizationFailure", "DeleteQueue": "AuthorizationFailure",
		"SetQueueMetadata": "AuthorizationFailure", "ClearMessages": "AuthorizationFailure",
		"GetQueueACL": "AuthorizationFailure", "SetQueueACL": "AuthorizationFailure",
	}
	for op, err := range exerciseQueue(ctx, qc) {
		if got := sdkErrorCode(err); got != want[op] {
			t.Errorf("service SAS %s: got %q want %q", op, got, want[op])
		}
	}
	// The same token on another queue fails its signature.
	other, _ := azqueue.NewQueueClientWithNoCredential(e.endpoint+"/otherqueue?"+qsas.Encode(), clientOptions())
	if _, err := other.PeekMessages(ctx, nil); sdkErrorCode(err) != "AuthenticationFailed" {
		t.Errorf("service SAS on another queue: %v", err)
	}

	asas, err := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: now.Add(time.Hour),
		Permissions:   (&sas.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true, Process: true}).String(),
		ResourceTypes: (&sas.AccountResourceTypes{Service: true, Container: true, Object: true}).String(),
	}.SignWithSharedKey(e.cred)
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := azqueue.NewServiceClientWithNoCredential(e.endpoint+"?"+asas.Encode(), clientOptions())
	want = map[string]string{"GetQueueACL": "AuthorizationFailure", "SetQueueACL": "AuthorizationFailure"}
	for op, err := range exerciseQueue(ctx, svc.NewQueueClient("accountq")) {
		if got := sdkErrorCode(err); got != want[op] {
			t.Errorf("account SAS %s: got %q want %q", op, got, want[op])
		}
	}
	if _, err := svc.NewListQueuesPager(nil).NextPage(ctx); err != nil {
		t.Errorf("account SAS list: %v", err)
	}
}

// Package server's SAS tests sign with server/internal/sastest, which
// makes what the SDK's sas package makes: the same query, signature and
// all, for service and account SAS of every field those tests set.
func TestSASTestSignsAsTheSDK(t *testing.T) {
	key := server.DevelopmentAccount().Keys[0]
	sdkCred, err := azqueue.NewSharedKeyCredential("devstoreaccount1", key)
	if err != nil {
		t.Fatal(err)
	}
	ourCred, err := sastest.NewSharedKeyCredential("devstoreaccount1", key)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 5, 17, 12, 0, 0, 0, time.UTC)
	ip := func(s string) net.IP { return net.ParseIP(s).To4() }
	type queueCase struct {
		name string
		sdk  sas.QueueSignatureValues
		our  sastest.QueueSignatureValues
	}
	for _, c := range []queueCase{
		{"permissions out of order, both times",
			sas.QueueSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, StartTime: at.Add(-time.Hour), ExpiryTime: at.Add(time.Hour), Permissions: "puar", QueueName: "myqueue"},
			sastest.QueueSignatureValues{Protocol: sastest.ProtocolHTTPSandHTTP, StartTime: at.Add(-time.Hour), ExpiryTime: at.Add(time.Hour), Permissions: "puar", QueueName: "myqueue"}},
		{"https, one address",
			sas.QueueSignatureValues{Protocol: sas.ProtocolHTTPS, ExpiryTime: at, Permissions: "r", IPRange: sas.IPRange{Start: ip("10.0.0.1")}, QueueName: "q"},
			sastest.QueueSignatureValues{Protocol: sastest.ProtocolHTTPS, ExpiryTime: at, Permissions: "r", IPRange: sastest.IPRange{Start: ip("10.0.0.1")}, QueueName: "q"}},
		{"address range, version",
			sas.QueueSignatureValues{Version: "2015-04-05", ExpiryTime: at, Permissions: "ra", IPRange: sas.IPRange{Start: ip("192.0.2.1"), End: ip("192.0.2.20")}, QueueName: "myqueue"},
			sastest.QueueSignatureValues{Version: "2015-04-05", ExpiryTime: at, Permissions: "ra", IPRange: sastest.IPRange{Start: ip("192.0.2.1"), End: ip("192.0.2.20")}, QueueName: "myqueue"}},
		{"stored policy alone",
			sas.QueueSignatureValues{Identifier: "full", QueueName: "gone"},
			sastest.QueueSignatureValues{Identifier: "full", QueueName: "gone"}},
		{"stored policy and permissions",
			sas.QueueSignatureValues{Identifier: "read", Permissions: "r", QueueName: "myqueue"},
			sastest.QueueSignatureValues{Identifier: "read", Permissions: "r", QueueName: "myqueue"}},
	} {
		want, err := c.sdk.SignWithSharedKey(sdkCred)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.our.SignWithSharedKey(ourCred)
		if err != nil {
			t.Fatal(err)
		}
		if got.Encode() != want.Encode() {
			t.Errorf("service SAS, %s:\n got %s\nwant %s", c.name, got.Encode(), want.Encode())
		}
	}
	if got, want := (&sastest.QueuePermissions{Read: true, Add: true, Update: true, Process: true}).String(),
		(&sas.QueuePermissions{Read: true, Add: true, Update: true, Process: true}).String(); got != want {
		t.Errorf("queue permissions %q, want %q", got, want)
	}

	type accountCase struct {
		name string
		sdk  sas.AccountSignatureValues
		our  sastest.AccountSignatureValues
	}
	for _, c := range []accountCase{
		{"every permission, both times",
			sas.AccountSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, StartTime: at.Add(-time.Hour), ExpiryTime: at.Add(time.Hour), Permissions: "puclarwd", ResourceTypes: "ocs"},
			sastest.AccountSignatureValues{Protocol: sastest.ProtocolHTTPSandHTTP, StartTime: at.Add(-time.Hour), ExpiryTime: at.Add(time.Hour), Permissions: "puclarwd", ResourceTypes: "ocs"}},
		{"https, address range, version",
			sas.AccountSignatureValues{Version: "2019-02-02", Protocol: sas.ProtocolHTTPS, ExpiryTime: at, Permissions: "r", ResourceTypes: "o", IPRange: sas.IPRange{Start: ip("192.0.2.1"), End: ip("192.0.2.9")}},
			sastest.AccountSignatureValues{Version: "2019-02-02", Protocol: sastest.ProtocolHTTPS, ExpiryTime: at, Permissions: "r", ResourceTypes: "o", IPRange: sastest.IPRange{Start: ip("192.0.2.1"), End: ip("192.0.2.9")}}},
	} {
		want, err := c.sdk.SignWithSharedKey(sdkCred)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.our.SignWithSharedKey(ourCred)
		if err != nil {
			t.Fatal(err)
		}
		if got.Encode() != want.Encode() {
			t.Errorf("account SAS, %s:\n got %s\nwant %s", c.name, got.Encode(), want.Encode())
		}
	}
	sdkAll := &sas.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true, Process: true}
	ourAll := &sastest.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true, Process: true}
	if got, want := ourAll.String(), sdkAll.String(); got != want {
		t.Errorf("account permissions %q, want %q", got, want)
	}
	if got, want := (&sastest.AccountResourceTypes{Service: true, Container: true, Object: true}).String(),
		(&sas.AccountResourceTypes{Service: true, Container: true, Object: true}).String(); got != want {
		t.Errorf("resource types %q, want %q", got, want)
	}
}
