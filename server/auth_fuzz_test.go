package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// fuzzOps are the operations each fuzz input is authorized for: queue- and
// message-level, service-level, and an ACL operation, so that every
// branch of the permission tables is reachable.
var fuzzOps = []struct {
	op    operation
	path  string
	queue string
}{
	{opPeekMessages, "/devstoreaccount1/myqueue/messages", "myqueue"},
	{opPutMessage, "/devstoreaccount1/myqueue/messages", "myqueue"},
	{opListQueues, "/devstoreaccount1/", ""},
	{opSetQueueACL, "/devstoreaccount1/myqueue", "myqueue"},
}

// fuzzRequest builds a request by hand: httptest.NewRequest panics on
// input the fuzzer will certainly produce, and a real server can hand the
// handler the same raw strings.
func fuzzRequest(path, rawQuery string) *http.Request {
	return &http.Request{
		Method:     "GET",
		URL:        &url.URL{Path: path, RawQuery: rawQuery},
		RequestURI: path + "?" + rawQuery,
		Header:     http.Header{},
		RemoteAddr: "192.0.2.10:50000",
	}
}

func fuzzPolicy(queue, id string) (azq.AccessPolicy, bool, error) {
	switch id {
	case "p1":
		return azq.AccessPolicy{ID: id, Expiry: testNow.Add(time.Hour), Permission: "raup"}, true, nil
	case "p2":
		return azq.AccessPolicy{ID: id, Start: testNow, Permission: "zz"}, true, nil
	case "gone":
		return azq.AccessPolicy{}, false, &azq.Error{Code: azq.CodeQueueNotFound, StatusCode: 404, Message: "gone"}
	}
	return azq.AccessPolicy{}, false, nil
}

// checkAuthResult fails unless err is nil or an *azq.Error with an error
// status and a code, which is all the handler can turn into a response.
func checkAuthResult(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ae *azq.Error
	if !errors.As(err, &ae) {
		t.Fatalf("authorize returned %T %v, want *azq.Error", err, err)
	}
	if ae.Code == "" || ae.StatusCode < 400 || ae.StatusCode > 499 || ae.Message == "" {
		t.Fatalf("incomplete error %+v", ae)
	}
}

func FuzzParseSAS(f *testing.F) {
	for _, s := range []string{
		"sv=2020-02-10&se=2031-05-17T13%3A00%3A00Z&sp=raup&sig=AAAA",
		"sv=2020-02-10&ss=q&srt=sco&sp=rwdlacup&se=2031-05-17T13%3A00%3A00Z&spr=https%2Chttp&sig=AAAA",
		"sv=2021-06-08&ss=bq&srt=o&sp=r&st=2031-05-17&se=2031-05-18&sip=192.0.2.1-192.0.2.20&ses=x&sig=Zm9v",
		"sv=2013-08-15&si=p1&sig=abc%2B%2F%3D",
		"sv=2015-04-05&si=p2&se=2031-05-17T12:00:00.1234567Z&sig=x",
		"sv=2019-12-12&si=gone&sig=x",
		"sv=2015-02-21&sp=r&se=2031&sig=x&sip=::1-::2",
		"sig=&sv=",
		"sig=%zz&sv=2020-02-10",
		"sig=a;b&sv=2020-02-10",
		"sv=9999-99-99&sig=x",
		"sv=2020-02-10&sv=2020-02-10&sig=x",
		"sv=2020-02-10&sp=" + strings.Repeat("r", 2000) + "&sig=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		if !strings.Contains(query, "sig") {
			query += "&sig=x"
		}
		acct := Account{Name: "devstoreaccount1", Keys: []string{developmentAccountKey, "not base64!"}}
		for _, o := range fuzzOps {
			for _, secondary := range []bool{false, true} {
				err := authorize(authRequest{
					r: fuzzRequest(o.path, query), account: &acct, keys: acct.keyBytes(), secondary: secondary,
					queue: o.queue, op: o.op, now: testNow, policy: fuzzPolicy,
				})
				checkAuthResult(t, err)
			}
		}
	})
}

func FuzzAuthorizationHeader(f *testing.F) {
	for _, s := range []string{
		"SharedKey devstoreaccount1:AAAA",
		"SharedKeyLite devstoreaccount1:AAAA",
		"SharedKey devstoreaccount1:" + strings.Repeat("A", 44),
		"Bearer eyJ0eXAiOiJKV1QifQ.e30.sig",
		"SharedKey devstoreaccount1",
		"SharedKey :",
		"SharedKey a:b:c",
		"  SharedKey   devstoreaccount1:x  ",
		"Basic Zm9vOmJhcg==",
		"\x00\xff",
		"",
	} {
		f.Add(s, "/devstoreaccount1/myqueue", "comp=metadata&timeout=5")
	}
	f.Add("SharedKey devstoreaccount1:x", "/devstoreaccount1-secondary/my%2Fqueue/messages", "popreceipt=a%2Bb&popreceipt=c&Comp=x&comp=y")
	f.Add("SharedKey devstoreaccount1:x", "", "%")
	f.Fuzz(func(t *testing.T, header, path, query string) {
		acct := DevelopmentAccount()
		for _, o := range fuzzOps {
			r := fuzzRequest(path, query)
			r.Header["Authorization"] = []string{header}
			r.Header["X-Ms-Date"] = []string{header}
			r.Header["x-MS-weird"] = []string{query, path}
			r.Header["Content-Length"] = []string{"0"}
			err := authorize(authRequest{
				r: r, account: &acct, keys: acct.keyBytes(), secondary: strings.Contains(path, "-secondary"),
				queue: o.queue, op: o.op, now: testNow, policy: fuzzPolicy,
			})
			if err == nil {
				// Only a valid signature can pass, and the fuzzer does
				// not know the key; a pass means a verification bug.
				t.Fatalf("authorize accepted header %q path %q query %q", header, path, query)
			}
			checkAuthResult(t, err)
		}
	})
}

// FuzzDocumentedStringToSign: the string-to-sign built in one buffer for
// the common request is exactly the first candidate of
// sharedKeyStringsToSign, or the request is left to the candidates.
func FuzzDocumentedStringToSign(f *testing.F) {
	f.Add("POST", "/devstoreaccount1/myqueue/messages", "timeout=30", "x-ms-version", "2018-03-28", "X-Ms-Date", "Mon, 23 Nov 2026 10:00:00 GMT", "77")
	f.Add("DELETE", "/devstoreaccount1/myqueue/messages/0b1c", "popreceipt=AQAAAAAAAAAB%2Bab%2Fcd%3D&Timeout=5", "X-Ms-Client-Request-Id", " a , b ", "x-ms-version", "2009-09-19", "0")
	f.Add("GET", "/devstoreaccount1-secondary/q", "comp=metadata&Comp=list", "x-MS-date", "d", "X-Ms-Date", "e", "")
	f.Add("GET", "/devstoreaccount1/q", "", "X-Ms-Meta-\u00e9", "v", "Date", "Mon, 23 Nov 2026 10:00:00 GMT", "12")
	f.Add("PUT", "/devstoreaccount1/q", "comp=metadata", "X-Ms-Date", "Mon, 23 Nov 2026 10:00:00 GMT", "Date", "Mon, 23 Nov 2026 10:00:01 GMT", "")
	f.Fuzz(func(t *testing.T, method, path, query, k1, v1, k2, v2, clen string) {
		q, err := parseQuery(query)
		if err != nil || q.repeated != 0 {
			return // refused before any signature is checked
		}
		acct := DevelopmentAccount()
		r := fuzzRequest(path, query)
		r.Method = method
		r.Header[k1] = append(r.Header[k1], v1)
		r.Header[k2] = append(r.Header[k2], v2)
		if clen != "" {
			r.Header["Content-Length"] = []string{clen}
		}
		a := authRequest{r: r, query: q, account: &acct, secondary: strings.Contains(path, "-secondary")}
		got, ok := appendDocumentedStringToSign(nil, a)
		if !ok {
			return
		}
		if want := sharedKeyStringsToSign(a)[0]; string(got) != want {
			t.Fatalf("string to sign\n%q\nwant the first candidate\n%q", got, want)
		}
	})
}
