package azqtest_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/azqlib/azq/azqtest"
)

// seen is what a handler saw of a request.
type seen struct {
	Method, RequestURI, Host, Proto string
	Header                          http.Header
	ContentLength                   int64
	TransferEncoding                []string
	Close                           bool
	Body, BodyErr                   string
	TLS                             bool
	RemoteIP                        string
	WriteErr                        string // of the handler's writes, if one failed
}

// got is what a client got of an answer.
type got struct {
	Err                string
	Status             string
	Header             http.Header // without Date
	ContentLength      int64
	TransferEncoding   []string
	Close              bool
	Uncompressed       bool
	Body, BodyErr      string
	Trailer            http.Header
	HasDate, HasNoBody bool
	TLS                bool
}

// errChain describes err as a test compares it between transports: the
// type of each error it wraps, with a *net.OpError's operation and a
// leaf's text, without the addresses and URLs that differ.
func errChain(err error) string {
	var parts []string
	for err != nil {
		part := fmt.Sprintf("%T", err)
		switch e := err.(type) {
		case *net.OpError:
			part += "(" + e.Op + ")"
		case syscall.Errno:
			part += "(" + e.Error() + ")"
		case *os.SyscallError:
			part += "(" + e.Syscall + ")"
		}
		next := errors.Unwrap(err)
		if next == nil {
			part += ": " + err.Error()
		}
		parts = append(parts, part)
		err = next
	}
	return strings.Join(parts, " > ")
}

// exchangeCase is one request and the handler that answers it.
type exchangeCase struct {
	name    string
	handler func(w http.ResponseWriter, r *http.Request, s *seen)
	request func(url string) *http.Request
	// noReadBody: the handler does not read the request body.
	noReadBody bool
	// unanswered: the handler is not called.
	unanswered bool
}

func get(path string) func(string) *http.Request {
	return func(url string) *http.Request {
		r, _ := http.NewRequest("GET", url+path, nil)
		return r
	}
}

func write(s *seen, w http.ResponseWriter, b string) {
	if _, err := io.WriteString(w, b); err != nil && s.WriteErr == "" {
		s.WriteErr = err.Error()
	}
}

var exchangeCases = []exchangeCase{
	{name: "short answer", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "hello, world")
	}},
	{name: "header keys and values as written", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header()["x-lower-key"] = []string{"  padded  "}
		w.Header()["X-Multi"] = []string{"a", "b"}
		w.Header()["Bad Key"] = []string{"dropped"}
		w.Header().Set("X-Line", "one\ntwo")
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("X-After", "too late")
		write(s, w, "<a/>")
	}},
	{name: "HEAD with Content-Length", request: func(url string) *http.Request {
		r, _ := http.NewRequest("HEAD", url+"/a", nil)
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Content-Length", "42")
		write(s, w, "body of a HEAD")
	}},
	{name: "HEAD, body written", request: func(url string) *http.Request {
		r, _ := http.NewRequest("HEAD", url+"/a", nil)
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "body of a HEAD")
	}},
	{name: "204 with a body", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Content-Length", "3")
		w.WriteHeader(http.StatusNoContent)
		write(s, w, "abc")
	}},
	{name: "304 with a type", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotModified)
	}},
	{name: "large answer", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, strings.Repeat("x", 100<<10))
	}},
	{name: "2048 bytes", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, strings.Repeat("y", 1000))
		write(s, w, strings.Repeat("y", 1048))
	}},
	{name: "2049 bytes in small writes", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		for range 2049 {
			write(s, w, "z")
		}
	}},
	{name: "short of its Content-Length", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Content-Length", "10")
		write(s, w, "abc")
	}},
	{name: "past its Content-Length", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Content-Length", "3")
		write(s, w, "abcdef")
	}},
	{name: "flushed", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "first ")
		w.(http.Flusher).Flush()
		write(s, w, "second")
	}},
	{name: "trailers", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Trailer", "x-sum")
		write(s, w, "summed")
		w.Header().Set("X-Sum", "42")
		w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
	}},
	{name: "client closes", request: func(url string) *http.Request {
		r, _ := http.NewRequest("GET", url+"/a", nil)
		r.Close = true
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "bye")
	}},
	{name: "handler closes", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Connection", "close")
		write(s, w, "bye")
	}},
	{name: "POST with a body", request: func(url string) *http.Request {
		r, _ := http.NewRequest("POST", url+"/a?x=1", strings.NewReader("posted"))
		r.Header.Set("content-type", "text/plain")
		r.Header.Add("X-Two", "1")
		r.Header.Add("X-Two", " 2 ")
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "ok")
	}},
	{name: "PUT without a body", request: func(url string) *http.Request {
		r, _ := http.NewRequest("PUT", url+"/a", nil)
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.WriteHeader(http.StatusCreated)
	}},
	{name: "DELETE without a body", request: func(url string) *http.Request {
		r, _ := http.NewRequest("DELETE", url+"/a", nil)
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.WriteHeader(http.StatusNoContent)
	}},
	{name: "body of unknown length", request: func(url string) *http.Request {
		r, _ := http.NewRequest("POST", url+"/a", io.MultiReader(strings.NewReader("of unknown "), strings.NewReader("length")))
		r.ContentLength = -1
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "ok")
	}},
	{name: "body of unstated length", request: func(url string) *http.Request {
		r, _ := http.NewRequest("POST", url+"/a", io.NopCloser(strings.NewReader("unstated")))
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "ok")
	}},
	{name: "empty body of unstated length", request: func(url string) *http.Request {
		r, _ := http.NewRequest("POST", url+"/a", io.NopCloser(strings.NewReader("")))
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "ok")
	}},
	{name: "large body left unread", noReadBody: true, request: func(url string) *http.Request {
		r, _ := http.NewRequest("PUT", url+"/a", strings.NewReader(strings.Repeat("u", 300<<10)))
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "ok")
	}},
	{name: "small body left unread", noReadBody: true, request: func(url string) *http.Request {
		r, _ := http.NewRequest("PUT", url+"/a", strings.NewReader(strings.Repeat("u", 1000)))
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "ok")
	}},
	{name: "Expect 100-continue, body left unread", noReadBody: true, request: func(url string) *http.Request {
		r, _ := http.NewRequest("POST", url+"/a", strings.NewReader(strings.Repeat("b", 4096)))
		r.Header.Set("Expect", "100-continue")
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}},
	{name: "unknown expectation", unanswered: true, request: func(url string) *http.Request {
		r, _ := http.NewRequest("POST", url+"/a", strings.NewReader("b"))
		r.Header.Set("Expect", "teapot")
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "never")
	}},
	{name: "no User-Agent, own Accept-Encoding", request: func(url string) *http.Request {
		r, _ := http.NewRequest("GET", url+"/a", nil)
		r.Header["User-Agent"] = []string{""}
		r.Header.Set("Accept-Encoding", "identity")
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "ok")
	}},
	{name: "gzip answer", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write([]byte(strings.Repeat("packed ", 100)))
		zw.Close()
	}},
	{name: "unknown status", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.WriteHeader(299)
		write(s, w, "odd")
	}},
	{name: "identity transfer encoding", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Transfer-Encoding", "identity")
		write(s, w, "until the end")
	}},
	{name: "Content-Length and chunked", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		w.Header().Set("Transfer-Encoding", "chunked")
		w.Header().Set("Content-Length", "5")
		write(s, w, "12345")
	}},
	{name: "path and query as sent", request: get("/acct/a%2Fb/messages?x=1&y=%20&z"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, r.URL.EscapedPath()+" "+r.URL.RawQuery)
	}},
	{name: "aborted before answering", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "lost")
		panic(http.ErrAbortHandler)
	}},
	{name: "aborted after a flush", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		write(s, w, "sent ")
		w.(http.Flusher).Flush()
		write(s, w, "lost")
		panic(http.ErrAbortHandler)
	}},
	{name: "connection closed", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		c.Close()
	}},
	{name: "connection reset", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
			c = tc.NetConn() // TLS: reset the connection under it
		}
		c.(interface{ SetLinger(int) error }).SetLinger(0)
		c.Close()
	}},
	{name: "header cut short", request: get("/a"), handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Len")
		buf.Flush()
		c.Close()
	}},
	{name: "body cut short", request: func(url string) *http.Request {
		r, _ := http.NewRequest("POST", url+"/a", strings.NewReader("posted"))
		return r
	}, handler: func(w http.ResponseWriter, r *http.Request, s *seen) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		buf.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 10\r\nX-Ms-Request-Id: 1\r\n\r\nhalf")
		buf.Flush()
		c.Close()
	}},
}

// roundTrip sends tc's request with c and reports what the handler saw
// and what the client got.
func roundTrip(t *testing.T, c *http.Client, url string, tc exchangeCase, saw <-chan seen) (seen, got) {
	t.Helper()
	var g got
	resp, err := c.Do(tc.request(url))
	if err != nil {
		g.Err = errChain(err)
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Body = string(b)
		if err != nil {
			g.BodyErr = errChain(err)
		}
		g.Status, g.ContentLength, g.TransferEncoding, g.Close, g.Uncompressed, g.Trailer =
			resp.Status, resp.ContentLength, resp.TransferEncoding, resp.Close, resp.Uncompressed, resp.Trailer
		g.Header = resp.Header.Clone()
		_, g.HasDate = g.Header["Date"]
		delete(g.Header, "Date")
		g.HasNoBody = resp.Body == http.NoBody
		g.TLS = resp.TLS != nil
	}
	var s seen
	if !tc.unanswered {
		select {
		case s = <-saw:
		case <-time.After(10 * time.Second): // a hang guard only
			t.Fatal("the handler was not called")
		}
	}
	return s, g
}

// The in-process transport gives a handler the request net/http's server
// would give it, and the client the answer net/http's client would read,
// over loopback TCP: the same handler answers each request both ways, and
// what the handler saw and what the client got must be the same, header,
// framing, body, trailers, errors and all.
func TestTransportAsOverTCP(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		for _, tc := range exchangeCases {
			t.Run(scheme+"/"+tc.name, func(t *testing.T) { exchangeAsOverTCP(t, scheme, tc) })
		}
	}
}

func exchangeAsOverTCP(t *testing.T, scheme string, tc exchangeCase) {
	saw := make(chan seen, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{Method: r.Method, RequestURI: r.RequestURI, Host: r.Host, Proto: r.Proto,
			Header: r.Header.Clone(), ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding,
			Close: r.Close, TLS: r.TLS != nil}
		s.RemoteIP, _, _ = net.SplitHostPort(r.RemoteAddr)
		if !tc.noReadBody {
			b, err := io.ReadAll(r.Body)
			s.Body = string(b)
			if err != nil {
				s.BodyErr = err.Error()
			}
		}
		defer func() { saw <- s }()
		tc.handler(w, r, &s)
	})
	hs := httptest.NewUnstartedServer(h)
	hs.Config.ErrorLog = quietLog()
	// A client of its own, so that no connection is reused: a
	// reused one would have net/http retry a GET whose connection
	// failed, which the transport, without connections, never does.
	tcp := &http.Client{Transport: &http.Transport{}}
	if scheme == "https" {
		hs.StartTLS()
		tcp.Transport.(*http.Transport).TLSClientConfig = hs.Client().Transport.(*http.Transport).TLSClientConfig
	} else {
		hs.Start()
	}
	defer hs.Close()
	defer tcp.CloseIdleConnections()
	tr := azqtest.NewTransport(h)
	defer tr.Close()

	sawTCP, gotTCP := roundTrip(t, tcp, hs.URL, tc, saw)
	sawIn, gotIn := roundTrip(t, &http.Client{Transport: tr}, hs.URL, tc, saw)
	if !reflect.DeepEqual(sawTCP, sawIn) {
		t.Errorf("the handler saw, over TCP:\n%+v\nin process:\n%+v", sawTCP, sawIn)
	}
	if !reflect.DeepEqual(gotTCP, gotIn) {
		t.Errorf("the client got, over TCP:\n%+v\nin process:\n%+v", gotTCP, gotIn)
	}
}

// quietLog keeps net/http's server from logging the failures the tests
// cause on purpose.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// A response body read after the request's context ends fails with the
// context's error, as over TCP, where net/http's client closes the
// connection under the body when the context ends. (Over TCP the read
// may still get what the kernel had buffered first, so only the
// in-process side is checked here, where the answer is all buffered.)
func TestBodyReadAfterCancel(t *testing.T) {
	tr := azqtest.NewTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 1<<20))
	}))
	defer tr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://example.test/big", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("reading after the cancel: %v", err)
	}
}
