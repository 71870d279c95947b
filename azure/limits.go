package azure

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// DefaultTryTimeout is the time one try of a request may take, from
// sending it to reading the whole answer, when ClientOptions.Retry sets no
// TryTimeout: the minute that Azure Storage's client libraries have long
// given a try. Queue operations take the service at most 30 seconds, so
// the slack covers the network; a service that takes a request and never
// answers costs a try a minute instead of the caller's whole deadline.
const DefaultTryTimeout = time.Minute

// What the adapter reads of a response, at most. The SDK reads a whole
// response body into memory before it decodes it; these bound what a
// faulty or hostile service can make it allocate.
const (
	// MaxErrorBodyBytes is what the adapter reads of an error answer's
	// body: Azure's Error XML takes a few hundred bytes. The rest is not
	// read, and the error carries only what was.
	MaxErrorBodyBytes = 4 << 10
	// maxMessageXMLBytes is the most that one QueueMessage element of a
	// Get or Peek answer can take: 64 KiB of message text, each byte of
	// which the service may write as an entity of up to 6 bytes (&quot;),
	// and its other elements.
	maxMessageXMLBytes = 6*64<<10 + 1<<10
	// maxQueueItemXMLBytes is the most that one Queue element of a List
	// Queues answer can take: a name and 8 KiB of metadata, escaped.
	maxQueueItemXMLBytes = 6*8<<10 + 1<<10
	// maxOtherBodyBytes bounds every other answer (Put Message's one
	// message, access policies, service properties), which take a few
	// KiB at most.
	maxOtherBodyBytes = 1 << 20
)

// responseLimit is the most a successful answer to req may bring: enough
// for n messages of the largest size for Get and Peek (numofmessages, 1
// by default), for maxresults queues (5000 by default) for List Queues,
// and maxOtherBodyBytes otherwise.
func responseLimit(req *http.Request) int64 {
	q := req.URL.RawQuery
	switch {
	case req.Method == http.MethodGet && strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/messages"):
		n, err := strconv.Atoi(queryValue(q, "numofmessages"))
		if err != nil || n < 1 {
			n = 1
		}
		return int64(min(n, 32))*maxMessageXMLBytes + 4<<10
	case queryValue(q, "comp") == "list":
		n, err := strconv.Atoi(queryValue(q, "maxresults"))
		if err != nil || n < 1 || n > 5000 {
			n = 5000
		}
		return int64(n)*maxQueueItemXMLBytes + 4<<10
	}
	return maxOtherBodyBytes
}

// queryValue is the first value of key in the raw query, unescaped:
// what url.Values.Get gives (pairs url.ParseQuery skips are skipped),
// without building the map for every response.
func queryValue(rawQuery, key string) string {
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if k, err := url.QueryUnescape(k); err != nil || k != key {
			continue
		}
		if v, err := url.QueryUnescape(v); err == nil {
			return v
		}
	}
	return ""
}

// limitTransport bounds what the pipeline reads of a response. It stands
// between the SDK's pipeline and the HTTP transport, as no policy can:
// the pipeline's last policy reads the whole body before any policy sees
// the response.
type limitTransport struct {
	next policy.Transporter
}

// defaultTransport is what the SDK's own default transport is in what
// matters here (proxy from the environment, TLS 1.2 at least, idle
// connections kept), for clients whose options name no transport.
var defaultTransport = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	t.MaxIdleConnsPerHost = 10
	return &http.Client{Transport: t}
}()

// Do implements policy.Transporter.
func (t *limitTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := t.next.Do(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.StatusCode >= 400 {
		// An error answer's body is cut short, silently: the answer is
		// an error already, and its code travels in a header.
		resp.Body = &limitedBody{r: resp.Body, max: MaxErrorBodyBytes}
		return resp, nil
	}
	limit := responseLimit(req)
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, &ResponseTooLargeError{Method: req.Method, Path: req.URL.Path, Limit: limit}
	}
	resp.Body = &limitedBody{r: resp.Body, max: limit + 1, limit: limit, req: req}
	return resp, nil
}

// limitedBody reads a response body up to max bytes, then ends. With
// limit set (max is then limit+1), a body longer than limit fails with a
// *ResponseTooLargeError instead of ending.
type limitedBody struct {
	r     io.ReadCloser
	n     int64 // bytes read so far
	max   int64
	limit int64 // 0: end at max without an error
	req   *http.Request
}

func (b *limitedBody) Read(p []byte) (int, error) {
	left := b.max - b.n
	if left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.limit > 0 && b.n > b.limit {
		return 0, &ResponseTooLargeError{Method: b.req.Method, Path: b.req.URL.Path, Limit: b.limit}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

// ResponseTooLargeError is the error of an operation whose answer was
// larger than any the service can legitimately send (more than n messages'
// worth of XML for a Get or Peek of n), which the adapter stopped reading.
// The SDK does not retry it.
type ResponseTooLargeError struct {
	Method, Path string
	Limit        int64 // bytes
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("azure: the answer to %s %s is larger than the %d bytes such an answer can take; not read further", e.Method, e.Path, e.Limit)
}

// NonRetriable tells the SDK's retry policy not to try again: a service
// that answered so once will likely do it again.
func (e *ResponseTooLargeError) NonRetriable() {}
