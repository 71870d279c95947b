package azure

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// Encoding is how message content is written as the message text that
// the service stores.
type Encoding int

const (
	// EncodingNone sends the content as the message text, unchanged: what
	// azq, the Go SDK and the current .NET, Java, JavaScript and Python
	// SDKs do by default. A consumer that expects base64 (the Functions
	// queue trigger by default) fails to decode such messages.
	EncodingNone Encoding = iota
	// EncodingBase64 sends the content base64-encoded (standard alphabet,
	// padded) and decodes the text of messages it gets and peeks: what the
	// Functions queue trigger expects by default and the older .NET
	// storage SDK did. Content is then limited to 48 KiB, whose encoding
	// fills the service's 64 KiB.
	EncodingBase64
)

// String returns "none" or "base64".
func (e Encoding) String() string {
	switch e {
	case EncodingNone:
		return "none"
	case EncodingBase64:
		return "base64"
	}
	return fmt.Sprintf("Encoding(%d)", int(e))
}

// Options configure a Queue or Service. The zero value (or nil) means
// no encoding, the real clock and the SDK's default client options.
type Options struct {
	// Encoding is the message text encoding; both the producers and the
	// consumers of a queue must use the same one.
	Encoding Encoding
	// OnDecodeError, if set, is called for every message that Get or
	// Peek received whose text is not valid in Encoding (a producer that
	// did not encode). Such a message is returned with its text as the
	// service holds it, neither dropped nor hidden, so a consumer's usual
	// failure handling (retries, the poison queue) still sees it.
	OnDecodeError func(m azq.Message, err error)
	// Clock is what Clock reports: the clock that waits around the queue
	// should use, such as a worker's lease renewals and polling back-off.
	// The service keeps its own time; against azq's server in a test,
	// pass the server's mock clock. A worker or gocloud subscription then
	// follows it, and its poll waits also end in real time, so that it
	// polls whether or not the test moves the clock; a Watermill
	// subscription polls only when the test moves it. The SDK's own retry
	// back-off and try timeout are real time whatever this is. Default:
	// the real clock.
	Clock clock.Clock
	// ClientOptions configure the SDK clients that the constructors
	// build (retries, transport, logging, audience). They are copied and
	// given the adapter's policy (PrepareClientOptions). The constructors
	// from an existing client ignore them.
	ClientOptions *azqueue.ClientOptions
}

// config is Options with defaults filled in.
type config struct {
	enc      Encoding
	onDecode func(azq.Message, error)
	clock    clock.Clock
}

func newConfig(o *Options) (config, error) {
	c := config{clock: clock.New()}
	if o == nil {
		return c, nil
	}
	if o.Encoding != EncodingNone && o.Encoding != EncodingBase64 {
		return c, fmt.Errorf("azure: unknown message encoding %v", o.Encoding)
	}
	c.enc, c.onDecode = o.Encoding, o.OnDecodeError
	if o.Clock != nil {
		c.clock = o.Clock
	}
	return c, nil
}

func (o *Options) clientOptions() *azqueue.ClientOptions {
	if o == nil {
		return PrepareClientOptions(nil)
	}
	return PrepareClientOptions(o.ClientOptions)
}

// encode returns the message text for content.
func (c *config) encode(content string) string {
	if c.enc == EncodingBase64 {
		return base64.StdEncoding.EncodeToString([]byte(content))
	}
	return content
}

// decode returns the content of the message text, or the text itself
// and an error if it is not valid in the encoding.
func (c *config) decode(text string) (string, error) {
	if c.enc != EncodingBase64 {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return text, fmt.Errorf("azure: message text is not base64, as Options.Encoding says it is: %w", err)
	}
	return string(b), nil
}

// PrepareClientOptions returns a copy of o (nil means the SDK's defaults)
// with what the adapter needs of the SDK's pipeline. Build an SDK client
// with it before handing the client to NewQueueFromClient or
// NewServiceFromClient; the other constructors call it themselves.
//
// It adds a per-call policy that lets Update with nil content send Update
// Message without a body, which keeps the message's content; the SDK's
// UpdateMessage always sends one. Requests that are not such an Update
// pass through unchanged. A client built without the policy cannot do
// that Update: it fails with an error, and the message is left as it was.
//
// It wraps the transport (o.Transport, or one like the SDK's default) so
// that no answer brings more than the service can legitimately send: an
// error answer's body is read up to MaxErrorBodyBytes, a Get or Peek of n
// messages fails with a *ResponseTooLargeError past n messages of the
// largest size, and other answers past their own bounds. And unless
// o.Retry.TryTimeout is set, it sets it to DefaultTryTimeout, so that a
// service that takes a request and never answers fails the try (which the
// SDK retries as o.Retry says) instead of holding the caller until its
// context ends.
func PrepareClientOptions(o *azqueue.ClientOptions) *azqueue.ClientOptions {
	var c azqueue.ClientOptions
	if o != nil {
		c = *o
	}
	// Copied, so that neither the caller's slices nor the SDK's appends
	// to them are shared between clients.
	c.PerCallPolicies = append(slices.Clip(slices.Clone(c.PerCallPolicies)), keepContentPolicy{})
	c.PerRetryPolicies = slices.Clip(slices.Clone(c.PerRetryPolicies))
	switch t := c.Transport.(type) {
	case *limitTransport:
		// Prepared already.
	case nil:
		c.Transport = &limitTransport{next: defaultTransport}
	default:
		c.Transport = &limitTransport{next: t}
	}
	if c.Retry.TryTimeout == 0 {
		c.Retry.TryTimeout = DefaultTryTimeout
	}
	return &c
}

// keepContentPolicy turns the SDK's Update Message request into one
// without a body when the adapter marks it so (Queue.Update with nil
// content).
//
// The adapter hands the SDK an empty pop receipt for such an Update and
// the real one in the context; the policy puts it back as it removes the
// body. So a client that lacks the policy sends a request the service
// refuses for its empty receipt, instead of one that would replace the
// content with an empty text.
type keepContentPolicy struct{}

// keepContent marks an Update Message request as one without content. It
// travels in the request's context.
type keepContent struct {
	receipt string // the real pop receipt
	applied bool   // set by the policy; read after the call returns
}

type keepContentKey struct{}

// Do implements policy.Policy.
func (keepContentPolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	if k, ok := raw.Context().Value(keepContentKey{}).(*keepContent); ok && raw.Method == http.MethodPut {
		q := raw.URL.Query()
		q.Set("popreceipt", k.receipt)
		raw.URL.RawQuery = q.Encode()
		if err := req.SetBody(nil, ""); err != nil {
			return nil, err
		}
		k.applied = true
	}
	return req.Next()
}
