package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	sas "github.com/azqlib/azq/server/internal/sastest"
	"github.com/benbjohnson/clock"
)

// testNow is the service clock of every test: fixed, and deliberately far
// from the real clock, so that nothing may depend on wall time.
var testNow = time.Date(2031, 5, 17, 12, 0, 0, 0, time.UTC)

// otherKey is a second valid key, for rotation and wrong-key cases.
const otherKey = "dGhpcyBpcyBhIHNlY29uZCBhY2NvdW50IGtleSBmb3IgdGVzdHMgb25seSEhISE="

// wantErr checks that err is an *azq.Error with the code and status, or
// that it is nil when code is "".
func wantErr(t *testing.T, err error, code string, status int) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("want success, got %v (details %v)", err, details(err))
		}
		return
	}
	var ae *azq.Error
	if !errors.As(err, &ae) {
		t.Fatalf("want %s/%d, got %T %v", code, status, err, err)
	}
	if string(ae.Code) != code || ae.StatusCode != status {
		t.Fatalf("want %s/%d, got %s/%d: %s %v", code, status, ae.Code, ae.StatusCode, ae.Message, ae.Details)
	}
}

func details(err error) []azq.Detail {
	var ae *azq.Error
	if errors.As(err, &ae) {
		return ae.Details
	}
	return nil
}

// newAuthRequest builds an authRequest for a path-style emulator URL on
// the development account.
func newAuthRequest(method, target string, op operation, queue string) authRequest {
	r := httptest.NewRequest(method, "http://127.0.0.1:10001"+target, nil)
	r.RemoteAddr = "192.0.2.10:50000"
	acct := DevelopmentAccount()
	return authRequest{r: r, account: &acct, keys: acct.keyBytes(), queue: queue, op: op, now: testNow}
}

// signSharedKey signs r as the documentation describes, for cases the SDK
// cannot produce (Shared Key Lite, tampering after signing). The SDK's
// own signer is exercised end to end in TestSDKSharedKeyEndToEnd.
func signSharedKey(r *http.Request, account, key string, lite bool) {
	var hdrs []string
	for k := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
			hdrs = append(hdrs, lk+":"+r.Header.Get(k)+"\n")
		}
	}
	sort.Strings(hdrs)
	ch := strings.Join(hdrs, "")
	res := "/" + account + r.URL.EscapedPath()
	var sts string
	if lite {
		if c := r.URL.Query().Get("comp"); c != "" {
			res += "?comp=" + c
		}
		sts = strings.Join([]string{r.Method, r.Header.Get("Content-MD5"), r.Header.Get("Content-Type"), "", ""}, "\n") + ch + res
	} else {
		q := r.URL.Query()
		var names []string
		for n := range q {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			res += "\n" + n + ":" + strings.Join(q[n], ",")
		}
		cl := r.Header.Get("Content-Length")
		if cl == "0" {
			cl = ""
		}
		sts = strings.Join([]string{r.Method, "", "", cl, "", r.Header.Get("Content-Type"), "", "", "", "", "", "", ""}, "\n") + ch + res
	}
	keyb := (&Account{Keys: []string{key}}).keyBytes()[0]
	scheme := "SharedKey "
	if lite {
		scheme = "SharedKeyLite "
	}
	r.Header.Set("Authorization", scheme+account+":"+sign(keyb.raw, sts))
}

func TestDevelopmentAccount(t *testing.T) {
	a := DevelopmentAccount()
	if a.Name != "devstoreaccount1" || len(a.Keys) != 1 || a.Keys[0] != developmentAccountKey {
		t.Fatalf("unexpected development account %+v", a)
	}
	cs := a.ConnectionString("http://127.0.0.1:10001/devstoreaccount1")
	want := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + developmentAccountKey +
		";QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"
	if cs != want {
		t.Fatalf("connection string\n got %s\nwant %s", cs, want)
	}
	// That the SDK takes it as is, server/sdktest checks.
	if got := (Account{Name: "x"}).ConnectionString("https://h/x"); got != "DefaultEndpointsProtocol=https;AccountName=x;QueueEndpoint=https://h/x;" {
		t.Fatalf("keyless connection string %q", got)
	}
}

func TestOperationString(t *testing.T) {
	if opPutMessage.String() != "PutMessage" || opGetQueueMetadata.String() != "GetQueueMetadata" {
		t.Fatal("operation names")
	}
	if operation(0).String() != "UnknownOperation" || operation(999).String() != "UnknownOperation" {
		t.Fatal("unknown operation names")
	}
	for op := opListQueues; op <= opUpdateMessage; op++ {
		if op.String() == "" || op.String() == "UnknownOperation" {
			t.Fatalf("operation %d has no name", int(op))
		}
	}
}

// --- SAS tables ------------------------------------------------------------

func devCred(t *testing.T, key string) *sas.SharedKeyCredential {
	t.Helper()
	c, err := sas.NewSharedKeyCredential("devstoreaccount1", key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func queueSAS(t *testing.T, v sas.QueueSignatureValues, key string) string {
	t.Helper()
	if v.QueueName == "" {
		v.QueueName = "myqueue"
	}
	p, err := v.SignWithSharedKey(devCred(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return p.Encode()
}

func accountSAS(t *testing.T, v sas.AccountSignatureValues, key string) string {
	t.Helper()
	p, err := v.SignWithSharedKey(devCred(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return p.Encode()
}

// tamperSig changes one character of the signature.
func tamperSig(t *testing.T, query string) string {
	t.Helper()
	q, _ := url.ParseQuery(query)
	sig := []byte(q.Get("sig"))
	if sig[3] == 'A' {
		sig[3] = 'B'
	} else {
		sig[3] = 'A'
	}
	q.Set("sig", string(sig))
	return q.Encode()
}

// withoutParam removes a parameter from a query string.
func withoutParam(query, name string) string {
	q, _ := url.ParseQuery(query)
	q.Del(name)
	return q.Encode()
}

// opTarget is a request line for each operation on path-style URLs.
var opTarget = map[operation][2]string{
	opListQueues:           {"GET", "/devstoreaccount1/?comp=list"},
	opGetServiceProperties: {"GET", "/devstoreaccount1/?restype=service&comp=properties"},
	opSetServiceProperties: {"PUT", "/devstoreaccount1/?restype=service&comp=properties"},
	opGetServiceStats:      {"GET", "/devstoreaccount1/?restype=service&comp=stats"},
	opCreateQueue:          {"PUT", "/devstoreaccount1/myqueue"},
	opDeleteQueue:          {"DELETE", "/devstoreaccount1/myqueue"},
	opGetQueueMetadata:     {"GET", "/devstoreaccount1/myqueue?comp=metadata"},
	opSetQueueMetadata:     {"PUT", "/devstoreaccount1/myqueue?comp=metadata"},
	opGetQueueACL:          {"GET", "/devstoreaccount1/myqueue?comp=acl"},
	opSetQueueACL:          {"PUT", "/devstoreaccount1/myqueue?comp=acl"},
	opPutMessage:           {"POST", "/devstoreaccount1/myqueue/messages"},
	opGetMessages:          {"GET", "/devstoreaccount1/myqueue/messages"},
	opPeekMessages:         {"GET", "/devstoreaccount1/myqueue/messages?peekonly=true"},
	opDeleteMessage:        {"DELETE", "/devstoreaccount1/myqueue/messages/m1?popreceipt=abc"},
	opClearMessages:        {"DELETE", "/devstoreaccount1/myqueue/messages"},
	opUpdateMessage:        {"PUT", "/devstoreaccount1/myqueue/messages/m1?popreceipt=abc&visibilitytimeout=1"},
}

// sasRequest builds the request for op with the SAS query appended.
func sasRequest(op operation, sasQuery string) authRequest {
	mt := opTarget[op]
	target := mt[1]
	if strings.Contains(target, "?") {
		target += "&" + sasQuery
	} else {
		target += "?" + sasQuery
	}
	queue := ""
	if segs := strings.Split(strings.SplitN(mt[1], "?", 2)[0], "/"); len(segs) > 2 && segs[2] != "" {
		queue = segs[2]
	}
	return newAuthRequest(mt[0], target, op, queue)
}

func TestServiceSAS(t *testing.T) {
	base := sas.QueueSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, StartTime: testNow.Add(-time.Hour), ExpiryTime: testNow.Add(time.Hour),
		Permissions: "raup",
	}
	with := func(f func(*sas.QueueSignatureValues)) sas.QueueSignatureValues { v := base; f(&v); return v }
	valid := queueSAS(t, base, developmentAccountKey)

	type tc struct {
		name   string
		query  string
		op     operation
		mod    func(*authRequest)
		code   string
		status int
	}
	cases := []tc{
		{name: "peek", query: valid, op: opPeekMessages},
		{name: "metadata", query: valid, op: opGetQueueMetadata},
		{name: "put", query: valid, op: opPutMessage},
		{name: "get", query: valid, op: opGetMessages},
		{name: "delete message", query: valid, op: opDeleteMessage},
		{name: "update", query: valid, op: opUpdateMessage},
		{name: "second key", query: queueSAS(t, base, otherKey), op: opPeekMessages, mod: func(a *authRequest) {
			a.account.Keys = []string{developmentAccountKey, otherKey}
			a.keys = a.account.keyBytes()
		}},
		{name: "tampered signature", query: tamperSig(t, valid), op: opPeekMessages, code: "AuthenticationFailed", status: 403},
		{name: "wrong key", query: queueSAS(t, base, otherKey), op: opPeekMessages, code: "AuthenticationFailed", status: 403},
		{name: "expired", query: valid, op: opPeekMessages, mod: func(a *authRequest) { a.now = testNow.Add(2 * time.Hour) }, code: "AuthenticationFailed", status: 403},
		{name: "expiry is exclusive", query: valid, op: opPeekMessages, mod: func(a *authRequest) { a.now = testNow.Add(time.Hour) }, code: "AuthenticationFailed", status: 403},
		{name: "not yet valid", query: valid, op: opPeekMessages, mod: func(a *authRequest) { a.now = testNow.Add(-2 * time.Hour) }, code: "AuthenticationFailed", status: 403},
		{name: "start is inclusive", query: valid, op: opPeekMessages, mod: func(a *authRequest) { a.now = testNow.Add(-time.Hour) }},
		{name: "missing permission", query: queueSAS(t, with(func(v *sas.QueueSignatureValues) { v.Permissions = "r" }), developmentAccountKey), op: opPutMessage, code: "AuthorizationPermissionMismatch", status: 403},
		{name: "update needs u", query: queueSAS(t, with(func(v *sas.QueueSignatureValues) { v.Permissions = "rap" }), developmentAccountKey), op: opUpdateMessage, code: "AuthorizationPermissionMismatch", status: 403},
		{name: "wrong queue", query: valid, op: opPeekMessages, mod: func(a *authRequest) {
			a.queue = "otherqueue"
			a.r = httptest.NewRequest("GET", "http://127.0.0.1:10001/devstoreaccount1/otherqueue/messages?peekonly=true&"+valid, nil)
		}, code: "AuthenticationFailed", status: 403},
		{name: "service-level op", query: valid, op: opListQueues, code: "AuthenticationFailed", status: 403},
		{name: "https only over http", query: queueSAS(t, with(func(v *sas.QueueSignatureValues) { v.Protocol = sas.ProtocolHTTPS }), developmentAccountKey), op: opPeekMessages, code: "AuthorizationProtocolMismatch", status: 403},
		{name: "https only over https", query: queueSAS(t, with(func(v *sas.QueueSignatureValues) { v.Protocol = sas.ProtocolHTTPS }), developmentAccountKey), op: opPeekMessages, mod: func(a *authRequest) { a.r.TLS = &tls.ConnectionState{} }},
		{name: "ip mismatch", query: queueSAS(t, with(func(v *sas.QueueSignatureValues) { v.IPRange = sas.IPRange{Start: []byte{10, 0, 0, 1}} }), developmentAccountKey), op: opPeekMessages, code: "AuthorizationSourceIPMismatch", status: 403},
		{name: "ip range match", query: queueSAS(t, with(func(v *sas.QueueSignatureValues) {
			v.IPRange = sas.IPRange{Start: []byte{192, 0, 2, 1}, End: []byte{192, 0, 2, 20}}
		}), developmentAccountKey), op: opPeekMessages},
		{name: "ip range mismatch", query: queueSAS(t, with(func(v *sas.QueueSignatureValues) {
			v.IPRange = sas.IPRange{Start: []byte{192, 0, 2, 11}, End: []byte{192, 0, 2, 20}}
		}), developmentAccountKey), op: opPeekMessages, code: "AuthorizationSourceIPMismatch", status: 403},
		{name: "create queue", query: valid, op: opCreateQueue, code: "AuthorizationFailure", status: 403},
		{name: "delete queue", query: valid, op: opDeleteQueue, code: "AuthorizationFailure", status: 403},
		{name: "set metadata", query: valid, op: opSetQueueMetadata, code: "AuthorizationFailure", status: 403},
		{name: "clear", query: valid, op: opClearMessages, code: "AuthorizationFailure", status: 403},
		{name: "acl", query: valid, op: opSetQueueACL, code: "AuthorizationFailure", status: 403},
		{name: "secondary read", query: valid, op: opPeekMessages, mod: func(a *authRequest) { a.secondary = true }},
		{name: "secondary write", query: valid, op: opPutMessage, mod: func(a *authRequest) { a.secondary = true }, code: "InsufficientAccountPermissions", status: 403},
		{name: "missing sv", query: withoutParam(valid, "sv"), op: opPeekMessages, code: "AuthenticationFailed", status: 403},
		{name: "bad permission letter", query: strings.Replace(valid, "sp=raup", "sp=rz", 1), op: opPeekMessages, code: "AuthenticationFailed", status: 403},
		{name: "bad expiry", query: strings.Replace(valid, "se=", "se=x", 1), op: opPeekMessages, code: "AuthenticationFailed", status: 403},
		{name: "duplicate field", query: valid + "&sp=r", op: opPeekMessages, code: "AuthenticationFailed", status: 403},
		{name: "empty sig", query: "sv=2020-02-10&sig=", op: opPeekMessages, code: "AuthenticationFailed", status: 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := sasRequest(c.op, c.query)
			if c.mod != nil {
				c.mod(&a)
			}
			wantErr(t, authorize(a), c.code, c.status)
		})
	}
}

func TestServiceSASDetails(t *testing.T) {
	valid := queueSAS(t, sas.QueueSignatureValues{ExpiryTime: testNow.Add(time.Hour), Permissions: "r"}, developmentAccountKey)
	a := sasRequest(opPeekMessages, tamperSig(t, valid))
	err := authorize(a)
	d, _ := err.(*azq.Error).Detail(authenticationErrorDetail)
	if !strings.HasPrefix(d, "Signature did not match. String to sign used was r\n\n") || !strings.Contains(d, "/queue/devstoreaccount1/myqueue") {
		t.Fatalf("detail %q", d)
	}
	a = sasRequest(opPeekMessages, valid)
	a.now = testNow.Add(24 * time.Hour)
	d, _ = authorize(a).(*azq.Error).Detail(authenticationErrorDetail)
	if !strings.HasPrefix(d, "Signature not valid in the specified time frame") {
		t.Fatalf("detail %q", d)
	}
}

// TestServiceSASStoredPolicy covers si: fields missing from the SAS come
// from the queue's stored access policy.
func TestServiceSASStoredPolicy(t *testing.T) {
	policies := map[string]azq.AccessPolicy{
		"full":    {ID: "full", Start: testNow.Add(-time.Hour), Expiry: testNow.Add(time.Hour), Permission: "raup"},
		"read":    {ID: "read", Expiry: testNow.Add(time.Hour), Permission: "r"},
		"old":     {ID: "old", Expiry: testNow.Add(-time.Minute), Permission: "raup"},
		"noperms": {ID: "noperms", Expiry: testNow.Add(time.Hour)},
	}
	lookup := func(queue, id string) (azq.AccessPolicy, bool, error) {
		if queue != "myqueue" {
			return azq.AccessPolicy{}, false, &azq.Error{Code: azq.CodeQueueNotFound, StatusCode: 404, Message: "The specified queue does not exist."}
		}
		p, ok := policies[id]
		return p, ok, nil
	}
	si := func(id string, f func(*sas.QueueSignatureValues)) string {
		v := sas.QueueSignatureValues{Identifier: id}
		if f != nil {
			f(&v)
		}
		return queueSAS(t, v, developmentAccountKey)
	}
	cases := []struct {
		name   string
		query  string
		op     operation
		queue  string
		code   string
		status int
	}{
		{"policy grants", si("full", nil), opPutMessage, "", "", 0},
		{"policy permission", si("read", nil), opPutMessage, "", "AuthorizationPermissionMismatch", 403},
		{"policy read", si("read", nil), opPeekMessages, "", "", 0},
		{"policy expired", si("old", nil), opPeekMessages, "", "AuthenticationFailed", 403},
		{"unknown policy", si("nope", nil), opPeekMessages, "", "AuthenticationFailed", 403},
		{"sp from SAS", si("noperms", func(v *sas.QueueSignatureValues) { v.Permissions = "a" }), opPutMessage, "", "", 0},
		{"neither has sp", si("noperms", nil), opPutMessage, "", "AuthenticationFailed", 403},
		{"overlap", si("read", func(v *sas.QueueSignatureValues) { v.Permissions = "r" }), opPeekMessages, "", "InvalidQueryParameterValue", 400},
		{"tampered", tamperSig(t, si("full", nil)), opPeekMessages, "", "AuthenticationFailed", 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := sasRequest(c.op, c.query)
			a.policy = lookup
			wantErr(t, authorize(a), c.code, c.status)
		})
	}
	// A lookup error (e.g. the queue does not exist) is returned as is.
	q := queueSAS(t, sas.QueueSignatureValues{Identifier: "full", QueueName: "gone"}, developmentAccountKey)
	a := newAuthRequest("GET", "/devstoreaccount1/gone/messages?peekonly=true&"+q, opPeekMessages, "gone")
	a.policy = lookup
	wantErr(t, authorize(a), "QueueNotFound", 404)
	// No policy function behaves as "no such policy".
	a.policy = nil
	wantErr(t, authorize(a), "AuthenticationFailed", 403)
}

// signQueueSASManually builds a service SAS for versions the SDK does not
// generate, following the documented string-to-sign of each version.
func signQueueSASManually(sv, sp, se, resource string) string {
	var fields []string
	switch {
	case sv >= "2015-04-05":
		fields = []string{sp, "", se, resource, "", "", "", sv}
	default:
		fields = []string{sp, "", se, resource, "", sv}
	}
	key := devKey()
	v := url.Values{"sv": {sv}, "sp": {sp}, "se": {se}, "sig": {sign(key, strings.Join(fields, "\n"))}}
	return v.Encode()
}

func TestServiceSASVersions(t *testing.T) {
	se := "2031-05-17T13:00:00Z"
	cases := []struct {
		sv, resource string
		ok           bool
	}{
		{"2013-08-15", "/devstoreaccount1/myqueue", true},
		{"2015-02-21", "/queue/devstoreaccount1/myqueue", true},
		{"2015-02-21", "/devstoreaccount1/myqueue", false},
		{"2019-12-12", "/queue/devstoreaccount1/myqueue", true},
		{"2026-02-06", "/queue/devstoreaccount1/myqueue", true},
		{"2011-08-18", "/devstoreaccount1/myqueue", false},
	}
	for _, c := range cases {
		a := sasRequest(opPeekMessages, signQueueSASManually(c.sv, "r", se, c.resource))
		err := authorize(a)
		if (err == nil) != c.ok {
			t.Errorf("sv=%s resource=%s: got %v", c.sv, c.resource, err)
		}
	}
}

// signAccountSASManually follows the documented account SAS string-to-sign
// for any version, so that fields the SDK fixes (ss, ses) can vary.
func signAccountSASManually(key []byte, v url.Values) string {
	fields := []string{"devstoreaccount1", v.Get("sp"), v.Get("ss"), v.Get("srt"), v.Get("st"), v.Get("se"), v.Get("sip"), v.Get("spr"), v.Get("sv")}
	if v.Get("sv") >= "2020-12-06" {
		fields = append(fields, v.Get("ses"))
	}
	v.Set("sig", sign(key, strings.Join(fields, "\n")+"\n"))
	return v.Encode()
}

func TestAccountSAS(t *testing.T) {
	all := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, StartTime: testNow.Add(-time.Hour), ExpiryTime: testNow.Add(time.Hour),
		Permissions: "rwdlacup", ResourceTypes: "sco",
	}
	valid := accountSAS(t, all, developmentAccountKey)
	for op := range opTarget {
		want := ""
		if op == opGetQueueACL || op == opSetQueueACL {
			want = "AuthorizationFailure"
		}
		a := sasRequest(op, valid)
		err := authorize(a)
		if want == "" {
			wantErr(t, err, "", 0)
		} else {
			wantErr(t, err, want, 403)
		}
	}

	with := func(f func(*sas.AccountSignatureValues)) string {
		v := all
		f(&v)
		return accountSAS(t, v, developmentAccountKey)
	}
	key := devKey()
	manual := func(kv ...string) string {
		v := url.Values{"sv": {"2020-02-10"}, "ss": {"q"}, "srt": {"sco"}, "sp": {"rwdlacup"}, "se": {"2031-05-17T13:00:00Z"}}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				v.Del(kv[i])
			} else {
				v.Set(kv[i], kv[i+1])
			}
		}
		return signAccountSASManually(key, v)
	}
	// The manual signer must agree with the SDK, or the manual cases
	// below would prove nothing.
	sdkQ, _ := url.ParseQuery(valid)
	manQ, _ := url.ParseQuery(signAccountSASManually(key, url.Values{
		"sv": {sdkQ.Get("sv")}, "ss": {"q"}, "srt": {"sco"}, "sp": {sdkQ.Get("sp")},
		"st": {sdkQ.Get("st")}, "se": {sdkQ.Get("se")}, "spr": {sdkQ.Get("spr")},
	}))
	if manQ.Get("sig") != sdkQ.Get("sig") {
		t.Fatal("manual account SAS signer disagrees with the SDK")
	}

	cases := []struct {
		name   string
		query  string
		op     operation
		mod    func(*authRequest)
		code   string
		status int
	}{
		{"tampered", tamperSig(t, valid), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"wrong key", accountSAS(t, all, otherKey), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"expired", valid, opPeekMessages, func(a *authRequest) { a.now = testNow.Add(3 * time.Hour) }, "AuthenticationFailed", 403},
		{"resource type", with(func(v *sas.AccountSignatureValues) { v.ResourceTypes = "o" }), opCreateQueue, nil, "AuthorizationResourceTypeMismatch", 403},
		{"service type for list", with(func(v *sas.AccountSignatureValues) { v.ResourceTypes = "co" }), opListQueues, nil, "AuthorizationResourceTypeMismatch", 403},
		{"object type for put", with(func(v *sas.AccountSignatureValues) { v.ResourceTypes = "sc" }), opPutMessage, nil, "AuthorizationResourceTypeMismatch", 403},
		{"permission", with(func(v *sas.AccountSignatureValues) { v.Permissions = "r" }), opPutMessage, nil, "AuthorizationPermissionMismatch", 403},
		{"list needs l", with(func(v *sas.AccountSignatureValues) { v.Permissions = "r" }), opListQueues, nil, "AuthorizationPermissionMismatch", 403},
		{"create with c", with(func(v *sas.AccountSignatureValues) { v.Permissions = "c" }), opCreateQueue, nil, "", 0},
		{"https only", with(func(v *sas.AccountSignatureValues) { v.Protocol = sas.ProtocolHTTPS }), opPeekMessages, nil, "AuthorizationProtocolMismatch", 403},
		{"ip", with(func(v *sas.AccountSignatureValues) { v.IPRange = sas.IPRange{Start: []byte{10, 1, 1, 1}} }), opPeekMessages, nil, "AuthorizationSourceIPMismatch", 403},
		{"secondary write", valid, opDeleteQueue, func(a *authRequest) { a.secondary = true }, "InsufficientAccountPermissions", 403},
		{"secondary stats", valid, opGetServiceStats, func(a *authRequest) { a.secondary = true }, "", 0},
		{"not for queues", manual("ss", "bt"), opPeekMessages, nil, "AuthorizationServiceMismatch", 403},
		{"several services", manual("ss", "bqtf"), opPeekMessages, nil, "", 0},
		{"ses form", manual("sv", "2021-06-08", "ses", "scope1"), opPeekMessages, nil, "", 0},
		{"ses form, empty scope", manual("sv", "2025-01-05"), opPeekMessages, nil, "", 0},
		{"date-only expiry", manual("se", "2031-05-18"), opPeekMessages, nil, "", 0},
		{"date-only expiry passed", manual("se", "2031-05-17"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"fractional start", manual("st", "2031-05-17T11:59:59.1234567Z"), opPeekMessages, nil, "", 0},
		{"minute precision", manual("se", "2031-05-17T12:01Z"), opPeekMessages, nil, "", 0},
		{"offset", manual("se", "2031-05-17T14:30:00+02:00"), opPeekMessages, nil, "", 0},
		{"expiry before start", manual("st", "2031-05-17T11:00:00Z", "se", "2031-05-17T10:00:00Z"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"bad time", manual("se", "next tuesday"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"bad srt", manual("srt", "x"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"bad ss", manual("ss", "qz"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"bad sp", manual("sp", "rz"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"missing se", manual("se", ""), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"too old", manual("sv", "2013-08-15"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"bad sv", manual("sv", "2020-13-45"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"bad spr", manual("spr", "ftp"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"bad sip", manual("sip", "1.2.3"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"reversed sip range", manual("sip", "192.0.2.20-192.0.2.1"), opPeekMessages, nil, "AuthenticationFailed", 403},
		{"ipv6 sip", manual("sip", "2001:db8::1-2001:db8::ff"), opPeekMessages, func(a *authRequest) { a.r.RemoteAddr = "[2001:db8::10]:443" }, "", 0},
		{"ipv6 peer, ipv4 sip", manual("sip", "192.0.2.10"), opPeekMessages, func(a *authRequest) { a.r.RemoteAddr = "[2001:db8::10]:443" }, "AuthorizationSourceIPMismatch", 403},
		{"mapped ipv4 peer", manual("sip", "192.0.2.10"), opPeekMessages, func(a *authRequest) { a.r.RemoteAddr = "[::ffff:192.0.2.10]:443" }, "", 0},
		{"unknown peer", manual("sip", "192.0.2.10"), opPeekMessages, func(a *authRequest) { a.r.RemoteAddr = "pipe" }, "AuthorizationSourceIPMismatch", 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := sasRequest(c.op, c.query)
			if c.mod != nil {
				c.mod(&a)
			}
			wantErr(t, authorize(a), c.code, c.status)
		})
	}
}

// --- Shared Key tables -----------------------------------------------------

func sharedKeyRequest(method, target string, op operation, queue string, lite bool, mod func(*http.Request)) authRequest {
	a := newAuthRequest(method, target, op, queue)
	a.r.Header.Set("x-ms-date", "Sat, 17 May 2031 11:00:00 GMT")
	a.r.Header.Set("x-ms-version", "2018-03-28")
	if mod != nil {
		mod(a.r)
	}
	signSharedKey(a.r, "devstoreaccount1", developmentAccountKey, lite)
	return a
}

func TestSharedKey(t *testing.T) {
	cases := []struct {
		name   string
		build  func() authRequest
		code   string
		status int
	}{
		{"shared key", func() authRequest {
			return sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
		}, "", 0},
		{"shared key lite", func() authRequest {
			return sharedKeyRequest("PUT", "/devstoreaccount1/myqueue?comp=metadata&timeout=5", opSetQueueMetadata, "myqueue", true, nil)
		}, "", 0},
		{"lite signed over Date", func() authRequest {
			a := newAuthRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue")
			a.r.Header.Set("Date", "Sat, 17 May 2031 11:00:00 GMT")
			key := devKey()
			sts := "GET\n\n\nSat, 17 May 2031 11:00:00 GMT\n/devstoreaccount1/devstoreaccount1/myqueue?comp=metadata"
			a.r.Header.Set("Authorization", "SharedKeyLite devstoreaccount1:"+sign(key, sts))
			return a
		}, "", 0},
		{"tampered header after signing", func() authRequest {
			a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
			a.r.Header.Set("x-ms-version", "2019-02-02")
			return a
		}, "AuthenticationFailed", 403},
		{"tampered query after signing", func() authRequest {
			a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue/messages?numofmessages=1", opGetMessages, "myqueue", false, nil)
			a.r.URL.RawQuery = "numofmessages=32"
			return a
		}, "AuthenticationFailed", 403},
		{"tampered method", func() authRequest {
			a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue", opDeleteQueue, "myqueue", false, nil)
			a.r.Method = "DELETE"
			return a
		}, "AuthenticationFailed", 403},
		{"wrong account name", func() authRequest {
			a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
			a.r.Header.Set("Authorization", strings.Replace(a.r.Header.Get("Authorization"), "devstoreaccount1", "someoneelse", 1))
			return a
		}, "AuthenticationFailed", 403},
		{"secondary write after valid signature", func() authRequest {
			a := sharedKeyRequest("PUT", "/devstoreaccount1-secondary/myqueue", opCreateQueue, "myqueue", false, nil)
			a.secondary = true
			return a
		}, "InsufficientAccountPermissions", 403},
		{"secondary path signed without suffix", func() authRequest {
			a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
			a.r.URL.Path = "/devstoreaccount1-secondary/myqueue"
			a.r.RequestURI = "/devstoreaccount1-secondary/myqueue?comp=metadata"
			a.secondary = true
			return a
		}, "", 0},
		{"invalid account key configured", func() authRequest {
			a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
			a.account.Keys = []string{"!!not base64!!", ""}
			a.keys = a.account.keyBytes()
			return a
		}, "AuthenticationFailed", 403},
		{"bearer", func() authRequest {
			a := newAuthRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue")
			a.r.Header.Set("Authorization", "Bearer eyJ0eXAiOiJKV1QifQ.e30.sig")
			return a
		}, "AuthenticationFailed", 403},
		{"header wins over SAS", func() authRequest {
			a := newAuthRequest("GET", "/devstoreaccount1/myqueue?comp=metadata&sv=2020-02-10&sig=x", opGetQueueMetadata, "myqueue")
			a.r.Header.Set("Authorization", "SharedKey devstoreaccount1:AAAA")
			return a
		}, "AuthenticationFailed", 403},
	}
	for _, hv := range []string{"SharedKey", "SharedKey ", "SharedKey devstoreaccount1", "SharedKey devstoreaccount1:", "SharedKey :sig",
		"Basic dXNlcjpwYXNz", "sharedkey devstoreaccount1:abc", "SharedKey devstoreaccount1:a b", "", strings.Repeat("x", 5000)} {
		hv := hv
		cases = append(cases, struct {
			name   string
			build  func() authRequest
			code   string
			status int
		}{"malformed " + hv[:min(len(hv), 30)], func() authRequest {
			a := newAuthRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue")
			a.r.Header.Set("Authorization", hv)
			return a
		}, "InvalidAuthenticationInfo", 400})
	}
	cases = append(cases, struct {
		name   string
		build  func() authRequest
		code   string
		status int
	}{"two headers", func() authRequest {
		a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
		a.r.Header.Add("Authorization", a.r.Header.Get("Authorization"))
		return a
	}, "InvalidAuthenticationInfo", 400})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, authorize(c.build()), c.code, c.status)
		})
	}
}

// TestSharedKeyIgnoresClock: signed dates are not compared with the
// service clock, which may be a mock clock far from the client's.
func TestSharedKeyIgnoresClock(t *testing.T) {
	for _, now := range []time.Time{{}, testNow.AddDate(-30, 0, 0), testNow.AddDate(5, 0, 0)} {
		a := sharedKeyRequest("GET", "/devstoreaccount1/myqueue?comp=metadata", opGetQueueMetadata, "myqueue", false, nil)
		a.now = now
		wantErr(t, authorize(a), "", 0)
	}
}

func TestAnonymousAndPreflight(t *testing.T) {
	a := newAuthRequest("GET", "/devstoreaccount1/myqueue/messages?peekonly=true", opPeekMessages, "myqueue")
	err := authorize(a)
	wantErr(t, err, "NoAuthenticationInformation", 401)

	a.allowAnonymous = true
	wantErr(t, authorize(a), "", 0)

	// allowAnonymous accepts missing credentials, not wrong ones.
	a.r.Header.Set("Authorization", "SharedKey devstoreaccount1:AAAA")
	wantErr(t, authorize(a), "AuthenticationFailed", 403)

	// Anonymous writes on the secondary are still refused.
	w := newAuthRequest("POST", "/devstoreaccount1-secondary/myqueue/messages", opPutMessage, "myqueue")
	w.allowAnonymous, w.secondary = true, true
	wantErr(t, authorize(w), "InsufficientAccountPermissions", 403)

	// Preflight is never authenticated, whatever it carries.
	p := newAuthRequest("OPTIONS", "/devstoreaccount1/myqueue?sig=garbage", opPreflight, "myqueue")
	p.r.Header.Set("Authorization", "garbage")
	p.secondary = true
	wantErr(t, authorize(p), "", 0)

	// Degenerate inputs do not panic.
	wantErr(t, authorize(authRequest{op: opPeekMessages}), "AuthenticationFailed", 403)
}

// devKey is the decoded development account key.
func devKey() []byte {
	a := DevelopmentAccount()
	return a.keyBytes()[0].raw
}

// TestHandlerSharedKeyHead: HEAD requests (which the SDK never sends)
// signed with Shared Key, through the real handler.
func TestHandlerSharedKeyHead(t *testing.T) {
	clk := clock.NewMock()
	clk.Set(testNow)
	s := New(Options{Clock: clk})
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	ctx := context.Background()
	q, _, err := s.Service("devstoreaccount1").CreateQueue(ctx, "headq", map[string]string{"owner": "me"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "m", nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		status int
		code   string
		check  func(http.Header) bool
	}{
		{"/devstoreaccount1/headq?comp=metadata", 200, "", func(h http.Header) bool {
			return h.Get("x-ms-approximate-messages-count") == "1" && h.Get("x-ms-meta-owner") == "me"
		}},
		{"/devstoreaccount1/headq?comp=acl", 200, "", func(h http.Header) bool { return h.Get("Content-Type") == "application/xml" }},
		{"/devstoreaccount1/nosuch?comp=metadata", 404, "QueueNotFound", nil},
		{"/devstoreaccount1-secondary/headq?comp=metadata", 200, "", nil},
	} {
		req, _ := http.NewRequest("HEAD", hs.URL+c.target, nil)
		req.Header.Set("x-ms-date", "Sat, 17 May 2031 11:00:00 GMT")
		req.Header.Set("x-ms-version", "2018-03-28")
		signSharedKey(req, "devstoreaccount1", developmentAccountKey, false)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("x-ms-error-code") != c.code || (c.check != nil && !c.check(resp.Header)) {
			t.Fatalf("HEAD %s: %d %v", c.target, resp.StatusCode, resp.Header)
		}
	}
}

// TestCanonicalizedHeaders: x-ms-* headers only, names in lower case and
// sorted, values trimmed and joined, one line each, whatever the case the
// names arrived in.
func TestCanonicalizedHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want string
	}{
		{"none", http.Header{"Content-Type": {"application/xml"}}, ""},
		{"sorted and trimmed", http.Header{
			"X-Ms-Version":           {" 2018-03-28 "},
			"X-Ms-Date":              {"Mon, 23 Nov 2026 20:00:00 GMT"},
			"X-Ms-Client-Request-Id": {"abc"},
			"Content-Length":         {"10"},
		}, "x-ms-client-request-id:abc\nx-ms-date:Mon, 23 Nov 2026 20:00:00 GMT\nx-ms-version:2018-03-28\n"},
		{"repeated header", http.Header{"X-Ms-Meta-A": {"1", " 2"}}, "x-ms-meta-a:1,2\n"},
		{"non-canonical key", http.Header{"x-MS-meta-b": {"v"}, "X-Ms-Meta-A": {"w"}}, "x-ms-meta-a:w\nx-ms-meta-b:v\n"},
		{"same name in two cases", http.Header{"x-ms-meta-a": {"1"}, "X-Ms-Meta-A": {"1"}}, "x-ms-meta-a:1,1\n"},
		{"prefix only", http.Header{"X-Ms": {"no"}, "X-Msx-A": {"no"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := canonicalizedHeaders(tc.h); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// sign returns base64(HMAC-SHA256(key, stringToSign)), the signature of
// Shared Key, Shared Key Lite and shared access signatures alike, as a
// client computes it.
func sign(key []byte, stringToSign string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(stringToSign))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}
