package azqtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Transport hands each request straight to an http.Handler in the same
// process: no listener, no port, no connection. It is an http.RoundTripper
// (for an http.Client) and, through Do, a policy.Transporter (for the Azure
// SDK's ClientOptions.Transport), and the handler and the client see what
// they would see over loopback TCP with net/http on both sides:
//
//   - The handler gets a request as net/http's server builds it: the
//     path and query as sent (RequestURI), canonical header keys, Host, a
//     RemoteAddr on 127.0.0.1, Content-Length or chunked framing, a body
//     that can be read once, TLS set for an https URL, the Accept-Encoding
//     and User-Agent net/http's client adds, and a context that ends when
//     the client's does or when the handler returns. An Expect other than
//     100-continue is answered 417, as there.
//   - The client gets a response as net/http's client reads it: canonical
//     header keys, Date, Content-Length added to a short answer and
//     Content-Type sniffed as net/http's server adds them, no body for
//     HEAD, 1xx, 204 and 304, Connection: close honoured, a gzip answer
//     it did not ask for unpacked, trailers delivered at the end of the
//     body.
//   - A cancelled or expired context ends a call at once, with the
//     context's error, whatever the handler is doing; the handler's
//     context ends with it. Reading a body after that fails the same way.
//   - A handler that takes the connection (http.Hijacker) to close it,
//     reset it or cut its answer short, as azq's fault injection does,
//     fails the call with the errors net/http's client gives: io.EOF for a
//     closed connection, a *net.OpError wrapping syscall.ECONNRESET for a
//     reset one, io.ErrUnexpectedEOF from the body of a cut answer. So does
//     a handler that panics with http.ErrAbortHandler.
//
// Every request reaches the handler, whatever host its URL names. The
// handler runs on a goroutine of its own, which ends when it returns; its
// answer is kept whole in memory and handed to the client when it
// returns, so a client that stops reading never holds a handler up. A
// handler that streams without end is not for this transport.
//
// Close refuses further requests and waits for the handlers in progress.
type Transport struct {
	handler http.Handler
	// client is net/http's client on this transport: Do is its Do, as the
	// Azure SDK's default transport is an *http.Client, so that errors are
	// wrapped (*url.Error) and redirects followed as there.
	client http.Client

	mu      sync.Mutex // guards closed and adding to running
	closed  bool
	running sync.WaitGroup // handlers in progress

	ports atomic.Uint32 // numbers the requests' client ports
}

// NewTransport returns a Transport that serves every request with h.
// Server.Transport is one for azq's server.
func NewTransport(h http.Handler) *Transport {
	t := &Transport{handler: h}
	t.client.Transport = t
	return t
}

// Do sends req as net/http's Client.Do does, over t: it is what makes t
// a policy.Transporter, for azcore.ClientOptions.Transport.
func (t *Transport) Do(req *http.Request) (*http.Response, error) { return t.client.Do(req) }

// Close refuses further requests, which then fail as a connection to a
// closed port does (syscall.ECONNREFUSED), and waits for the handlers in
// progress to return. It is idempotent.
func (t *Transport) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.running.Wait()
}

// enter counts a handler in, unless t is closed.
func (t *Transport) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.running.Add(1)
	return true
}

// RoundTrip implements http.RoundTripper: it serves req with the handler
// and returns its answer, or the error net/http's transport would return.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	x, err := t.newExchange(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	if ctx.Err() != nil {
		closeBody(req)
		return nil, context.Cause(ctx)
	}
	if !t.enter() {
		closeBody(req)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: x.serverAddr, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	go x.serve()
	select {
	case <-x.done:
	case <-ctx.Done():
		select {
		case <-x.done: // answered as the context ended: take the answer, as net/http does
		default:
			x.body.abandon()
			return nil, context.Cause(ctx)
		}
	}
	if c := x.w.conn; c != nil {
		select {
		case <-c.closed:
		case <-ctx.Done():
			c.Close()
			return nil, context.Cause(ctx)
		}
	}
	return x.result()
}

// exchange is one request and its answer.
type exchange struct {
	t    *Transport
	req  *http.Request // the client's
	sreq *http.Request // the handler's, without its context until serve
	body *requestBody  // sreq.Body, unless there is none
	w    responseWriter
	done chan struct{} // closed when the handler has returned

	clientAddr, serverAddr net.Addr
	tls                    *tls.ConnectionState
	addedGzip              bool // the transport asked for gzip: it unpacks a gzip answer
	aborted                bool // the handler panicked: the connection is dropped
	unread                 bool // the handler left the body unread: the connection is closed after the answer
}

// tcpAddr is an address of the exchange's pretend connection. It says
// "tcp", as the addresses in the errors of a real one do.
type tcpAddr string

func (tcpAddr) Network() string  { return "tcp" }
func (a tcpAddr) String() string { return string(a) }

// newExchange checks req as net/http's client does and builds the request
// the handler will see.
func (t *Transport) newExchange(req *http.Request) (*exchange, error) {
	if req.URL == nil {
		return nil, errors.New("http: nil Request.URL")
	}
	if req.Header == nil {
		return nil, errors.New("http: nil Request.Header")
	}
	scheme := req.URL.Scheme
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("unsupported protocol scheme %q", scheme)
	}
	if req.URL.Host == "" {
		return nil, errors.New("http: no Host in request URL")
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !isToken(method) {
		return nil, fmt.Errorf("net/http: invalid method %q", method)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validHeaderValue(host) || strings.ContainsAny(host, " /") {
		return nil, fmt.Errorf("http: invalid Host header")
	}
	ruri := req.URL.RequestURI()
	u, err := url.ParseRequestURI(ruri)
	if err != nil {
		return nil, fmt.Errorf("net/http: invalid request URI %q: %w", ruri, err)
	}

	// What the client sends (net/http's Request.write): the header but for
	// the fields it writes itself, which follow.
	n := 0
	for k, vv := range req.Header {
		if !isToken(k) {
			return nil, fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !validHeaderValue(v) {
				return nil, fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
		n += len(vv)
	}
	h := make(http.Header, len(req.Header)+2)
	values := make([]string, 0, n+4)
	for k, vv := range req.Header {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		switch ck {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		start := len(values)
		for _, v := range vv {
			values = append(values, textproto.TrimString(v))
		}
		if prev, ok := h[ck]; ok {
			h[ck] = append(prev, values[start:]...)
		} else {
			h[ck] = values[start:len(values):len(values)]
		}
	}
	// net/http's client asks for gzip unless told otherwise, and
	// unpacks it for the caller (see gunzip).
	addedGzip := req.Header.Get("Accept-Encoding") == "" && req.Header.Get("Range") == "" && method != http.MethodHead
	if addedGzip {
		values = append(values, "gzip")
		h["Accept-Encoding"] = values[len(values)-1:]
	}
	if ua, ok := req.Header["User-Agent"]; !ok {
		values = append(values, "Go-http-client/1.1")
		h["User-Agent"] = values[len(values)-1:]
	} else if len(ua) > 0 && ua[0] != "" {
		values = append(values, textproto.TrimString(ua[0]))
		h["User-Agent"] = values[len(values)-1:]
	}

	var length int64 // as the server reads it: -1 for chunked
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case req.ContentLength != 0:
		length = req.ContentLength
	default:
		length = -1 // unknown: sent chunked
	}
	var te []string
	switch {
	case length < 0:
		te = []string{"chunked"}
		length = -1
	case length > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		values = append(values, strconv.FormatInt(length, 10))
		h["Content-Length"] = values[len(values)-1:]
	}
	closing := req.Close || hasToken(h.Get("Connection"), "close")
	if req.Close && !hasToken(h.Get("Connection"), "close") {
		h["Connection"] = append(h["Connection"], "close")
	}

	port := 32768 + t.ports.Add(1)%28232 // Linux's ephemeral ports
	x := &exchange{t: t, req: req, done: make(chan struct{}), addedGzip: addedGzip,
		clientAddr: tcpAddr("127.0.0.1:" + strconv.Itoa(int(port))), serverAddr: tcpAddr(hostPort(req.URL))}
	x.sreq = &http.Request{
		Method:           method,
		URL:              u,
		Proto:            "HTTP/1.1",
		ProtoMajor:       1,
		ProtoMinor:       1,
		Header:           h,
		Body:             http.NoBody,
		ContentLength:    length,
		TransferEncoding: te,
		Close:            closing,
		Host:             host,
		RemoteAddr:       x.clientAddr.String(),
		RequestURI:       ruri,
	}
	if length != 0 {
		x.body = &requestBody{src: req.Body, remaining: length, expect: hasToken(h.Get("Expect"), "100-continue")}
		x.sreq.Body = x.body
	}
	if scheme == "https" {
		name := req.URL.Hostname()
		x.tls = &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true,
			CipherSuite: tls.TLS_AES_128_GCM_SHA256, ServerName: name}
		x.sreq.TLS = x.tls
	}
	x.w = responseWriter{x: x, header: make(http.Header), declared: -1, committed: -1}
	return x, nil
}

// hostPort is the URL's host with its port, the default one if it names
// none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// serve runs the handler on its goroutine, as net/http's server does.
func (x *exchange) serve() {
	defer x.t.running.Done()
	defer close(x.done)
	ctx, cancel := context.WithCancel(x.req.Context())
	defer cancel()
	sreq := x.sreq.WithContext(ctx)
	if e := sreq.Header.Get("Expect"); e != "" && !hasToken(e, "100-continue") {
		// net/http's server answers an expectation it does not know itself.
		x.w.header.Set("Connection", "close")
		x.w.WriteHeader(http.StatusExpectationFailed)
	} else {
		x.run(sreq)
	}
	if x.w.conn == nil {
		x.unread = x.body.leftUnread()
		x.body.finish()
	}
}

// run calls the handler. A panic drops the connection, as net/http's
// server does; any panic but http.ErrAbortHandler is logged with its
// stack, as there.
func (x *exchange) run(sreq *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			x.aborted = true
			if p != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				log.Printf("http: panic serving %v: %v\n%s", sreq.RemoteAddr, p, buf)
			}
		}
	}()
	x.t.handler.ServeHTTP(&x.w, sreq)
	if !x.w.wroteHeader && x.w.conn == nil {
		x.w.WriteHeader(http.StatusOK)
	}
}

// result is what the client gets once the handler has returned (and
// closed the connection, if it took it).
func (x *exchange) result() (*http.Response, error) {
	if err := x.body.clientError(); err != nil {
		return nil, err
	}
	w := &x.w
	switch {
	case w.conn != nil:
		return x.fromWire()
	case x.aborted && w.committed < 0:
		return nil, io.EOF // the connection closed before an answer
	}
	return x.gunzip(x.response()), nil
}

// gunzip unpacks a gzip answer to a request whose Accept-Encoding the
// transport added, as net/http's client does: the caller never asked for
// gzip, so it gets the content, with Uncompressed set.
func (x *exchange) gunzip(resp *http.Response) *http.Response {
	if !x.addedGzip || resp.Body == http.NoBody || !strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		return resp
	}
	resp.Body = &gzipBody{body: resp.Body}
	delete(resp.Header, "Content-Encoding")
	delete(resp.Header, "Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return resp
}

// gzipBody unpacks a body as it is read.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error
}

func (b *gzipBody) Read(p []byte) (int, error) {
	if b.zr == nil {
		if b.err == nil {
			b.zr, b.err = gzip.NewReader(b.body)
		}
		if b.err != nil {
			return 0, b.err
		}
	}
	return b.zr.Read(p)
}

func (b *gzipBody) Close() error { return b.body.Close() }

// fromWire reads the answer a handler wrote on the connection it took,
// as net/http's client would have read it.
func (x *exchange) fromWire() (*http.Response, error) {
	c := x.w.conn
	c.mu.Lock()
	out, reset := c.out.Bytes(), c.reset
	c.mu.Unlock()
	var end error = io.ErrUnexpectedEOF // what a cut body reads
	if reset {
		end = &net.OpError{Op: "read", Net: "tcp", Source: x.clientAddr, Addr: x.serverAddr, Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	if len(out) == 0 {
		if reset {
			return nil, end
		}
		return nil, io.EOF
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), x.req)
	if err != nil {
		if reset {
			return nil, end
		}
		return nil, fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", err)
	}
	resp.TLS = x.tls
	if resp.Body != http.NoBody {
		resp.Body = &wireBody{r: resp.Body, ctx: x.req.Context(), end: end}
	}
	return resp, nil
}

// wireBody is the body of an answer read from a connection the handler
// took: what it wrote, then the error of the connection's end.
type wireBody struct {
	r   io.ReadCloser
	ctx context.Context
	end error
}

func (b *wireBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, context.Cause(b.ctx)
	}
	n, err := b.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = b.end
	}
	return n, err
}

func (b *wireBody) Close() error { return b.r.Close() }

// bufferBeforeChunking is how much of an answer net/http's server holds
// before it sends the header: an answer that ends within it gets a
// Content-Length, a longer one without one is sent chunked.
const bufferBeforeChunking = 2048

// response builds the client's response from what the handler wrote,
// adding and removing headers as net/http's server does when it sends
// them (chunkWriter.writeHeader) and reading them as net/http's client
// does.
func (x *exchange) response() *http.Response {
	w := &x.w
	h := w.sent
	status := w.status
	isHEAD := x.sreq.Method == http.MethodHead
	bodyOK := bodyAllowedForStatus(status)
	trailers := w.trailerNames()
	te := h.Get("Transfer-Encoding")
	hasTE := te != ""
	n := w.written
	flushed := w.committed >= 0

	if !flushed && len(trailers) == 0 && !hasTE && bodyOK && w.declared < 0 && (!isHEAD || n > 0) && n <= bufferBeforeChunking {
		w.declared = n
		h["Content-Length"] = []string{strconv.FormatInt(n, 10)}
	}
	hasCL := w.declared >= 0
	closing := x.sreq.Close || h.Get("Connection") == "close" || x.unread
	if bodyOK {
		_, haveType := h["Content-Type"]
		if !haveType && h.Get("Content-Encoding") == "" && !hasTE && len(w.body) > 0 {
			h["Content-Type"] = []string{http.DetectContentType(w.body)}
		}
	} else {
		if status == http.StatusNotModified {
			delete(h, "Content-Type")
		}
		delete(h, "Content-Length")
		delete(h, "Transfer-Encoding")
		hasCL = false
	}
	if _, ok := h["Date"]; !ok {
		h["Date"] = []string{time.Now().UTC().Format(http.TimeFormat)}
	}
	if hasCL && hasTE && te != "identity" {
		delete(h, "Content-Length")
		hasCL = false
	}
	chunked := false
	switch {
	case isHEAD || !bodyOK || status == http.StatusNoContent:
		delete(h, "Transfer-Encoding")
	case hasCL:
		delete(h, "Transfer-Encoding")
	case te == "identity":
		closing = true // the body ends with the connection
		delete(h, "Transfer-Encoding")
	default:
		chunked = true
	}
	// What net/http's client reads into fields it removes from the header.
	delete(h, "Transfer-Encoding")
	if chunked {
		delete(h, "Trailer")
	}
	if closing {
		delete(h, "Connection")
	}

	resp := &http.Response{
		Status:     strconv.Itoa(status) + " " + statusText(status),
		StatusCode: status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Close:      closing,
		Request:    x.req,
		TLS:        x.tls,
		Body:       http.NoBody,
	}
	switch {
	case isHEAD:
		resp.ContentLength = -1
		if cl, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
			resp.ContentLength = cl
		}
		return resp
	case !bodyOK || status == http.StatusNoContent:
		return resp
	case chunked:
		resp.ContentLength = -1
		resp.TransferEncoding = []string{"chunked"}
	case hasCL:
		resp.ContentLength = w.declared
	default:
		resp.ContentLength = -1
	}
	if len(trailers) > 0 {
		resp.Trailer = make(http.Header, len(trailers))
		for _, k := range trailers {
			resp.Trailer[k] = nil
		}
	}
	body := w.body
	var end error = io.EOF
	switch {
	case x.aborted && !(hasCL && int64(w.committed) >= w.declared):
		body, end = body[:w.committed], io.ErrUnexpectedEOF
	case hasCL && int64(len(body)) < w.declared:
		end = io.ErrUnexpectedEOF // the server closes a short answer's connection
	}
	if resp.ContentLength == 0 && !chunked && end == io.EOF {
		return resp
	}
	resp.Body = &responseBody{data: body, end: end, ctx: x.req.Context(), resp: resp, w: w, trailers: trailers}
	return resp
}

// statusText is the reason phrase net/http's server sends.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "status code " + strconv.Itoa(code)
}

// bodyAllowedForStatus reports whether an answer of this status may have
// a body (RFC 9112, section 6.3).
func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

// responseWriter is the handler's http.ResponseWriter. It keeps the
// answer; Flush marks how much of it was sent, which matters only if the
// handler then aborts.
type responseWriter struct {
	x      *exchange
	header http.Header // what the handler writes to
	// sent is the header as sent: copied at WriteHeader, with canonical
	// keys and fresh values, as the client reads it.
	sent        http.Header
	status      int
	wroteHeader bool
	declared    int64 // the Content-Length the handler set; -1 if none
	written     int64
	body        []byte
	committed   int // bytes of body flushed; -1 before the first Flush
	conn        *hijackedConn
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.conn != nil || w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		return // informational: net/http's client passes it over
	}
	w.wroteHeader, w.status = true, code
	w.sent = clientHeader(w.header)
	if cl := w.sent.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.declared = v
		} else {
			delete(w.sent, "Content-Length")
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.conn != nil {
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.declared >= 0 && w.written > w.declared {
		return 0, http.ErrContentLength
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// Flush implements http.Flusher.
func (w *responseWriter) Flush() {
	if w.conn != nil {
		return
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.committed = len(w.body)
}

// Hijack implements http.Hijacker: the handler takes the connection, and
// the client gets what it writes there, as net/http's client would parse
// it, and sees how it ends.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.conn != nil {
		return nil, nil, http.ErrHijacked
	}
	if w.wroteHeader {
		return nil, nil, errors.New("azqtest: Hijack after the answer began is not supported")
	}
	w.conn = &hijackedConn{x: w.x, closed: make(chan struct{})}
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

// trailerNames are the trailers the handler declared, canonical: the
// Trailer header's names and the keys it set with http.TrailerPrefix.
func (w *responseWriter) trailerNames() []string {
	var names []string
	for _, v := range w.sent["Trailer"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				names = append(names, textproto.CanonicalMIMEHeaderKey(f))
			}
		}
	}
	for k := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && name != "" {
			names = append(names, textproto.CanonicalMIMEHeaderKey(name))
		}
	}
	return names
}

// clientHeader copies h as net/http's client reads it once the server
// wrote it: names that are not tokens and the http.TrailerPrefix keys are
// left out, values have their line breaks turned to spaces and are trimmed,
// and keys are canonical. The values get one fresh backing array, so that
// neither side can change the other's.
func clientHeader(h http.Header) http.Header {
	n := 0
	for _, vv := range h {
		n += len(vv)
	}
	out := make(http.Header, len(h))
	values := make([]string, 0, n)
	for k, vv := range h {
		if !isToken(k) || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		start := len(values)
		for _, v := range vv {
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(v)
			}
			values = append(values, textproto.TrimString(v))
		}
		if prev, ok := out[ck]; ok {
			out[ck] = append(prev, values[start:]...)
		} else {
			out[ck] = values[start:len(values):len(values)]
		}
	}
	return out
}

// responseBody is the body of an answer: what the handler wrote, then
// end. It fails as net/http's does once the request's context ends.
type responseBody struct {
	mu       sync.Mutex
	data     []byte
	end      error // io.EOF, or the error of an answer cut short
	ctx      context.Context
	closed   bool
	resp     *http.Response // whose Trailer to fill at the end
	w        *responseWriter
	trailers []string
}

func (b *responseBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("http: read on closed response body")
	}
	if len(b.data) == 0 {
		if b.end == io.EOF && b.trailers != nil {
			for _, k := range b.trailers {
				if vv := b.w.header[k]; len(vv) > 0 {
					b.resp.Trailer[k] = append([]string(nil), vv...)
				} else if vv := b.w.header[http.TrailerPrefix+k]; len(vv) > 0 {
					b.resp.Trailer[k] = append([]string(nil), vv...)
				}
			}
			b.trailers = nil
		}
		return 0, b.end
	}
	if err := b.ctx.Err(); err != nil {
		return 0, context.Cause(b.ctx)
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *responseBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.data = nil
	b.mu.Unlock()
	return nil
}

// requestBody is the handler's view of the client's body: the bytes the
// client's Content-Length announced, read from the client's body as the
// handler asks for them.
type requestBody struct {
	mu        sync.Mutex
	src       io.ReadCloser // the client's body; nil once closed
	remaining int64         // bytes the framing still allows; -1: chunked, until the client's EOF
	closed    bool          // by the handler
	abandoned bool          // the client's call ended first
	sawEOF    bool          // the handler read to the end
	expect    bool          // the client sent Expect: 100-continue
	read      int64
	err       error // what the client's side failed with: its body was short, or failed to read
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return 0, http.ErrBodyReadAfterClose
	case b.abandoned:
		return 0, io.ErrUnexpectedEOF // the client went away
	case b.remaining == 0 || b.src == nil:
		b.sawEOF = true
		return 0, io.EOF
	case b.err != nil:
		return 0, io.ErrUnexpectedEOF
	}
	if b.remaining > 0 && int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.src.Read(p)
	b.read += int64(n)
	if b.remaining > 0 {
		b.remaining -= int64(n)
	}
	switch {
	case err == io.EOF && b.remaining > 0:
		b.err = fmt.Errorf("http: ContentLength=%d with Body length %d", b.read+b.remaining, b.read)
		return n, io.ErrUnexpectedEOF
	case err == io.EOF:
		b.remaining, b.sawEOF = 0, true
		return n, io.EOF
	case err != nil:
		b.err = err // net/http's client returns its body's error as it is
		return n, io.ErrUnexpectedEOF
	case b.remaining == 0:
		b.sawEOF = true
		return n, io.EOF
	}
	return n, nil
}

// maxPostHandlerRead is how much of a body the handler left unread
// net/http's server reads past to keep the connection.
const maxPostHandlerRead = 256 << 10

// leftUnread reports whether the handler left so much of the body unread
// that net/http's server would close the connection after the answer
// (response.finishRequest and chunkWriter.writeHeader): a body it was to
// ask for with 100 Continue, a body it closed before the end, or more
// than 256 KiB left, which the server would otherwise read and discard,
// as this does. b may be nil: a request without a body.
func (b *requestBody) leftUnread() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.sawEOF:
		return false
	case b.expect, b.closed, b.abandoned, b.err != nil:
		return true
	case b.remaining >= maxPostHandlerRead:
		return true
	}
	b.mu.Unlock()
	n, err := io.CopyN(io.Discard, b, maxPostHandlerRead+1)
	b.mu.Lock()
	return n > maxPostHandlerRead || err != io.EOF
}

// Close implements io.Closer for the handler; the client's body is closed
// when the exchange ends.
func (b *requestBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// finish closes the client's body once the handler is done with it. b
// may be nil: a request without a body.
func (b *requestBody) finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.src != nil {
		b.src.Close()
		b.src = nil
	}
}

// abandon ends the handler's reading when the client's call ends first:
// the client's body is closed at once and never read again.
func (b *requestBody) abandon() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.abandoned = true
	if b.src != nil {
		b.src.Close()
		b.src = nil
	}
}

// clientError is the error the client's side of the exchange met sending
// its body, if any.
func (b *requestBody) clientError() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// closeBody closes the body of a request that is not sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// hijackedConn is the connection a handler takes with Hijack: reads come
// from the rest of the request's body, writes go to the client, and Close
// ends it; SetLinger(0) makes that end a reset, as on a TCP connection.
type hijackedConn struct {
	x      *exchange
	mu     sync.Mutex // guards out, reset and done
	out    bytes.Buffer
	reset  bool
	done   bool
	closed chan struct{}
}

func (c *hijackedConn) Read(p []byte) (int, error) {
	if c.x.body == nil {
		return 0, io.EOF
	}
	n, err := c.x.body.Read(p)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

func (c *hijackedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.x.serverAddr, Addr: c.x.clientAddr, Err: net.ErrClosed}
	}
	return c.out.Write(p)
}

func (c *hijackedConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return &net.OpError{Op: "close", Net: "tcp", Source: c.x.serverAddr, Addr: c.x.clientAddr, Err: net.ErrClosed}
	}
	c.done = true
	close(c.closed)
	c.x.body.finish()
	return nil
}

// SetLinger with 0 makes Close reset the connection, as on a
// *net.TCPConn.
func (c *hijackedConn) SetLinger(sec int) error {
	c.mu.Lock()
	c.reset = sec == 0
	c.mu.Unlock()
	return nil
}

func (c *hijackedConn) LocalAddr() net.Addr                { return c.x.serverAddr }
func (c *hijackedConn) RemoteAddr() net.Addr               { return c.x.clientAddr }
func (c *hijackedConn) SetDeadline(t time.Time) error      { return nil }
func (c *hijackedConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *hijackedConn) SetWriteDeadline(t time.Time) error { return nil }

// isToken reports whether s is a non-empty RFC 9110 token, as header
// names and methods must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || !tokenChar[c] {
			return false
		}
	}
	return true
}

var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// validHeaderValue reports whether v may be sent as a header value: no
// control characters but horizontal tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated header value v holds
// token, case-insensitively.
func hasToken(v, token string) bool {
	for _, f := range strings.Split(v, ",") {
		if strings.EqualFold(textproto.TrimString(f), token) {
			return true
		}
	}
	return false
}
