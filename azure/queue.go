package azure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// Queue is one queue of Azure Queue Storage (or of azq's REST server)
// behind the queue contract, azq.MessageQueue. It satisfies what package
// worker needs of a source and discovers (Name, Clock, and azq.QueueOpener
// for the poison queue), so a worker runs on it unchanged; it has no
// Receive, as the service has no long polling, so a worker polls it.
// All methods are safe for concurrent use.
type Queue struct {
	name   string
	client *azqueue.QueueClient
	svc    *Service // the account; nil for NewQueueFromClient
	cfg    config
}

var (
	_ azq.QueueRef    = (*Queue)(nil)
	_ azq.QueueOpener = (*Queue)(nil)
)

// NewQueueFromConnectionString returns the queue name of the storage
// account that connectionString describes: an account name and key, a
// shared access signature, an explicit QueueEndpoint (for azq's server or
// an emulator on another address), or Azure's shortcut for the local
// emulator, UseDevelopmentStorage=true, which is devstoreaccount1 at
// http://127.0.0.1:10001/devstoreaccount1 (where azqd and Azurite listen
// by default), optionally with DevelopmentStorageProxyUri. The Go SDK
// alone refuses the shortcut. It makes no request; the queue need not
// exist yet.
func NewQueueFromConnectionString(connectionString, name string, o *Options) (*Queue, error) {
	s, err := NewServiceFromConnectionString(connectionString, o)
	if err != nil {
		return nil, err
	}
	return s.Queue(name)
}

// NewQueue returns the queue at queueURL (for example
// https://account.queue.core.windows.net/orders), authenticated with
// cred, typically azidentity's DefaultAzureCredential. It makes no
// request.
func NewQueue(queueURL string, cred azcore.TokenCredential, o *Options) (*Queue, error) {
	serviceURL, name, err := splitQueueURL(queueURL)
	if err != nil {
		return nil, err
	}
	s, err := NewService(serviceURL, cred, o)
	if err != nil {
		return nil, err
	}
	return s.Queue(name)
}

// NewQueueFromClient returns the queue that c addresses, with c's
// credentials and pipeline. Build c with PrepareClientOptions, or Update
// with nil content fails. Options.ClientOptions is ignored. Such a queue
// knows no account, so OpenQueue fails: use Service.Queue on a Service
// from NewServiceFromClient where other queues are needed, as for a
// worker's poison queue.
func NewQueueFromClient(c *azqueue.QueueClient, o *Options) (*Queue, error) {
	cfg, err := newConfig(o)
	if err != nil {
		return nil, err
	}
	_, name, err := splitQueueURL(c.URL())
	if err != nil {
		return nil, err
	}
	return &Queue{name: name, client: c, cfg: cfg}, nil
}

// splitQueueURL splits a queue URL into its account's URL and the queue
// name, its last path segment, whatever the addressing style.
func splitQueueURL(queueURL string) (serviceURL, name string, err error) {
	u, err := url.Parse(queueURL)
	if err != nil {
		return "", "", fmt.Errorf("azure: queue URL: %w", err)
	}
	p := strings.TrimSuffix(u.Path, "/")
	i := strings.LastIndexByte(p, '/')
	if i < 0 || i == len(p)-1 {
		return "", "", fmt.Errorf("azure: queue URL %q names no queue", queueURL)
	}
	name = p[i+1:]
	u.Path, u.RawPath = p[:i+1], ""
	return u.String(), name, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Clock returns Options.Clock, or the real clock: the time a worker on the
// queue waits on.
func (q *Queue) Clock() clock.Clock { return q.cfg.clock }

// Client returns the SDK client the queue sends its requests with.
func (q *Queue) Client() *azqueue.QueueClient { return q.client }

// Encoding returns the queue's message text encoding.
func (q *Queue) Encoding() Encoding { return q.cfg.enc }

// OpenQueue returns the queue name of the same account, creating it if it
// does not exist, with the same options. It implements azq.QueueOpener,
// through which a worker opens its poison queue. A queue made by
// NewQueueFromClient cannot open others.
func (q *Queue) OpenQueue(ctx context.Context, name string) (azq.MessageQueue, error) {
	if q.svc == nil {
		return nil, errors.New("azure: a queue made from a queue client cannot open other queues; make it with Service.Queue")
	}
	nq, _, err := q.svc.CreateQueue(ctx, name, nil)
	if errors.Is(err, azq.ErrQueueAlreadyExists) {
		// It exists with metadata of its own: open it as it is.
		nq, err = q.svc.Queue(name)
	}
	if err != nil {
		return nil, err
	}
	return nq, nil
}

// Put adds a message with the given content, encoded as Options.Encoding
// says. The returned Message carries the service's ID, times and pop
// receipt, the content as given, and DequeueCount 0. Durations go to the
// service in whole seconds, rounded up; azq.NeverExpires is -1.
func (q *Queue) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	var eo *azqueue.EnqueueMessageOptions
	if opts != nil && (opts.VisibilityTimeout != 0 || opts.TimeToLive != 0) {
		eo = new(azqueue.EnqueueMessageOptions)
		if opts.VisibilityTimeout != 0 {
			v := seconds(opts.VisibilityTimeout)
			eo.VisibilityTimeout = &v
		}
		if opts.TimeToLive != 0 {
			t := ttlSeconds(opts.TimeToLive)
			eo.TimeToLive = &t
		}
	}
	resp, err := q.client.EnqueueMessage(ctx, q.cfg.encode(content), eo)
	if err != nil {
		return azq.Message{}, mapError(err)
	}
	if len(resp.Messages) != 1 || resp.Messages[0] == nil {
		return azq.Message{}, fmt.Errorf("azure: Put Message answered with %d messages, not one", len(resp.Messages))
	}
	em := resp.Messages[0]
	m := azq.Message{
		Content:         content,
		InsertionTime:   utc(em.InsertionTime),
		ExpirationTime:  utc(em.ExpirationTime),
		NextVisibleTime: utc(em.TimeNextVisible),
	}
	if m.ID, err = messageID(em.MessageID); err != nil {
		return azq.Message{}, err
	}
	if m.PopReceipt, err = popReceipt(em.PopReceipt); err != nil {
		return azq.Message{}, err
	}
	return m, nil
}

// Get takes up to n visible messages (1 to 32) and hides them for the
// visibility timeout (1 second to 7 days, rounded up to whole seconds).
// It returns an empty slice when nothing is visible.
func (q *Queue) Get(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error) {
	num, vis := clampInt32(int64(n)), seconds(visibility)
	resp, err := q.client.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: &num, VisibilityTimeout: &vis})
	if err != nil {
		return nil, mapError(err)
	}
	if err := checkCount("Get Messages", len(resp.Messages), n); err != nil {
		return nil, err
	}
	msgs := make([]azq.Message, 0, len(resp.Messages))
	for _, dm := range resp.Messages {
		if dm == nil {
			continue
		}
		m := azq.Message{
			InsertionTime:   utc(dm.InsertionTime),
			ExpirationTime:  utc(dm.ExpirationTime),
			NextVisibleTime: utc(dm.TimeNextVisible),
		}
		if dm.DequeueCount != nil {
			m.DequeueCount = *dm.DequeueCount
		}
		if m.ID, err = messageID(dm.MessageID); err != nil {
			return nil, err
		}
		if m.PopReceipt, err = popReceipt(dm.PopReceipt); err != nil {
			return nil, err
		}
		q.setContent(&m, dm.MessageText)
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// Peek returns up to n visible messages (1 to 32) without changing them.
// The service sends neither a pop receipt nor the next-visible time, so
// both are zero.
func (q *Queue) Peek(ctx context.Context, n int) ([]azq.Message, error) {
	num := clampInt32(int64(n))
	resp, err := q.client.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: &num})
	if err != nil {
		return nil, mapError(err)
	}
	if err := checkCount("Peek Messages", len(resp.Messages), n); err != nil {
		return nil, err
	}
	msgs := make([]azq.Message, 0, len(resp.Messages))
	for _, pm := range resp.Messages {
		if pm == nil {
			continue
		}
		m := azq.Message{
			InsertionTime:  utc(pm.InsertionTime),
			ExpirationTime: utc(pm.ExpirationTime),
		}
		if pm.DequeueCount != nil {
			m.DequeueCount = *pm.DequeueCount
		}
		if m.ID, err = messageID(pm.MessageID); err != nil {
			return nil, err
		}
		q.setContent(&m, pm.MessageText)
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// checkCount refuses an answer with more messages than the n asked for,
// which the service never sends: the caller gets at most n.
func checkCount(op string, got, n int) error {
	if got > n {
		return fmt.Errorf("azure: the service answered %s for %d messages with %d", op, n, got)
	}
	return nil
}

// setContent decodes the message text into m.Content, or keeps the text
// and reports it when it is not valid in the encoding.
func (q *Queue) setContent(m *azq.Message, text *string) {
	if text == nil {
		return
	}
	c, err := q.cfg.decode(*text)
	m.Content = c
	if err != nil && q.cfg.onDecode != nil {
		q.cfg.onDecode(*m, err)
	}
}

// errNoKeepContentPolicy: see PrepareClientOptions.
var errNoKeepContentPolicy = errors.New("azure: Update without content needs a client built with azure.PrepareClientOptions; " +
	"the SDK's UpdateMessage always sends content, which would replace the message's text")

// Update makes the message id visible again after visibility (0 to 7
// days, rounded up to whole seconds) and replaces its content unless
// content is nil, in which case the request carries no body and the
// service keeps the content. It needs the current receipt and returns the
// new one.
func (q *Queue) Update(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt, visibility time.Duration, content *string) (azq.UpdateResult, error) {
	vis := seconds(visibility)
	opts := &azqueue.UpdateMessageOptions{VisibilityTimeout: &vis}
	var resp azqueue.UpdateMessageResponse
	var err error
	if content != nil {
		resp, err = q.client.UpdateMessage(ctx, id.String(), receipt.String(), q.cfg.encode(*content), opts)
	} else {
		k := &keepContent{receipt: receipt.String()}
		resp, err = q.client.UpdateMessage(context.WithValue(ctx, keepContentKey{}, k), id.String(), "", "", opts)
		if !k.applied {
			var re *azcore.ResponseError
			if err != nil && !errors.As(err, &re) {
				// No answer from the service (a cancelled context,
				// a failed connection): report that.
				return azq.UpdateResult{}, err
			}
			// The service answered a request the policy did not
			// see, and refused it for its empty receipt.
			return azq.UpdateResult{}, errNoKeepContentPolicy
		}
	}
	if err != nil {
		return azq.UpdateResult{}, mapError(err)
	}
	r, err := popReceipt(resp.PopReceipt)
	if err != nil {
		return azq.UpdateResult{}, err
	}
	return azq.UpdateResult{PopReceipt: r, NextVisibleTime: utc(resp.TimeNextVisible)}, nil
}

// Delete removes the message id; the receipt must be its current one.
func (q *Queue) Delete(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt) error {
	_, err := q.client.DeleteMessage(ctx, id.String(), receipt.String(), nil)
	return mapError(err)
}

// Clear deletes every message of the queue.
func (q *Queue) Clear(ctx context.Context) error {
	_, err := q.client.ClearMessages(ctx, nil)
	return mapError(err)
}

// ApproximateCount returns the service's approximate message count, which
// is never below the true count but may lag above it.
func (q *Queue) ApproximateCount(ctx context.Context) (int, error) {
	p, err := q.Properties(ctx)
	return p.ApproximateMessagesCount, err
}

// Properties returns the queue's metadata and approximate message count.
// The SDK reads metadata names from response headers, so they come back
// in canonical header case ("Team" for "team").
func (q *Queue) Properties(ctx context.Context) (azq.Properties, error) {
	resp, err := q.client.GetProperties(ctx, nil)
	if err != nil {
		return azq.Properties{}, mapError(err)
	}
	p := azq.Properties{Metadata: fromSDKMetadata(resp.Metadata)}
	if resp.ApproximateMessagesCount != nil {
		p.ApproximateMessagesCount = int(*resp.ApproximateMessagesCount)
	}
	return p, nil
}

// SetMetadata replaces the queue's metadata; an empty md clears it.
// Metadata that breaks Azure's rules gives azq.ErrInvalidMetadata without
// a request (see Create).
func (q *Queue) SetMetadata(ctx context.Context, md map[string]string) error {
	if err := azq.ValidateMetadata(md); err != nil {
		return err
	}
	_, err := q.client.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: toSDKMetadata(md)})
	return mapError(err)
}

// Create creates the queue with metadata (nil for none) and reports
// whether it was created (201): if it exists with the same metadata, the
// service answers 204 and Create returns created false; with different
// metadata it answers azq.ErrQueueAlreadyExists, as azq.Service does.
// Metadata is checked against Azure's rules (azq.ValidateMetadata) before
// it is sent, and bad metadata gives azq.ErrInvalidMetadata without a
// request: metadata travels in headers, where a name that is no header
// name cannot go and two names that differ only in case would merge.
func (q *Queue) Create(ctx context.Context, metadata map[string]string) (created bool, err error) {
	if err := azq.ValidateMetadata(metadata); err != nil {
		return false, err
	}
	var raw *http.Response
	_, err = q.client.Create(runtime.WithCaptureResponse(ctx, &raw), &azqueue.CreateOptions{Metadata: toSDKMetadata(metadata)})
	if err != nil {
		return false, mapError(err)
	}
	return raw != nil && raw.StatusCode == http.StatusCreated, nil
}

// AccessPolicies returns the queue's stored access policies (Get Queue
// ACL).
func (q *Queue) AccessPolicies(ctx context.Context) ([]azq.AccessPolicy, error) {
	resp, err := q.client.GetAccessPolicy(ctx, nil)
	if err != nil {
		return nil, mapError(err)
	}
	var ps []azq.AccessPolicy
	for _, si := range resp.SignedIdentifiers {
		if si == nil {
			continue
		}
		var p azq.AccessPolicy
		if si.ID != nil {
			p.ID = *si.ID
		}
		if ap := si.AccessPolicy; ap != nil {
			p.Start, p.Expiry = utc(ap.Start), utc(ap.Expiry)
			if ap.Permission != nil {
				p.Permission = *ap.Permission
			}
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// SetAccessPolicies replaces the queue's stored access policies (Set
// Queue ACL); an empty ps removes them. Start and Expiry go in whole
// seconds (the SDK drops the fraction). The service checks the policies:
// one it refuses (more than five, an ID empty or over 64 characters or
// used twice, a permission outside "raup") gives an error that matches
// azq.ErrInvalidAccessPolicy, as azq.Service's does.
func (q *Queue) SetAccessPolicies(ctx context.Context, ps []azq.AccessPolicy) error {
	acl := make([]*azqueue.SignedIdentifier, len(ps))
	for i, p := range ps {
		ap := new(azqueue.AccessPolicy)
		if !p.Start.IsZero() {
			ap.Start = &p.Start
		}
		if !p.Expiry.IsZero() {
			ap.Expiry = &p.Expiry
		}
		if p.Permission != "" {
			ap.Permission = &p.Permission
		}
		acl[i] = &azqueue.SignedIdentifier{ID: &p.ID, AccessPolicy: ap}
	}
	_, err := q.client.SetAccessPolicy(ctx, &azqueue.SetAccessPolicyOptions{QueueACL: acl})
	return mapACLError(err)
}

// messageID parses the service's message ID.
func messageID(s *string) (azq.MessageID, error) {
	if s == nil {
		return azq.MessageID{}, errors.New("azure: the service answered without a message ID")
	}
	id, err := azq.ParseMessageID(*s)
	if err != nil {
		return azq.MessageID{}, fmt.Errorf("azure: the service answered with message ID %q, which is not a UUID", *s)
	}
	return id, nil
}

// popReceipt wraps the service's pop receipt.
func popReceipt(s *string) (azq.PopReceipt, error) {
	if s == nil || *s == "" {
		return azq.PopReceipt{}, errors.New("azure: the service answered without a pop receipt")
	}
	return azq.RemotePopReceipt(*s), nil
}

// utc returns the service's time in UTC, as azq's times are, or the zero
// time if it sent none.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// seconds converts a duration to the service's whole seconds, rounded
// away from zero so that a positive duration never shrinks (a lease of
// 1.5 s lasts 2 s) and a negative one stays negative, which the service
// refuses. Values beyond int32 saturate; the service refuses those too.
func seconds(d time.Duration) int32 {
	s := d / time.Second
	if r := d % time.Second; r > 0 {
		s++
	} else if r < 0 {
		s--
	}
	return clampInt32(int64(s))
}

// ttlSeconds is seconds for a time-to-live: azq.NeverExpires is -1, and
// any other negative duration is at most -2, which the service refuses,
// rather than -1, which it would take as "never".
func ttlSeconds(d time.Duration) int32 {
	if d == azq.NeverExpires {
		return -1
	}
	s := seconds(d)
	if d < 0 && s > -2 {
		s = -2
	}
	return s
}

func clampInt32(v int64) int32 {
	return int32(max(math.MinInt32, min(math.MaxInt32, v)))
}

// toSDKMetadata converts metadata to the SDK's form.
func toSDKMetadata(md map[string]string) map[string]*string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]*string, len(md))
	for k, v := range md {
		out[k] = &v
	}
	return out
}

// fromSDKMetadata converts the SDK's metadata; nil for none, as azq.
func fromSDKMetadata(md map[string]*string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}
