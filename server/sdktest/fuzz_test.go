package sdktest_test

import (
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
	"github.com/benbjohnson/clock"
)

// fuzzEnv is a server with one queue holding one visible message, driven
// in-process through ServeHTTP.
type fuzzEnv struct {
	srv     *server.Server
	q       *azq.Queue
	id      azq.MessageID
	receipt azq.PopReceipt
}

func newFuzzEnv(t *testing.T) *fuzzEnv {
	clk := clock.NewMock()
	clk.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := server.New(server.Options{Clock: clk, AllowAnonymous: true})
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	q, _, err := s.Service("devstoreaccount1").CreateQueue(ctx, "fuzz", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.Put(ctx, "seed", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fuzzEnv{srv: s, q: q, id: m.ID, receipt: m.PopReceipt}
}

// snapshot is everything a rejected request must leave alone.
type snapshot struct {
	msgs     []azq.Message
	count    int
	metadata map[string]string
	acl      []azq.AccessPolicy
}

func (f *fuzzEnv) snapshot(t *testing.T) snapshot {
	ctx := context.Background()
	var s snapshot
	var err error
	if s.msgs, err = f.q.Peek(ctx, 32); err != nil {
		t.Fatal(err)
	}
	if s.count, err = f.q.ApproximateCount(ctx); err != nil {
		t.Fatal(err)
	}
	if s.metadata, err = f.q.Metadata(ctx); err != nil {
		t.Fatal(err)
	}
	if s.acl, err = f.q.AccessPolicies(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fuzzEnv) serve(method, path, rawQuery string, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.URL.RawQuery = rawQuery
	if body == "" {
		req.ContentLength = 0
		req.Body = http.NoBody
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, req)
	return w
}

// checkWellFormed: 2xx, or Azure's Error XML with a matching
// x-ms-error-code; never 500, which would mean a recovered panic or an
// unmapped error.
func checkWellFormed(t *testing.T, w *httptest.ResponseRecorder) bool {
	t.Helper()
	if w.Code >= 200 && w.Code < 300 {
		return true
	}
	if w.Code >= 500 {
		t.Fatalf("server error %d: %s", w.Code, w.Body)
	}
	code := w.Header().Get("x-ms-error-code")
	var e struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
		Message string   `xml:"Message"`
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("status %d with a body that is not Error XML (%v): %q", w.Code, err, w.Body)
	}
	if code == "" || e.Code != code || !strings.Contains(e.Message, "\nRequestId:") {
		t.Fatalf("status %d: header code %q, body %+v", w.Code, code, e)
	}
	return false
}

var messageSeeds = []string{
	"<QueueMessage><MessageText>hello</MessageText></QueueMessage>",
	`<?xml version="1.0" encoding="utf-8"?>` + "\n<QueueMessage><MessageText>a &amp; b</MessageText></QueueMessage>",
	"<QueueMessage><MessageText><![CDATA[x]]></MessageText></QueueMessage>",
	"<QueueMessage><MessageText/></QueueMessage>",
	"<QueueMessage><MessageText>\r\n</MessageText></QueueMessage>",
	"<QueueMessage>",
	"<QueueMessage><MessageText>&#0;</MessageText></QueueMessage>",
	"<a:QueueMessage xmlns:a='x'><MessageText>ns</MessageText></a:QueueMessage>",
	"<QueueMessage><MessageText>]]></MessageText></QueueMessage>",
	"",
}

func FuzzMessageXML(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, body string, update bool) {
		env := newFuzzEnv(t)
		before := env.snapshot(t)
		var w *httptest.ResponseRecorder
		if update {
			w = env.serve("PUT", "/devstoreaccount1/fuzz/messages/"+env.id.String(),
				"visibilitytimeout=0&popreceipt="+urlEscape(env.receipt.String()), body)
		} else {
			w = env.serve("POST", "/devstoreaccount1/fuzz/messages", "", body)
		}
		if !checkWellFormed(t, w) {
			if after := env.snapshot(t); !reflect.DeepEqual(before, after) {
				t.Fatalf("rejected body changed the queue:\n%+v\n%+v", before, after)
			}
			return
		}
		// Accepted: the stored text is what an XML parser reads.
		var doc struct {
			XMLName xml.Name `xml:"QueueMessage"`
			Text    string   `xml:"MessageText"`
		}
		if err := xml.Unmarshal([]byte(body), &doc); err != nil && body != "" {
			t.Fatalf("accepted a body encoding/xml rejects (%v): %q", err, body)
		}
		msgs, err := env.q.Peek(context.Background(), 32)
		if err != nil {
			t.Fatal(err)
		}
		want := doc.Text
		if update && body == "" {
			want = "seed"
		}
		found := false
		for _, m := range msgs {
			if m.Content == want {
				found = true
			}
		}
		if !found {
			t.Fatalf("stored text differs from %q: %+v", want, msgs)
		}
	})
}

var propertiesSeeds = []string{
	`<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Logging><Version>1.0</Version><Read>true</Read><Write>false</Write><Delete>false</Delete><RetentionPolicy><Enabled>true</Enabled><Days>3</Days></RetentionPolicy></Logging></StorageServiceProperties>`,
	`<StorageServiceProperties><HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></HourMetrics></StorageServiceProperties>`,
	`<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET,PUT</AllowedMethods><AllowedHeaders>x-ms-meta*</AllowedHeaders><ExposedHeaders>*</ExposedHeaders><MaxAgeInSeconds>60</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>`,
	`<StorageServiceProperties><Cors/></StorageServiceProperties>`,
	`<StorageServiceProperties><DefaultServiceVersion>2020-02-10</DefaultServiceVersion></StorageServiceProperties>`,
	`<StorageServiceProperties><MinuteMetrics><Enabled>maybe</Enabled></MinuteMetrics></StorageServiceProperties>`,
	`<StorageServiceProperties>`,
}

func FuzzServiceProperties(f *testing.F) {
	for _, s := range propertiesSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		env := newFuzzEnv(t)
		get := func() string {
			w := env.serve("GET", "/devstoreaccount1", "restype=service&comp=properties", "")
			if w.Code != 200 {
				t.Fatalf("get properties: %d %s", w.Code, w.Body)
			}
			return w.Body.String()
		}
		before := get()
		w := env.serve("PUT", "/devstoreaccount1", "restype=service&comp=properties", body)
		if !checkWellFormed(t, w) {
			if after := get(); after != before {
				t.Fatalf("rejected properties changed state:\n%s\n%s", before, after)
			}
			return
		}
		if w.Code != http.StatusAccepted {
			t.Fatalf("set properties answered %d", w.Code)
		}
		// What Get returns can be set again and reads back the same.
		got := get()
		if w := env.serve("PUT", "/devstoreaccount1", "restype=service&comp=properties", got); w.Code != http.StatusAccepted {
			t.Fatalf("own output rejected: %d %s\n%s", w.Code, w.Body, got)
		}
		if again := get(); again != got {
			t.Fatalf("round trip changed properties:\n%s\n%s", got, again)
		}
	})
}

var aclSeeds = []string{
	`<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier><Id>p1</Id><AccessPolicy><Start>2030-01-01T00:00:00.0000000Z</Start><Expiry>2030-02-01T00:00:00Z</Expiry><Permission>raup</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`,
	`<SignedIdentifiers/>`,
	`<SignedIdentifiers><SignedIdentifier><Id>x</Id></SignedIdentifier></SignedIdentifiers>`,
	`<SignedIdentifiers><SignedIdentifier><Id>x</Id><AccessPolicy><Permission>w</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>`,
	`<SignedIdentifiers><SignedIdentifier><Id>x</Id><AccessPolicy><Start>2030-01-01</Start></AccessPolicy></SignedIdentifier></SignedIdentifiers>`,
	`<SignedIdentifiers><SignedIdentifier>`,
}

func FuzzACL(f *testing.F) {
	for _, s := range aclSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		env := newFuzzEnv(t)
		before := env.snapshot(t)
		w := env.serve("PUT", "/devstoreaccount1/fuzz", "comp=acl", body)
		if !checkWellFormed(t, w) {
			if after := env.snapshot(t); !reflect.DeepEqual(before, after) {
				t.Fatalf("rejected ACL changed the queue:\n%+v\n%+v", before, after)
			}
			return
		}
		get := func() string {
			w := env.serve("GET", "/devstoreaccount1/fuzz", "comp=acl", "")
			if w.Code != 200 {
				t.Fatalf("get acl: %d %s", w.Code, w.Body)
			}
			return w.Body.String()
		}
		got := get()
		if w := env.serve("PUT", "/devstoreaccount1/fuzz", "comp=acl", got); w.Code != http.StatusNoContent {
			t.Fatalf("own ACL output rejected: %d %s\n%s", w.Code, w.Body, got)
		}
		if again := get(); again != got {
			t.Fatalf("ACL round trip changed:\n%s\n%s", got, again)
		}
	})
}

// FuzzQuery sends arbitrary query strings to the message operations.
func FuzzQuery(f *testing.F) {
	for op := uint8(0); op < 6; op++ {
		for _, q := range []string{"", "visibilitytimeout=10", "messagettl=-1&visibilitytimeout=0", "numofmessages=32", "peekonly=true",
			"popreceipt=AAAA&visibilitytimeout=5", "visibilitytimeout=%zz", "timeout=-5", "numofmessages=2147483648", "messagettl=0"} {
			f.Add(op, q)
		}
	}
	f.Fuzz(func(t *testing.T, op uint8, query string) {
		env := newFuzzEnv(t)
		before := env.snapshot(t)
		body := "<QueueMessage><MessageText>q</MessageText></QueueMessage>"
		msg := "/devstoreaccount1/fuzz/messages/" + env.id.String()
		// Some shapes carry the seed message's valid receipt, so that the
		// parameters under test are reached.
		withReceipt := "popreceipt=" + urlEscape(env.receipt.String()) + "&" + query
		var w *httptest.ResponseRecorder
		switch op % 6 {
		case 0:
			w = env.serve("POST", "/devstoreaccount1/fuzz/messages", query, body)
		case 1:
			w = env.serve("GET", "/devstoreaccount1/fuzz/messages", query, "")
		case 2:
			w = env.serve("DELETE", msg, query, "")
		case 3:
			w = env.serve("PUT", msg, withReceipt, body)
		case 4:
			w = env.serve("DELETE", "/devstoreaccount1/fuzz/messages", query, "")
		case 5:
			w = env.serve("GET", "/devstoreaccount1", query, "")
		}
		if !checkWellFormed(t, w) {
			if after := env.snapshot(t); !reflect.DeepEqual(before, after) {
				t.Fatalf("rejected query changed the queue:\n%+v\n%+v", before, after)
			}
		}
		_, _ = io.Copy(io.Discard, w.Body)
	})
}
