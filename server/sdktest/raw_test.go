package sdktest_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/server"
)

// rawEnv serves anonymous requests, for the cases the SDK cannot express.
type rawEnv struct {
	*env
	client *http.Client
}

func newRawEnv(t *testing.T, opts server.Options) *rawEnv {
	opts.AllowAnonymous = true
	e := newEnv(t, opts)
	return &rawEnv{env: e, client: e.hs.Client()}
}

type rawResp struct {
	status int
	header http.Header
	body   string
}

// do sends a request; path is relative to the server root, host (if
// non-empty) overrides the Host header.
func (e *rawEnv) do(t *testing.T, method, path, host string, body io.Reader, hdr map[string]string) rawResp {
	t.Helper()
	req, err := http.NewRequest(method, e.hs.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{resp.StatusCode, resp.Header, string(b)}
}

type errorXML struct {
	XMLName xml.Name `xml:"Error"`
	Code    string   `xml:"Code"`
	Message string   `xml:"Message"`
	Inner   []struct {
		XMLName xml.Name
		Value   string `xml:",chardata"`
	} `xml:",any"`
}

var messageTail = regexp.MustCompile(`\nRequestId:[0-9a-f-]{36}\nTime:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$`)

// checkError verifies Azure's error shape and returns the details.
func checkError(t *testing.T, r rawResp, status int, code string) map[string]string {
	t.Helper()
	if r.status != status || r.header.Get("x-ms-error-code") != code {
		t.Fatalf("want %d %s, got %d %q: %s", status, code, r.status, r.header.Get("x-ms-error-code"), r.body)
	}
	if r.header.Get("x-ms-request-id") == "" {
		t.Fatal("no x-ms-request-id")
	}
	if r.body == "" {
		return nil // HEAD
	}
	var e errorXML
	if err := xml.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("error body is not XML: %v: %s", err, r.body)
	}
	if e.Code != code || !messageTail.MatchString(e.Message) {
		t.Fatalf("error body %+v", e)
	}
	if !strings.Contains(e.Message, r.header.Get("x-ms-request-id")) {
		t.Fatal("message does not carry the request id")
	}
	d := map[string]string{}
	for _, in := range e.Inner {
		d[in.XMLName.Local] = in.Value
	}
	return d
}

func (e *rawEnv) count(t *testing.T, queue string) int {
	t.Helper()
	q, err := e.srv.Service("devstoreaccount1").Queue(queue)
	if err != nil {
		t.Fatal(err)
	}
	n, err := q.ApproximateCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const acct = "/devstoreaccount1"

func msgBody(s string) string {
	return "<QueueMessage><MessageText>" + s + "</MessageText></QueueMessage>"
}

func TestRawCommonHeaders(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	r := e.do(t, "PUT", acct+"/hdrs", "", nil, map[string]string{"x-ms-client-request-id": "abc-123", "x-ms-version": "2019-02-02"})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r.header.Get("x-ms-client-request-id") != "abc-123" || r.header.Get("x-ms-version") != "2019-02-02" ||
		!strings.HasPrefix(r.header.Get("Server"), "Windows-Azure-Queue/1.0") {
		t.Fatalf("headers %v", r.header)
	}
	d, err := time.Parse(time.RFC1123, r.header.Get("Date"))
	if err != nil || !d.Equal(e.clk.Now()) || !strings.HasSuffix(r.header.Get("Date"), "GMT") {
		t.Fatalf("Date %q (%v), clock %v", r.header.Get("Date"), err, e.clk.Now())
	}
	if id := r.header.Get("x-ms-request-id"); !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("request id %q", id)
	}
	// No version: the newest known is echoed.
	r = e.do(t, "GET", acct+"/hdrs?comp=metadata", "", nil, nil)
	if r.status != 200 || r.header.Get("x-ms-version") == "" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	// Put response: timestamps in GMT, no DequeueCount or text.
	r = e.do(t, "POST", acct+"/hdrs/messages", "", strings.NewReader(msgBody("hi")), nil)
	if r.status != 201 || strings.Contains(r.body, "DequeueCount") || strings.Contains(r.body, "MessageText") ||
		!strings.Contains(r.body, " GMT</InsertionTime>") || !strings.Contains(r.body, "<PopReceipt>") {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	// Peek: no receipt, no next-visible time.
	r = e.do(t, "GET", acct+"/hdrs/messages?peekonly=true", "", nil, nil)
	if r.status != 200 || strings.Contains(r.body, "PopReceipt") || strings.Contains(r.body, "TimeNextVisible") || !strings.Contains(r.body, "<DequeueCount>0</DequeueCount>") {
		t.Fatalf("peek: %d %s", r.status, r.body)
	}
}

func TestRawHeadMetadata(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	r := e.do(t, "PUT", acct+"/headq", "", nil, map[string]string{"x-ms-meta-Owner": "me"})
	if r.status != 201 {
		t.Fatal(r.status)
	}
	e.do(t, "POST", acct+"/headq/messages", "", strings.NewReader(msgBody("a")), nil)
	e.do(t, "POST", acct+"/headq/messages?visibilitytimeout=60", "", strings.NewReader(msgBody("b")), nil)
	r = e.do(t, "HEAD", acct+"/headq?comp=metadata", "", nil, nil)
	if r.status != 200 || r.header.Get("x-ms-approximate-messages-count") != "2" || r.header.Get("x-ms-meta-owner") != "me" || r.body != "" {
		t.Fatalf("HEAD: %d %v %q", r.status, r.header, r.body)
	}
	r = e.do(t, "HEAD", acct+"/nothere?comp=metadata", "", nil, nil)
	checkError(t, r, 404, "QueueNotFound")
	if r.body != "" {
		t.Fatal("HEAD error with a body")
	}
	// Create with the same metadata: 204; different: 409.
	if r := e.do(t, "PUT", acct+"/headq", "", nil, map[string]string{"x-ms-meta-owner": "me"}); r.status != 204 {
		t.Fatalf("same metadata: %d", r.status)
	}
	checkError(t, e.do(t, "PUT", acct+"/headq", "", nil, map[string]string{"x-ms-meta-owner": "you"}), 409, "QueueAlreadyExists")
	// Metadata over 8 KiB.
	checkError(t, e.do(t, "PUT", acct+"/headq?comp=metadata", "", nil, map[string]string{"x-ms-meta-big": strings.Repeat("v", 9000)}), 400, "MetadataTooLarge")
	// Duplicate names differing in case.
	req, _ := http.NewRequest("PUT", e.hs.URL+acct+"/headq?comp=metadata", nil)
	req.Header["X-Ms-Meta-Dup"] = []string{"1", "2"}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("x-ms-error-code") != "InvalidMetadata" {
		t.Fatalf("duplicate metadata: %d %s", resp.StatusCode, resp.Header.Get("x-ms-error-code"))
	}
}

func TestRawListKeepsMetadataCase(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	if _, _, err := e.srv.Service("devstoreaccount1").CreateQueue(context.Background(), "cased", map[string]string{"MixedCase": "v&w"}); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, "GET", acct+"?comp=list&include=metadata&prefix=ca&maxresults=10", "", nil, nil)
	want := `<Prefix>ca</Prefix><MaxResults>10</MaxResults><Queues><Queue><Name>cased</Name><Metadata><MixedCase>v&amp;w</MixedCase></Metadata></Queue></Queues><NextMarker />`
	if r.status != 200 || !strings.Contains(r.body, want) || !strings.Contains(r.body, `ServiceEndpoint="`+e.hs.URL+acct+`/"`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// Over HTTP the client's case is lost in net/http; names are stored
	// in lower case.
	e.do(t, "PUT", acct+"/cased2", "", nil, map[string]string{"x-ms-meta-Team_Name": "blue"})
	r = e.do(t, "GET", acct+"?comp=list&include=metadata&prefix=cased2", "", nil, nil)
	if !strings.Contains(r.body, "<Metadata><team_name>blue</team_name></Metadata>") {
		t.Fatalf("http metadata listing: %s", r.body)
	}
	checkError(t, e.do(t, "GET", acct+"?comp=list&maxresults=0", "", nil, nil), 400, "OutOfRangeQueryParameterValue")
	checkError(t, e.do(t, "GET", acct+"?comp=list&maxresults=ten", "", nil, nil), 400, "InvalidQueryParameterValue")
	checkError(t, e.do(t, "GET", acct+"?comp=list&include=acl", "", nil, nil), 400, "InvalidQueryParameterValue")
}

func TestRawBadMessageBodies(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/bodies", "", nil, nil)
	tests := []struct {
		name, body string
		status     int
		code       string
		line       bool
	}{
		{"unclosed", "<QueueMessage><MessageText>x</MessageText>", 400, "InvalidXmlDocument", true},
		{"wrong root", "<Message><MessageText>x</MessageText></Message>", 400, "InvalidXmlDocument", true},
		{"no text element", "<QueueMessage></QueueMessage>", 400, "InvalidXmlDocument", true},
		{"extra element", "<QueueMessage><MessageText>x</MessageText><Other/></QueueMessage>", 400, "InvalidXmlDocument", true},
		{"two texts", "<QueueMessage><MessageText>x</MessageText><MessageText>y</MessageText></QueueMessage>", 400, "InvalidXmlDocument", true},
		{"empty", "", 400, "InvalidXmlDocument", false},
		{"not xml", "hello", 400, "InvalidXmlDocument", false},
		{"bad entity", msgBody("&bogus;"), 400, "InvalidXmlDocument", true},
		{"control char", msgBody("\x01"), 400, "InvalidXmlDocument", true},
		{"invalid utf8", msgBody("\xff\xfe"), 400, "InvalidXmlDocument", true},
		{"other encoding", `<?xml version="1.0" encoding="iso-8859-1"?>` + msgBody("x"), 400, "InvalidXmlDocument", true},
		{"trailing junk", msgBody("x") + "<more/>", 400, "InvalidXmlDocument", true},
		{"text 65537", msgBody(strings.Repeat("a", 65537)), 413, "RequestBodyTooLarge", false},
		{"escaped text 65537", msgBody(strings.Repeat("&amp;", 65537)), 413, "RequestBodyTooLarge", false},
		{"body over 131584", msgBody(strings.Repeat("&#97;", 30000)), 413, "RequestBodyTooLarge", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", acct+"/bodies/messages", "", strings.NewReader(tc.body), nil)
			d := checkError(t, r, tc.status, tc.code)
			if tc.line && (d["LineNumber"] == "" || d["LinePosition"] == "" || d["Reason"] == "") {
				t.Fatalf("details %v", d)
			}
			if tc.status == 413 {
				want := "65536"
				if len(tc.body) > 131584 {
					want = "131584"
				}
				if d["MaxLimit"] != want {
					t.Fatalf("MaxLimit %q, want %s", d["MaxLimit"], want)
				}
			}
			if n := e.count(t, "bodies"); n != 0 {
				t.Fatalf("rejected put changed the queue: %d messages", n)
			}
		})
	}
	// Accepted forms: XML declaration, whitespace, CDATA, entities, empty text.
	for _, body := range []string{
		`<?xml version="1.0" encoding="utf-8"?>` + "\n" + msgBody("a") + "\n",
		"<QueueMessage>\n  <MessageText><![CDATA[<b>]]></MessageText>\n</QueueMessage>",
		msgBody("&lt;&#x263A;&gt;"),
		"<QueueMessage><MessageText/></QueueMessage>",
	} {
		if r := e.do(t, "POST", acct+"/bodies/messages", "", strings.NewReader(body), nil); r.status != 201 {
			t.Fatalf("%q: %d %s", body, r.status, r.body)
		}
	}
	r := e.do(t, "GET", acct+"/bodies/messages?peekonly=true&numofmessages=32", "", nil, nil)
	for _, want := range []string{"<MessageText>a</MessageText>", "<MessageText>&lt;b&gt;</MessageText>", "<MessageText>&lt;☺&gt;</MessageText>", "<MessageText></MessageText>"} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("peek lacks %s: %s", want, r.body)
		}
	}
	// A declared Content-Length beyond the limit is refused unread.
	req, _ := http.NewRequest("POST", e.hs.URL+acct+"/bodies/messages", io.MultiReader(strings.NewReader(msgBody("x"))))
	req.ContentLength = 1 << 30
	req.Body = io.NopCloser(io.LimitReader(zeroReader{}, 1<<30))
	resp, err := e.client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 413 || resp.Header.Get("x-ms-error-code") != "RequestBodyTooLarge" {
			t.Fatalf("huge body: %d", resp.StatusCode)
		}
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestRawQueryParameters(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/params", "", nil, nil)
	put := func(query string) rawResp {
		return e.do(t, "POST", acct+"/params/messages"+query, "", strings.NewReader(msgBody("x")), nil)
	}
	m := e.put(t, "params")
	tests := []struct {
		name   string
		r      func() rawResp
		status int
		code   string
		detail map[string]string
	}{
		{"vis non-numeric", func() rawResp { return put("?visibilitytimeout=soon") }, 400, "InvalidQueryParameterValue", map[string]string{"QueryParameterName": "visibilitytimeout", "QueryParameterValue": "soon"}},
		{"vis float", func() rawResp { return put("?visibilitytimeout=1.5") }, 400, "InvalidQueryParameterValue", nil},
		{"vis overflow", func() rawResp { return put("?visibilitytimeout=99999999999999") }, 400, "InvalidQueryParameterValue", nil},
		{"vis negative", func() rawResp { return put("?visibilitytimeout=-1") }, 400, "OutOfRangeQueryParameterValue", map[string]string{"QueryParameterName": "visibilitytimeout"}},
		{"ttl zero", func() rawResp { return put("?messagettl=0") }, 400, "OutOfRangeQueryParameterValue", map[string]string{"QueryParameterName": "messagettl", "QueryParameterValue": "0"}},
		{"ttl -2", func() rawResp { return put("?messagettl=-2") }, 400, "OutOfRangeQueryParameterValue", nil},
		{"ttl text", func() rawResp { return put("?messagettl=week") }, 400, "InvalidQueryParameterValue", nil},
		{"timeout negative", func() rawResp { return put("?timeout=-1") }, 400, "OutOfRangeQueryParameterValue", nil},
		{"timeout text", func() rawResp { return put("?timeout=x") }, 400, "InvalidQueryParameterValue", nil},
		{"bad escape", func() rawResp { return put("?visibilitytimeout=%zz") }, 400, "InvalidUri", nil},
		{"num non-numeric", func() rawResp { return e.do(t, "GET", acct+"/params/messages?numofmessages=all", "", nil, nil) }, 400, "InvalidQueryParameterValue", nil},
		{"num 33", func() rawResp { return e.do(t, "GET", acct+"/params/messages?numofmessages=33", "", nil, nil) }, 400, "OutOfRangeQueryParameterValue",
			map[string]string{"QueryParameterName": "numofmessages", "QueryParameterValue": "33", "MinimumAllowed": "1", "MaximumAllowed": "32"}},
		{"peekonly maybe", func() rawResp { return e.do(t, "GET", acct+"/params/messages?peekonly=maybe", "", nil, nil) }, 400, "InvalidQueryParameterValue", nil},
		{"missing receipt", func() rawResp {
			return e.do(t, "DELETE", acct+"/params/messages/663d89aa-d1d9-42a2-9a6a-fcf822a97d2c", "", nil, nil)
		}, 400, "MissingRequiredQueryParameter", map[string]string{"QueryParameterName": "popreceipt"}},
		{"garbage receipt", func() rawResp {
			return e.do(t, "DELETE", acct+"/params/messages/663d89aa-d1d9-42a2-9a6a-fcf822a97d2c?popreceipt=AAAA", "", nil, nil)
		}, 400, "InvalidQueryParameterValue", map[string]string{"QueryParameterName": "popreceipt", "QueryParameterValue": "AAAA"}},
		{"receipt with + unescaped", func() rawResp {
			return e.do(t, "PUT", acct+"/params/messages/663d89aa-d1d9-42a2-9a6a-fcf822a97d2c?popreceipt=AgAAAAMAAAAAAAAAxVk+R+xc2gE=&visibilitytimeout=0", "", nil, nil)
		}, 400, "InvalidQueryParameterValue", map[string]string{"QueryParameterName": "popreceipt"}},
		{"update without visibility", func() rawResp {
			return e.do(t, "PUT", acct+"/params/messages/"+m.id+"?popreceipt="+m.receipt, "", nil, nil)
		}, 400, "MissingRequiredQueryParameter", map[string]string{"QueryParameterName": "visibilitytimeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count(t, "params")
			d := checkError(t, tc.r(), tc.status, tc.code)
			for k, v := range tc.detail {
				if d[k] != v {
					t.Fatalf("detail %s = %q, want %q (all: %v)", k, d[k], v, d)
				}
			}
			if after := e.count(t, "params"); after != before {
				t.Fatalf("rejected request changed the queue: %d → %d", before, after)
			}
		})
	}
	// Unknown parameters are ignored, as Azure ignores them.
	if r := put("?foo=bar&visibilitytimeout=0&timeout=30"); r.status != 201 {
		t.Fatalf("unknown param: %d %s", r.status, r.body)
	}
}

type putResult struct{ id, receipt string }

var (
	idRe      = regexp.MustCompile(`<MessageId>([^<]+)</MessageId>`)
	receiptRe = regexp.MustCompile(`<PopReceipt>([^<]+)</PopReceipt>`)
)

func (e *rawEnv) put(t *testing.T, queue string) putResult {
	t.Helper()
	r := e.do(t, "POST", acct+"/"+queue+"/messages", "", strings.NewReader(msgBody("x")), nil)
	if r.status != 201 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	return putResult{idRe.FindStringSubmatch(r.body)[1], urlEscape(receiptRe.FindStringSubmatch(r.body)[1])}
}

func urlEscape(s string) string {
	return strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(s)
}

func TestRawUpdateWithoutBody(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/upd", "", nil, nil)
	m := e.put(t, "upd")
	r := e.do(t, "PUT", acct+"/upd/messages/"+m.id+"?popreceipt="+m.receipt+"&visibilitytimeout=10", "", nil, nil)
	if r.status != 204 || r.header.Get("x-ms-popreceipt") == "" || r.header.Get("x-ms-time-next-visible") == "" {
		t.Fatalf("update: %d %v %s", r.status, r.header, r.body)
	}
	if nv, err := time.Parse(time.RFC1123, r.header.Get("x-ms-time-next-visible")); err != nil || !nv.Equal(e.clk.Now().Add(10*time.Second)) {
		t.Fatalf("next visible %q", r.header.Get("x-ms-time-next-visible"))
	}
	e.clk.Add(10 * time.Second)
	r = e.do(t, "GET", acct+"/upd/messages", "", nil, nil)
	if !strings.Contains(r.body, "<MessageText>x</MessageText>") {
		t.Fatalf("content changed by a bodiless update: %s", r.body)
	}
	// A malformed update body leaves the message alone.
	m2 := putResult{idRe.FindStringSubmatch(r.body)[1], urlEscape(receiptRe.FindStringSubmatch(r.body)[1])}
	checkError(t, e.do(t, "PUT", acct+"/upd/messages/"+m2.id+"?popreceipt="+m2.receipt+"&visibilitytimeout=0", "", strings.NewReader("<QueueMessage>"), nil), 400, "InvalidXmlDocument")
	r = e.do(t, "PUT", acct+"/upd/messages/"+m2.id+"?popreceipt="+m2.receipt+"&visibilitytimeout=0", "", nil, nil)
	if r.status != 204 {
		t.Fatalf("receipt died after a rejected update: %d %s", r.status, r.body)
	}
}

func TestRawVersions(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/vers", "", nil, nil)
	for _, v := range []string{"2009-09-18", "garbage", "2020-13-01", "2020-1-01", "20200101xx"} {
		d := checkError(t, e.do(t, "GET", acct+"/vers?comp=metadata", "", nil, map[string]string{"x-ms-version": v}), 400, "InvalidHeaderValue")
		if d["HeaderName"] != "x-ms-version" || d["HeaderValue"] != v {
			t.Fatalf("%s: details %v", v, d)
		}
	}
	for _, v := range []string{"2009-09-19", "2018-03-28", "2099-01-01"} {
		r := e.do(t, "GET", acct+"/vers?comp=metadata", "", nil, map[string]string{"x-ms-version": v})
		if r.status != 200 || r.header.Get("x-ms-version") != v {
			t.Fatalf("%s: %d %s", v, r.status, r.body)
		}
	}
	strict := newRawEnv(t, server.Options{StrictVersion: true})
	checkError(t, strict.do(t, "GET", acct+"?comp=list", "", nil, map[string]string{"x-ms-version": "2099-01-01"}), 400, "InvalidHeaderValue")

	old := map[string]string{"x-ms-version": "2011-08-17"}
	// Before 2011-08-18: 8 KiB messages, no Update Message.
	d := checkError(t, e.do(t, "POST", acct+"/vers/messages", "", strings.NewReader(msgBody(strings.Repeat("a", 8193))), old), 413, "RequestBodyTooLarge")
	if d["MaxLimit"] != "8192" {
		t.Fatalf("MaxLimit %v", d)
	}
	if r := e.do(t, "POST", acct+"/vers/messages", "", strings.NewReader(msgBody(strings.Repeat("a", 8192))), old); r.status != 201 {
		t.Fatalf("8192 bytes at 2011-08-17: %d", r.status)
	}
	m := e.put(t, "vers")
	checkError(t, e.do(t, "PUT", acct+"/vers/messages/"+m.id+"?popreceipt="+m.receipt+"&visibilitytimeout=0", "", nil, old), 405, "UnsupportedHttpVerb")
	// Before 2017-07-29: TTL at most 7 days, no -1.
	v2016 := map[string]string{"x-ms-version": "2017-04-17"}
	checkError(t, e.do(t, "POST", acct+"/vers/messages?messagettl=-1", "", strings.NewReader(msgBody("x")), v2016), 400, "OutOfRangeQueryParameterValue")
	checkError(t, e.do(t, "POST", acct+"/vers/messages?messagettl=604801", "", strings.NewReader(msgBody("x")), v2016), 400, "OutOfRangeQueryParameterValue")
	if r := e.do(t, "POST", acct+"/vers/messages?messagettl=604801", "", strings.NewReader(msgBody("x")), map[string]string{"x-ms-version": "2017-07-29"}); r.status != 201 {
		t.Fatalf("long ttl at 2017-07-29: %d %s", r.status, r.body)
	}
}

func TestRawAddressing(t *testing.T) {
	e := newRawEnv(t, server.Options{Accounts: []server.Account{server.DevelopmentAccount(), {Name: "second", Keys: []string{"c2Vjb25k"}}}})
	hostStyle := "devstoreaccount1.queue.localhost"
	if r := e.do(t, "PUT", "/hostq", hostStyle, nil, nil); r.status != 201 {
		t.Fatalf("host-style create: %d %s", r.status, r.body)
	}
	if r := e.do(t, "POST", "/hostq/messages", hostStyle, strings.NewReader(msgBody("hs")), nil); r.status != 201 {
		t.Fatalf("host-style put: %d %s", r.status, r.body)
	}
	// Path-style sees the same queue.
	if n := e.count(t, "hostq"); n != 1 {
		t.Fatalf("count %d", n)
	}
	r := e.do(t, "GET", "/?comp=list", hostStyle+":1234", nil, nil)
	if !strings.Contains(r.body, `ServiceEndpoint="`+"http://"+hostStyle+`:1234/"`) || !strings.Contains(r.body, "<Name>hostq</Name>") {
		t.Fatalf("host-style list: %s", r.body)
	}
	// Secondary, host- and path-style: reads work, writes do not.
	for _, sec := range []struct{ path, host string }{{"/hostq", "devstoreaccount1-secondary.queue.localhost"}, {"/devstoreaccount1-secondary/hostq", ""}} {
		r := e.do(t, "GET", sec.path+"/messages?peekonly=true", sec.host, nil, nil)
		if r.status != 200 || !strings.Contains(r.body, "hs") {
			t.Fatalf("secondary peek: %d %s", r.status, r.body)
		}
		checkError(t, e.do(t, "POST", sec.path+"/messages", sec.host, strings.NewReader(msgBody("x")), nil), 403, "InsufficientAccountPermissions")
		checkError(t, e.do(t, "GET", sec.path+"/messages", sec.host, nil, nil), 403, "InsufficientAccountPermissions")
	}
	if n := e.count(t, "hostq"); n != 1 {
		t.Fatalf("secondary changed the queue: %d", n)
	}
	// Accounts are separate.
	if r := e.do(t, "PUT", "/second/hostq", "", nil, nil); r.status != 201 {
		t.Fatalf("second account create: %d", r.status)
	}
	if q, err := e.srv.Service("second").Queue("hostq"); err != nil || q == nil {
		t.Fatal("queue not in the second account")
	}
	// Unknown accounts, empty paths, unknown resources, wrong verbs.
	// An account azqd does not serve is 404 ResourceNotFound, before
	// any credential is looked at, as Azure answers.
	checkError(t, e.do(t, "GET", "/nosuchaccount?comp=list", "", nil, nil), 404, "ResourceNotFound")
	checkError(t, e.do(t, "GET", "/", "", nil, nil), 400, "InvalidUri")
	checkError(t, e.do(t, "GET", acct, "", nil, nil), 400, "InvalidQueryParameterValue")
	checkError(t, e.do(t, "GET", acct+"/hostq/other", "", nil, nil), 400, "InvalidUri")
	checkError(t, e.do(t, "GET", acct+"/hostq/messages/a/b", "", nil, nil), 400, "InvalidUri")
	checkError(t, e.do(t, "PATCH", acct+"/hostq", "", nil, nil), 405, "UnsupportedHttpVerb")
	checkError(t, e.do(t, "POST", acct+"/hostq", "", nil, nil), 405, "UnsupportedHttpVerb")
	checkError(t, e.do(t, "PUT", acct+"/hostq/messages", "", nil, nil), 405, "UnsupportedHttpVerb")
	checkError(t, e.do(t, "POST", acct+"?comp=list", "", nil, nil), 405, "UnsupportedHttpVerb")
	checkError(t, e.do(t, "GET", acct+"/hostq?comp=bogus", "", nil, nil), 400, "InvalidQueryParameterValue")
	checkError(t, e.do(t, "GET", acct+"/Bad_Queue/messages", "", nil, nil), 400, "InvalidResourceName")
	checkError(t, e.do(t, "GET", acct+"/nosuchq/messages", "", nil, nil), 404, "QueueNotFound")
	checkError(t, e.do(t, "DELETE", acct+"/hostq/messages/not-a-uuid?popreceipt=AAAA", "", nil, nil), 400, "InvalidQueryParameterValue")
}

func TestRawCORS(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/corsq", "", nil, nil)
	pre := func(origin, method, headers string) rawResp {
		h := map[string]string{}
		if origin != "" {
			h["Origin"] = origin
		}
		if method != "" {
			h["Access-Control-Request-Method"] = method
		}
		if headers != "" {
			h["Access-Control-Request-Headers"] = headers
		}
		return e.do(t, "OPTIONS", acct+"/corsq/messages", "", nil, h)
	}
	checkError(t, pre("https://app.example", "GET", ""), 403, "CorsPreflightFailure")
	props := `<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Cors><CorsRule><AllowedOrigins>https://app.example</AllowedOrigins><AllowedMethods>GET,POST</AllowedMethods><AllowedHeaders>x-ms-meta*,content-type</AllowedHeaders><ExposedHeaders>x-ms-request-id</ExposedHeaders><MaxAgeInSeconds>300</MaxAgeInSeconds></CorsRule><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods><AllowedHeaders></AllowedHeaders><ExposedHeaders></ExposedHeaders><MaxAgeInSeconds>0</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>`
	if r := e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(props), nil); r.status != 202 {
		t.Fatalf("set properties: %d %s", r.status, r.body)
	}
	r := pre("https://app.example", "POST", "x-ms-meta-a, Content-Type")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.header.Get("Access-Control-Allow-Methods") != "POST" ||
		r.header.Get("Access-Control-Max-Age") != "300" || r.header.Get("Access-Control-Allow-Headers") == "" {
		t.Fatalf("preflight: %d %v", r.status, r.header)
	}
	checkError(t, pre("https://app.example", "DELETE", ""), 403, "CorsPreflightFailure")
	checkError(t, pre("https://app.example", "POST", "x-custom"), 403, "CorsPreflightFailure")
	checkError(t, pre("https://other.example", "POST", ""), 403, "CorsPreflightFailure")
	if r := pre("https://other.example", "GET", ""); r.status != 200 {
		t.Fatalf("wildcard rule: %d", r.status)
	}
	// A preflight without Origin or Access-Control-Request-Method is what
	// Azure's front end answers with 400 InvalidHeaderValue.
	for _, r := range []rawResp{pre("", "GET", ""), pre("https://app.example", "", "")} {
		checkError(t, r, 400, "InvalidHeaderValue")
		if !strings.Contains(r.body, "<Message>A required CORS header is not present.") {
			t.Fatalf("preflight without a CORS header: %s", r.body)
		}
	}

	// Actual requests get CORS headers when a rule matches.
	r = e.do(t, "GET", acct+"/corsq/messages?peekonly=true", "", nil, map[string]string{"Origin": "https://app.example"})
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.header.Get("Access-Control-Expose-Headers") != "x-ms-request-id" ||
		r.header.Get("Vary") != "Origin" || r.header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("actual request: %v", r.header)
	}
	// A rule allowing every origin answers "*", which does not depend on
	// the origin: the CORS documentation sets Vary: Origin only when the
	// origin matched a rule exactly, and so does Azurite.
	r = e.do(t, "GET", acct+"/corsq/messages?peekonly=true", "", nil, map[string]string{"Origin": "https://x.example"})
	if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Vary") != "" || r.header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("wildcard actual request: %v", r.header)
	}
	r = e.do(t, "DELETE", acct+"/corsq/messages", "", nil, map[string]string{"Origin": "https://app.example"})
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("unmatched method got CORS headers: %v", r.header)
	}
}

func TestRawServicePropertiesErrors(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	get := func() string {
		return e.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil).body
	}
	before := get()
	set := func(body string) rawResp {
		return e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(body), nil)
	}
	for _, tc := range []struct{ body, code string }{
		{"<StorageServiceProperties><DefaultServiceVersion>2020-02-10</DefaultServiceVersion></StorageServiceProperties>", "InvalidXmlDocument"},
		{"<StorageServiceProperties><Logging>", "InvalidXmlDocument"},
		{"<Other/>", "InvalidXmlDocument"},
		{"", "InvalidXmlDocument"},
		{"<StorageServiceProperties><HourMetrics><Version>1.0</Version><Enabled>yes</Enabled></HourMetrics></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"<StorageServiceProperties><HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs><RetentionPolicy><Enabled>true</Enabled><Days>366</Days></RetentionPolicy></HourMetrics></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"<StorageServiceProperties><Logging><Version>2.0</Version></Logging></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods><MaxAgeInSeconds>-1</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>", "InvalidXmlNodeValue"},
		{"<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>*</AllowedOrigins></CorsRule></Cors></StorageServiceProperties>", "InvalidXmlDocument"},
	} {
		checkError(t, set(tc.body), 400, tc.code)
		if after := get(); after != before {
			t.Fatalf("rejected properties changed state:\n%s\n%s", before, after)
		}
	}
	big := bytes.Repeat([]byte(" "), 131585)
	checkError(t, set(string(big)), 413, "RequestBodyTooLarge")
}

func TestRawACLErrors(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/aclq", "", nil, nil)
	set := func(body string) rawResp {
		return e.do(t, "PUT", acct+"/aclq?comp=acl", "", strings.NewReader(body), nil)
	}
	ok := `<SignedIdentifiers><SignedIdentifier><Id>p1</Id><AccessPolicy><Start>2030-01-01T00:00:00Z</Start><Expiry>2030-01-02T00:00:00.0000000Z</Expiry><Permission>ra</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`
	if r := set(ok); r.status != 204 {
		t.Fatalf("set acl: %d %s", r.status, r.body)
	}
	r := e.do(t, "GET", acct+"/aclq?comp=acl", "", nil, nil)
	want := `<SignedIdentifiers><SignedIdentifier><Id>p1</Id><AccessPolicy><Start>2030-01-01T00:00:00.0000000Z</Start><Expiry>2030-01-02T00:00:00.0000000Z</Expiry><Permission>ra</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`
	if r.status != 200 || !strings.Contains(r.body, want) {
		t.Fatalf("get acl: %s", r.body)
	}
	for _, tc := range []struct{ body, code string }{
		{"<SignedIdentifiers><SignedIdentifier>", "InvalidXmlDocument"},
		{"<Wrong/>", "InvalidXmlDocument"},
		{`<SignedIdentifiers><SignedIdentifier><Id>p</Id><AccessPolicy><Permission>rwx</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`, "InvalidXmlDocument"},
		{`<SignedIdentifiers><SignedIdentifier><Id>` + strings.Repeat("i", 65) + `</Id></SignedIdentifier></SignedIdentifiers>`, "InvalidXmlDocument"},
		{`<SignedIdentifiers><SignedIdentifier><Id>p</Id><AccessPolicy><Start>tomorrow</Start></AccessPolicy></SignedIdentifier></SignedIdentifiers>`, "InvalidXmlNodeValue"},
		{`<SignedIdentifiers><SignedIdentifier><AccessPolicy/></SignedIdentifier></SignedIdentifiers>`, "InvalidXmlDocument"},
	} {
		checkError(t, set(tc.body), 400, tc.code)
		if after := e.do(t, "GET", acct+"/aclq?comp=acl", "", nil, nil); after.body != r.body {
			t.Fatalf("rejected ACL changed state: %s", after.body)
		}
	}
	checkError(t, e.do(t, "GET", acct+"/nosuch?comp=acl", "", nil, nil), 404, "QueueNotFound")
}

func TestRecoverPanics(t *testing.T) {
	var logs syncBuffer
	s := server.New(server.Options{AllowAnonymous: true, Logger: slogTo(&logs)})
	defer s.Close()
	req := httptest.NewRequest("GET", "/devstoreaccount1?comp=list", nil)
	req.URL = nil // a request no server would build; the handler must not crash
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != 500 || w.Header().Get("x-ms-error-code") != "InternalError" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	if !strings.Contains(logs.String(), "panic") || !strings.Contains(logs.String(), "status=500") {
		t.Fatalf("panic not logged: %s", logs.String())
	}
}

func TestLogging(t *testing.T) {
	var buf syncBuffer
	// Successful requests are logged at debug level.
	e := newRawEnv(t, server.Options{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r := e.do(t, "PUT", acct+"/logged", "", nil, nil)
	line := buf.String()
	for _, want := range []string{"method=PUT", "path=/devstoreaccount1/logged", "op=CreateQueue", "status=201", "duration=", "request_id=" + r.header.Get("x-ms-request-id")} {
		if !strings.Contains(line, want) {
			t.Fatalf("log lacks %q: %s", want, line)
		}
	}
	buf.Reset()
	e.do(t, "GET", acct+"/nosuch/messages", "", nil, nil)
	if !strings.Contains(buf.String(), "status=404") || !strings.Contains(buf.String(), "error_code=QueueNotFound") {
		t.Fatalf("error log: %s", buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the server goroutine to write
// while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestRawSharedKeyLite signs requests with Shared Key Lite, which no Go
// SDK client produces, end to end through the handler.
func TestRawSharedKeyLite(t *testing.T) {
	e := newEnv(t, server.Options{})
	acctInfo := server.DevelopmentAccount()
	key, err := base64.StdEncoding.DecodeString(acctInfo.Keys[0])
	if err != nil {
		t.Fatal(err)
	}
	send := func(method, path, rawQuery, body string, k []byte, extra ...string) (*http.Response, string) {
		req, _ := http.NewRequest(method, e.hs.URL+path+"?"+rawQuery, strings.NewReader(body))
		req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
		req.Header.Set("x-ms-version", "2018-03-28")
		if body != "" {
			req.Header.Set("Content-Type", "application/xml")
		}
		for i := 0; i+1 < len(extra); i += 2 {
			req.Header.Set(extra[i], extra[i+1])
		}
		var names []string
		for h := range req.Header {
			if lh := strings.ToLower(h); strings.HasPrefix(lh, "x-ms-") {
				names = append(names, lh)
			}
		}
		sort.Strings(names)
		var canon strings.Builder
		for _, n := range names {
			canon.WriteString(n + ":" + strings.TrimSpace(req.Header.Get(n)) + "\n")
		}
		resource := "/" + acctInfo.Name + path
		if v := req.URL.Query().Get("comp"); v != "" {
			resource += "?comp=" + v
		}
		sts := method + "\n\n" + req.Header.Get("Content-Type") + "\n\n" + canon.String() + resource
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(sts))
		req.Header.Set("Authorization", "SharedKeyLite "+acctInfo.Name+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		resp, err := e.hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	// id and receipt carry the dequeued message from step to step.
	var id, receipt string
	acl := `<SignedIdentifiers><SignedIdentifier><Id>lite</Id><AccessPolicy><Expiry>2030-01-02T00:00:00Z</Expiry><Permission>r</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`
	props := `<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>https://lite.example</AllowedOrigins><AllowedMethods>GET</AllowedMethods><AllowedHeaders></AllowedHeaders><ExposedHeaders></ExposedHeaders><MaxAgeInSeconds>5</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>`
	for _, c := range []struct {
		method, path string
		query        func() string
		body         string
		extra        []string // more request headers, name then value
		want         int
		check        func(h http.Header, body string) bool
	}{
		{"PUT", acct + "/lite", nil, "", nil, 201, nil},
		{"PUT", acct + "/lite", func() string { return "comp=metadata" }, "", []string{"x-ms-meta-tier", "gold"}, 204, nil},
		{"GET", acct + "/lite", func() string { return "comp=metadata" }, "", nil, 200, func(h http.Header, _ string) bool { return h.Get("x-ms-meta-tier") == "gold" }},
		{"HEAD", acct + "/lite", func() string { return "comp=metadata" }, "", nil, 200, func(h http.Header, body string) bool {
			return h.Get("x-ms-meta-tier") == "gold" && h.Get("x-ms-approximate-messages-count") == "0" && body == ""
		}},
		{"POST", acct + "/lite/messages", func() string { return "messagettl=60" }, msgBody("lite"), nil, 201, nil},
		{"GET", acct + "/lite/messages", func() string { return "peekonly=true" }, "", nil, 200, func(_ http.Header, body string) bool {
			return strings.Contains(body, "<MessageText>lite</MessageText>")
		}},
		{"GET", acct + "/lite/messages", func() string { return "visibilitytimeout=30" }, "", nil, 200, func(_ http.Header, body string) bool {
			if m := idRe.FindStringSubmatch(body); m != nil {
				id, receipt = m[1], receiptRe.FindStringSubmatch(body)[1]
			}
			return id != "" && strings.Contains(body, "<DequeueCount>1</DequeueCount>")
		}},
		{"PUT", acct + "/lite/messages/", func() string { return "popreceipt=" + urlEscape(receipt) + "&visibilitytimeout=0" }, msgBody("updated"), nil, 204, func(h http.Header, _ string) bool {
			receipt = h.Get("x-ms-popreceipt")
			return receipt != ""
		}},
		{"DELETE", acct + "/lite/messages/", func() string { return "popreceipt=" + urlEscape(receipt) }, "", nil, 204, nil},
		{"POST", acct + "/lite/messages", nil, msgBody("to clear"), nil, 201, nil},
		{"DELETE", acct + "/lite/messages", nil, "", nil, 204, func(http.Header, string) bool { return (&rawEnv{env: e}).count(t, "lite") == 0 }},
		{"PUT", acct + "/lite", func() string { return "comp=acl" }, acl, nil, 204, nil},
		{"GET", acct + "/lite", func() string { return "comp=acl" }, "", nil, 200, func(_ http.Header, body string) bool { return strings.Contains(body, "<Id>lite</Id>") }},
		{"HEAD", acct + "/lite", func() string { return "comp=acl" }, "", nil, 200, nil},
		{"GET", acct, func() string { return "comp=list" }, "", nil, 200, func(_ http.Header, body string) bool { return strings.Contains(body, "<Name>lite</Name>") }},
		{"PUT", acct + "/", func() string { return "restype=service&comp=properties" }, props, nil, 202, nil},
		{"GET", acct + "/", func() string { return "restype=service&comp=properties" }, "", nil, 200, func(_ http.Header, body string) bool {
			return strings.Contains(body, "<AllowedOrigins>https://lite.example</AllowedOrigins>")
		}},
		// An actual request with a matching Origin gets the rule's headers.
		{"GET", acct + "/lite/messages", func() string { return "peekonly=true" }, "", []string{"Origin", "https://lite.example"}, 200, func(h http.Header, _ string) bool {
			return h.Get("Access-Control-Allow-Origin") == "https://lite.example"
		}},
		{"GET", acct + "-secondary/", func() string { return "restype=service&comp=stats" }, "", nil, 200, func(_ http.Header, body string) bool { return strings.Contains(body, "<Status>live</Status>") }},
		{"DELETE", acct + "/lite", nil, "", nil, 204, nil},
	} {
		path, query := c.path, ""
		if strings.HasSuffix(path, "/messages/") {
			path += id
		}
		if c.query != nil {
			query = c.query()
		}
		r, body := send(c.method, path, query, c.body, key, c.extra...)
		if r.StatusCode != c.want {
			t.Fatalf("%s %s?%s: %d (%s)", c.method, path, query, r.StatusCode, r.Header.Get("x-ms-error-code"))
		}
		if c.check != nil && !c.check(r.Header, body) {
			t.Fatalf("%s %s?%s: unexpected response %v %s", c.method, path, query, r.Header, body)
		}
	}
	if _, err := e.srv.Service("devstoreaccount1").Queue("lite"); err == nil {
		t.Fatal("queue survived Delete Queue")
	}
	wrong := append([]byte(nil), key...)
	wrong[0] ^= 1
	if r, _ := send("POST", acct+"/lite/messages", "", msgBody("x"), wrong); r.StatusCode != 403 || r.Header.Get("x-ms-error-code") != "AuthenticationFailed" {
		t.Fatalf("wrong key: %d %s", r.StatusCode, r.Header.Get("x-ms-error-code"))
	}
}

// TestRawEscapesAnyContent: content seeded through the core may hold bytes
// XML cannot carry; the response stays well-formed, carriage returns
// survive, and what XML cannot carry becomes U+FFFD.
func TestRawEscapesAnyContent(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	q, _, err := e.srv.Service("devstoreaccount1").CreateQueue(context.Background(), "anybytes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(context.Background(), "a\x00\x01b\r\nc\xff<\"'>&\U0001F600\uFFFE", nil); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, "GET", acct+"/anybytes/messages?peekonly=true", "", nil, nil)
	var doc struct {
		Messages []struct {
			Text string `xml:"MessageText"`
		} `xml:"QueueMessage"`
	}
	if err := xml.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatalf("peek body is not XML: %v\n%q", err, r.body)
	}
	want := "a\uFFFD\uFFFDb\r\nc\uFFFD<\"'>&\U0001F600\uFFFD"
	if len(doc.Messages) != 1 || doc.Messages[0].Text != want {
		t.Fatalf("text %+q, want %+q", doc.Messages, want)
	}
}

func TestRawOldGetVisibilityAndIPv6(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/oldget", "", nil, nil)
	d := checkError(t, e.do(t, "GET", acct+"/oldget/messages?visibilitytimeout=7201", "", nil, map[string]string{"x-ms-version": "2009-09-19"}), 400, "OutOfRangeQueryParameterValue")
	if d["MaximumAllowed"] != "7200" {
		t.Fatalf("details %v", d)
	}
	if r := e.do(t, "GET", acct+"/oldget/messages?visibilitytimeout=7200", "", nil, map[string]string{"x-ms-version": "2009-09-19"}); r.status != 200 {
		t.Fatalf("7200 s at 2009-09-19: %d %s", r.status, r.body)
	}
	// An IPv6 literal host is path-style.
	if r := e.do(t, "GET", acct+"/oldget?comp=metadata", "[::1]:10001", nil, nil); r.status != 200 {
		t.Fatalf("IPv6 host: %d %s", r.status, r.body)
	}
}

func TestRawListClampsMaxResults(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	svc := e.srv.Service("devstoreaccount1")
	for i := 0; i < 5002; i++ {
		if _, _, err := svc.CreateQueue(context.Background(), fmt.Sprintf("q%05d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, query := range []string{"comp=list&maxresults=6000", "comp=list"} {
		r := e.do(t, "GET", acct+"?"+query, "", nil, nil)
		if r.status != 200 || strings.Count(r.body, "<Queue>") != 5000 || strings.Contains(r.body, "<NextMarker />") {
			t.Fatalf("%s: %d, %d queues", query, r.status, strings.Count(r.body, "<Queue>"))
		}
	}
}

// TestRawServicePropertiesOrder: Get Queue Service Properties writes the
// Logging settings in the order Azure's answers have them (Version, Read,
// Write, Delete, RetentionPolicy), whatever order they were set in.
func TestRawServicePropertiesOrder(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	set := `<StorageServiceProperties><Logging><Version>1.0</Version><Delete>true</Delete><Read>true</Read><Write>false</Write><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging></StorageServiceProperties>`
	if r := e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(set), nil); r.status != 202 {
		t.Fatalf("set properties: %d %s", r.status, r.body)
	}
	r := e.do(t, "GET", acct+"/?restype=service&comp=properties", "", nil, nil)
	want := `<StorageServiceProperties><Logging><Version>1.0</Version><Read>true</Read><Write>false</Write><Delete>true</Delete><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging><HourMetrics>`
	if r.status != 200 || !strings.Contains(r.body, want) {
		t.Fatalf("get properties: %d %s", r.status, r.body)
	}
}

// TestRawErrorTimeBeforeAccount: errors raised before the account is
// known (unknown account, no account in the path) still take Date and
// the message's Time from the server's clock.
func TestRawErrorTimeBeforeAccount(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.clk.Add(36 * time.Hour)
	for _, tc := range []struct {
		path, code string
		status     int
	}{
		{"/nosuchaccount?comp=list", "ResourceNotFound", 404},
		{"/", "InvalidUri", 400},
	} {
		r := e.do(t, "GET", tc.path, "", nil, nil)
		checkError(t, r, tc.status, tc.code)
		d, err := time.Parse(time.RFC1123, r.header.Get("Date"))
		if err != nil || !d.Equal(e.clk.Now()) {
			t.Fatalf("%s: Date %q, clock %v", tc.path, r.header.Get("Date"), e.clk.Now())
		}
		if want := "\nTime:" + e.clk.Now().UTC().Format("2006-01-02T15:04:05.0000000Z") + "</Message>"; !strings.Contains(r.body, want) {
			t.Fatalf("%s: message time, want %q: %s", tc.path, want, r.body)
		}
	}
}

// TestRawHugeHeaders: over-long header values are refused with Azure's
// Error XML and a 400, never a 5xx, and change nothing.
func TestRawHugeHeaders(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	if r := e.do(t, "PUT", acct+"/huge", "", nil, map[string]string{"x-ms-meta-owner": "me"}); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	longID := strings.Repeat("i", 2048)
	longVersion := strings.Repeat("9", 64<<10)
	longMeta := strings.Repeat("m", 64<<10)
	put := func(hdr map[string]string) rawResp {
		return e.do(t, "POST", acct+"/huge/messages", "", strings.NewReader(msgBody("x")), hdr)
	}
	tests := []struct {
		name   string
		r      func() rawResp
		code   string
		header string // HeaderName detail, if any
		sent   string
	}{
		{"client request id 2 KiB", func() rawResp { return put(map[string]string{"x-ms-client-request-id": longID}) }, "InvalidHeaderValue", "x-ms-client-request-id", longID},
		{"version 64 KiB", func() rawResp { return put(map[string]string{"x-ms-version": longVersion}) }, "InvalidHeaderValue", "x-ms-version", longVersion},
		{"metadata 64 KiB on create", func() rawResp {
			return e.do(t, "PUT", acct+"/huge2", "", nil, map[string]string{"x-ms-meta-big": longMeta})
		}, "MetadataTooLarge", "", ""},
		{"metadata 64 KiB on set", func() rawResp {
			return e.do(t, "PUT", acct+"/huge?comp=metadata", "", nil, map[string]string{"x-ms-meta-big": longMeta})
		}, "MetadataTooLarge", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r()
			d := checkError(t, r, 400, tc.code)
			if tc.header != "" && (d["HeaderName"] != tc.header || d["HeaderValue"] == "" || !strings.HasPrefix(tc.sent, d["HeaderValue"])) {
				t.Fatalf("details %v", d)
			}
			if got := r.header.Get("x-ms-client-request-id"); len(got) > 1024 {
				t.Fatalf("echoed a %d-byte client request id", len(got))
			}
			if len(r.body) > 4096 {
				t.Fatalf("error body of %d bytes", len(r.body))
			}
			if n := e.count(t, "huge"); n != 0 {
				t.Fatalf("rejected request changed the queue: %d messages", n)
			}
			md := e.do(t, "GET", acct+"/huge?comp=metadata", "", nil, nil)
			if md.status != 200 || md.header.Get("x-ms-meta-owner") != "me" || md.header.Get("x-ms-meta-big") != "" {
				t.Fatalf("metadata after rejected request: %d %v", md.status, md.header)
			}
			if _, err := e.srv.Service("devstoreaccount1").Queue("huge2"); err == nil {
				t.Fatal("rejected create made the queue")
			}
		})
	}
	// 1 KiB is the documented limit: accepted and echoed.
	id := strings.Repeat("k", 1024)
	r := put(map[string]string{"x-ms-client-request-id": id})
	if r.status != 201 || r.header.Get("x-ms-client-request-id") != id {
		t.Fatalf("1 KiB client request id: %d %s", r.status, r.body)
	}
}

// TestRawAuthenticationRequired: with authentication on (no
// AllowAnonymous), what a request without usable credentials gets.
func TestRawAuthenticationRequired(t *testing.T) {
	base := newEnv(t, server.Options{})
	e := &rawEnv{env: base, client: base.hs.Client()}
	e.queue(t, "authon")
	if _, err := e.svc.SetProperties(context.Background(), &azqueue.SetPropertiesOptions{CORS: []*azqueue.CORSRule{{
		AllowedOrigins: to.Ptr("https://app.example"), AllowedMethods: to.Ptr("GET,POST"), AllowedHeaders: to.Ptr("x-ms-*"),
		ExposedHeaders: to.Ptr(""), MaxAgeInSeconds: to.Ptr(int32(120)),
	}}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		method      string
		path        string
		hdr         map[string]string
		status      int
		code        string
		wwwAuth     bool
		corsAllowed bool
	}{
		{"malformed shared key", "GET", acct + "/authon?comp=metadata", map[string]string{"Authorization": "SharedKey x"}, 400, "InvalidAuthenticationInfo", false, false},
		{"unknown scheme", "GET", acct + "/authon/messages?peekonly=true", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, 400, "InvalidAuthenticationInfo", false, false},
		{"no credentials", "POST", acct + "/authon/messages", nil, 401, "NoAuthenticationInformation", true, false},
		{"no credentials, HEAD", "HEAD", acct + "/authon?comp=metadata", nil, 401, "NoAuthenticationInformation", true, false},
		// Preflight is never authenticated: it succeeds or fails on the
		// CORS rules alone.
		{"preflight", "OPTIONS", acct + "/authon/messages", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-ms-version"}, 200, "", false, true},
		{"preflight with a bad credential", "OPTIONS", acct + "/authon/messages", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET", "Authorization": "SharedKey x"}, 200, "", false, true},
		{"preflight, no rule", "OPTIONS", acct + "/authon/messages", map[string]string{"Origin": "https://other.example", "Access-Control-Request-Method": "GET"}, 403, "CorsPreflightFailure", false, false},
		{"preflight, method not allowed", "OPTIONS", acct + "/authon", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "DELETE"}, 403, "CorsPreflightFailure", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, tc.method, tc.path, "", nil, tc.hdr)
			if tc.code != "" {
				checkError(t, r, tc.status, tc.code)
			} else if r.status != tc.status {
				t.Fatalf("%d %v %s", r.status, r.header, r.body)
			}
			if got := r.header.Get("WWW-Authenticate"); (got != "") != tc.wwwAuth || (tc.wwwAuth && !strings.HasPrefix(got, "Bearer authorization_uri=https://login.microsoftonline.com/")) {
				t.Fatalf("WWW-Authenticate %q", got)
			}
			if tc.corsAllowed && (r.header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.header.Get("Access-Control-Max-Age") != "120") {
				t.Fatalf("preflight headers %v", r.header)
			}
			if n := e.count(t, "authon"); n != 0 {
				t.Fatalf("refused request changed the queue: %d", n)
			}
		})
	}
}

// TestRawHeadACLAndStats: HEAD ?comp=acl answers like GET without a
// body; the secondary serves stats to an anonymous reader when the
// option allows.
func TestRawHeadACLAndStats(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/headacl", "", nil, nil)
	policy := `<SignedIdentifiers><SignedIdentifier><Id>p1</Id><AccessPolicy><Expiry>2030-01-02T00:00:00Z</Expiry><Permission>r</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`
	if r := e.do(t, "PUT", acct+"/headacl?comp=acl", "", strings.NewReader(policy), nil); r.status != 204 {
		t.Fatalf("set acl: %d %s", r.status, r.body)
	}
	get := e.do(t, "GET", acct+"/headacl?comp=acl", "", nil, nil)
	head := e.do(t, "HEAD", acct+"/headacl?comp=acl", "", nil, nil)
	if get.status != 200 || head.status != 200 || head.body != "" || head.header.Get("Content-Type") != "application/xml" ||
		head.header.Get("Content-Length") != get.header.Get("Content-Length") || head.header.Get("x-ms-request-id") == "" {
		t.Fatalf("HEAD acl: %d %v %q (GET %d %v)", head.status, head.header, head.body, get.status, get.header)
	}
	r := e.do(t, "HEAD", acct+"/nosuch?comp=acl", "", nil, nil)
	checkError(t, r, 404, "QueueNotFound")
	if r.body != "" {
		t.Fatal("HEAD error with a body")
	}
	r = e.do(t, "GET", acct+"-secondary/?restype=service&comp=stats", "", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, "<Status>live</Status>") {
		t.Fatalf("anonymous stats: %d %s", r.status, r.body)
	}
}

// TestRawPathStyleOnly: with Options.PathStyleOnly (Azurite's
// --disableProductStyleUrl), a host whose first label names an account
// is only a host name, and the account is the first path segment.
func TestRawPathStyleOnly(t *testing.T) {
	hostStyle := "devstoreaccount1.queue.localhost"
	for _, pathOnly := range []bool{false, true} {
		e := newRawEnv(t, server.Options{PathStyleOnly: pathOnly})
		// Host-style reads "devstoreaccount1/jobs" as the queue
		// "devstoreaccount1" and a resource "jobs" below it, which does
		// not exist; path-style creates the queue "jobs".
		r := e.do(t, "PUT", "/devstoreaccount1/jobs", hostStyle, nil, nil)
		if (r.status == 201) != pathOnly {
			t.Errorf("PathStyleOnly %v: create answered %d %s", pathOnly, r.status, r.body)
		}
		_, err := e.srv.Service("devstoreaccount1").Queue("jobs")
		if got := err == nil; got != pathOnly {
			t.Errorf("PathStyleOnly %v: queue jobs created: %v, want %v", pathOnly, got, pathOnly)
		}
	}
}
