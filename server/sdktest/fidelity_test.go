package sdktest_test

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq/server"
)

// TestRawVaryOriginWithoutMatch: once the account has CORS rules, the
// answer to a GET or HEAD depends on the Origin (another origin might
// match), so it carries Vary: Origin even when no rule matches.
func TestRawVaryOriginWithoutMatch(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/varyq", "", nil, nil)
	origin := map[string]string{"Origin": "https://nomatch.example"}
	if r := e.do(t, "GET", acct+"/varyq/messages?peekonly=true", "", nil, origin); r.header.Get("Vary") != "" {
		t.Fatalf("no CORS rules, yet Vary: %q", r.header.Get("Vary"))
	}
	props := `<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>https://app.example</AllowedOrigins><AllowedMethods>GET,HEAD,POST</AllowedMethods><AllowedHeaders></AllowedHeaders><ExposedHeaders></ExposedHeaders><MaxAgeInSeconds>60</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>`
	if r := e.do(t, "PUT", acct+"/?restype=service&comp=properties", "", strings.NewReader(props), nil); r.status != 202 {
		t.Fatalf("set properties: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		method, path string
		wantVary     bool
	}{
		{"GET", acct + "/varyq/messages?peekonly=true", true},
		{"HEAD", acct + "/varyq?comp=metadata", true},
		{"GET", acct + "/varyq?comp=metadata", true},
		{"POST", acct + "/varyq/messages", false},
	} {
		var body *strings.Reader
		if c.method == "POST" {
			body = strings.NewReader(msgBody("v"))
		}
		var r rawResp
		if body != nil {
			r = e.do(t, c.method, c.path, "", body, origin)
		} else {
			r = e.do(t, c.method, c.path, "", nil, origin)
		}
		if r.status >= 300 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
		if got := r.header.Get("Vary") == "Origin"; got != c.wantVary {
			t.Errorf("%s %s from an unmatched origin: Vary %q, want Origin: %v", c.method, c.path, r.header.Get("Vary"), c.wantVary)
		}
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s %s: an unmatched origin got Access-Control-Allow-Origin", c.method, c.path)
		}
	}
	// A matched origin still gets Vary once, with the CORS headers.
	r := e.do(t, "GET", acct+"/varyq/messages?peekonly=true", "", nil, map[string]string{"Origin": "https://app.example"})
	if vs := r.header.Values("Vary"); len(vs) != 1 || vs[0] != "Origin" || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("matched origin: Vary %q, headers %v", vs, r.header)
	}
}

// TestRawLongTimeToLive: messagettl takes any positive 64-bit count of
// seconds, as Put Message allows; an expiry past what azq can represent
// saturates at 9999-12-31T23:59:59Z, and a value past 64 bits is not a
// number the service accepts.
func TestRawLongTimeToLive(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/ttlq", "", nil, nil)
	expiry := func(r rawResp) string {
		t.Helper()
		var l struct {
			M struct {
				Inserted string `xml:"InsertionTime"`
				Expires  string `xml:"ExpirationTime"`
			} `xml:"QueueMessage"`
		}
		if r.status != 201 {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		if err := xml.Unmarshal([]byte(r.body), &l); err != nil {
			t.Fatal(err)
		}
		ins, err := time.Parse(time.RFC1123, l.M.Inserted)
		if err != nil {
			t.Fatal(err)
		}
		return ins.Format(time.RFC3339) + " " + l.M.Expires
	}
	put := func(ttl string) rawResp {
		return e.do(t, "POST", acct+"/ttlq/messages?messagettl="+ttl, "", strings.NewReader(msgBody("t")), nil)
	}
	// Just past 32 bits: an exact expiry, 68 years on.
	got := expiry(put("2147483648"))
	ins, _ := time.Parse(time.RFC3339, strings.Fields(got)[0])
	if want := ins.Add(2147483648 * time.Second).UTC().Format(time.RFC1123); !strings.HasSuffix(got, want[:len(want)-3]+"GMT") {
		t.Fatalf("messagettl=2147483648: %s, want expiry %s", got, want)
	}
	for _, ttl := range []string{"9223372036854775807", "9223372036", "315360000000"} {
		if got := expiry(put(ttl)); !strings.HasSuffix(got, "Fri, 31 Dec 9999 23:59:59 GMT") {
			t.Fatalf("messagettl=%s: %s, want the expiry saturated at 9999-12-31", ttl, got)
		}
	}
	checkError(t, put("9223372036854775808"), 400, "InvalidQueryParameterValue")
	d := checkError(t, put("0"), 400, "OutOfRangeQueryParameterValue")
	if d["MaximumAllowed"] != "9223372036854775807" {
		t.Fatalf("messagettl=0 details %v", d)
	}
	if n := e.count(t, "ttlq"); n != 4 {
		t.Fatalf("%d messages stored, want 4", n)
	}
}

// TestRawStrictVersionKnowsNewestSDKs: -strict-version accepts the
// versions the newest Azure SDKs send and refuses later ones.
func TestRawStrictVersionKnowsNewestSDKs(t *testing.T) {
	e := newRawEnv(t, server.Options{StrictVersion: true})
	for _, v := range []string{"2026-02-06", "2026-04-06", "2026-06-06"} {
		if r := e.do(t, "GET", acct+"?comp=list", "", nil, map[string]string{"x-ms-version": v}); r.status != 200 || r.header.Get("x-ms-version") != v {
			t.Fatalf("x-ms-version %s under strict mode: %d %s", v, r.status, r.body)
		}
	}
	for _, v := range []string{"2026-06-07", "2027-01-01", "2026-02-30"} {
		checkError(t, e.do(t, "GET", acct+"?comp=list", "", nil, map[string]string{"x-ms-version": v}), 400, "InvalidHeaderValue")
	}
}

// TestRawWriteToSecondary: the secondary endpoint of an RA-GRS account is
// read-only; Azure refuses writes with 403 InsufficientAccountPermissions.
func TestRawWriteToSecondary(t *testing.T) {
	e := newRawEnv(t, server.Options{})
	e.do(t, "PUT", acct+"/secq", "", nil, nil)
	for _, w := range []struct{ method, path string }{
		{"POST", "/devstoreaccount1-secondary/secq/messages"},
		{"PUT", "/devstoreaccount1-secondary/secq?comp=metadata"},
		{"DELETE", "/devstoreaccount1-secondary/secq"},
		{"PUT", "/devstoreaccount1-secondary/?restype=service&comp=properties"},
	} {
		r := e.do(t, w.method, w.path, "", strings.NewReader(msgBody("x")), nil)
		checkError(t, r, 403, "InsufficientAccountPermissions")
		if !strings.Contains(r.body, "<Message>Write operations are not allowed.") {
			t.Fatalf("%s %s: %s", w.method, w.path, r.body)
		}
	}
	if n := e.count(t, "secq"); n != 0 {
		t.Fatalf("a write to the secondary stored %d messages", n)
	}
}

// TestLogLevels: one record per request, at debug level for a success,
// info for a client error (with Azure's error code), error for a server
// error, each naming the operation, account, queue, status, duration,
// x-ms-version and User-Agent.
func TestLogLevels(t *testing.T) {
	var buf syncBuffer
	e := newRawEnv(t, server.Options{Logger: slogTo(&buf)}) // info level
	hdr := map[string]string{"x-ms-version": "2021-12-02", "User-Agent": "logtest/1.0"}
	e.do(t, "PUT", acct+"/levels", "", nil, hdr)
	if s := buf.String(); s != "" {
		t.Fatalf("a successful request was logged at info level: %s", s)
	}
	e.do(t, "GET", acct+"/nosuch/messages", "", nil, hdr)
	line := buf.String()
	for _, want := range []string{"level=INFO", "op=GetMessages", "account=devstoreaccount1", "queue=nosuch", "status=404",
		"error_code=QueueNotFound", "duration=", "x_ms_version=2021-12-02", "user_agent=logtest/1.0"} {
		if !strings.Contains(line, want) {
			t.Fatalf("4xx record lacks %q: %s", want, line)
		}
	}
	if n := strings.Count(line, "\n"); n != 1 {
		t.Fatalf("%d records for one request: %s", n, line)
	}
}
