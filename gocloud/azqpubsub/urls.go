package azqpubsub

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"gocloud.dev/pubsub"
)

// The URL schemes this package registers with pubsub.DefaultURLMux.
const (
	// Scheme is for queues of an in-process *azq.Service: azq://orders.
	Scheme = "azq"
	// AzureScheme is for Azure Queue Storage through package azure:
	// azurequeue://orders.
	AzureScheme = "azurequeue"
)

func init() {
	mux := pubsub.DefaultURLMux()
	mux.RegisterTopic(Scheme, new(defaultOpener))
	mux.RegisterSubscription(Scheme, new(defaultOpener))
	mux.RegisterTopic(AzureScheme, new(defaultAzureOpener))
	mux.RegisterSubscription(AzureScheme, new(defaultAzureOpener))
}

var defaultService = sync.OnceValue(func() *azq.Service { return azq.NewService() })

// DefaultService returns the in-memory Service that azq:// URLs open on
// pubsub.DefaultURLMux, made on first use. Create its queues before
// sending to them; to serve azq:// from another Service (a durable one,
// say), register a URLOpener with it on a URLMux of your own.
func DefaultService() *azq.Service { return defaultService() }

type defaultOpener struct{}

func (defaultOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*pubsub.Topic, error) {
	return (&URLOpener{}).OpenTopicURL(ctx, u)
}

func (defaultOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*pubsub.Subscription, error) {
	return (&URLOpener{}).OpenSubscriptionURL(ctx, u)
}

// URLOpener opens azq:// URLs on the queues of a back end of azq's
// service contract: an in-process *azq.Service (DefaultService() unless
// Service is set), or any other azq.QueueService, such as an
// *azure.Service or a PostgreSQL one.
//
// The URL's host is the queue's name; a topic's may be a comma-separated
// list of names, which makes a fan-out topic (see Fanout). No path. Query
// parameters: "ttl" on a topic, a message's time to live (a Go duration,
// or "never"); "visibility" on a subscription, the ack deadline (a Go
// duration). For example azq://orders?visibility=2m. The queue need not
// exist when the URL is opened; Send and Receive report a missing one as
// NotFound, and follow the name if the queue is deleted and created
// again.
type URLOpener struct {
	// Service holds the queues; nil means DefaultService().
	Service azq.QueueService
	// TopicOptions and SubscriptionOptions are the options of what the
	// opener opens, before the URL's parameters.
	TopicOptions        TopicOptions
	SubscriptionOptions SubscriptionOptions
}

func (o *URLOpener) service() azq.QueueService {
	if o.Service != nil {
		return o.Service
	}
	return DefaultService()
}

// OpenTopicURL implements pubsub.TopicURLOpener.
func (o *URLOpener) OpenTopicURL(_ context.Context, u *url.URL) (*pubsub.Topic, error) {
	names, opts, err := topicURL(u, o.TopicOptions)
	if err != nil {
		return nil, err
	}
	svc := o.service()
	qs := make([]azq.MessageQueue, len(names))
	for i, n := range names {
		if qs[i], err = svc.Ref(n); err != nil {
			return nil, fmt.Errorf("azqpubsub: open topic %v: %w", u, err)
		}
	}
	return openTopic(qs, &opts), nil
}

// OpenSubscriptionURL implements pubsub.SubscriptionURLOpener.
func (o *URLOpener) OpenSubscriptionURL(_ context.Context, u *url.URL) (*pubsub.Subscription, error) {
	name, opts, err := subscriptionURL(u, o.SubscriptionOptions)
	if err != nil {
		return nil, err
	}
	q, err := o.service().Ref(name)
	if err != nil {
		return nil, fmt.Errorf("azqpubsub: open subscription %v: %w", u, err)
	}
	return OpenSubscription(q, &opts), nil
}

// AzureURLOpener opens azurequeue:// URLs on the queues of a storage
// account, through package azure.
//
// The URL's host is the queue's name (a topic's may be a comma-separated
// list, as for URLOpener), as gocloud's azblob:// URLs name a container:
// the account comes from the credentials. The query parameters are
// URLOpener's. For example azurequeue://orders?visibility=2m.
type AzureURLOpener struct {
	// Service is the account. The opener that pubsub.DefaultURLMux uses
	// makes it from the environment, as gocloud's Azure drivers do:
	// AZURE_STORAGE_CONNECTION_STRING (any connection string that
	// azure.NewServiceFromConnectionString takes, such as azq's server's
	// or an emulator's), or else AZURE_STORAGE_ACCOUNT with
	// AZURE_STORAGE_KEY, at AZURE_STORAGE_DOMAIN (default
	// core.windows.net) over AZURE_STORAGE_PROTOCOL (default https).
	Service *azure.Service
	// TopicOptions and SubscriptionOptions are the options of what the
	// opener opens, before the URL's parameters.
	TopicOptions        TopicOptions
	SubscriptionOptions SubscriptionOptions
}

// OpenTopicURL implements pubsub.TopicURLOpener.
func (o *AzureURLOpener) OpenTopicURL(_ context.Context, u *url.URL) (*pubsub.Topic, error) {
	if o.Service == nil {
		return nil, fmt.Errorf("azqpubsub: open topic %v: AzureURLOpener has no Service", u)
	}
	names, opts, err := topicURL(u, o.TopicOptions)
	if err != nil {
		return nil, err
	}
	qs := make([]azq.MessageQueue, len(names))
	for i, n := range names {
		if qs[i], err = o.Service.Queue(n); err != nil {
			return nil, fmt.Errorf("azqpubsub: open topic %v: %w", u, err)
		}
	}
	return openTopic(qs, &opts), nil
}

// OpenSubscriptionURL implements pubsub.SubscriptionURLOpener.
func (o *AzureURLOpener) OpenSubscriptionURL(_ context.Context, u *url.URL) (*pubsub.Subscription, error) {
	if o.Service == nil {
		return nil, fmt.Errorf("azqpubsub: open subscription %v: AzureURLOpener has no Service", u)
	}
	name, opts, err := subscriptionURL(u, o.SubscriptionOptions)
	if err != nil {
		return nil, err
	}
	q, err := o.Service.Queue(name)
	if err != nil {
		return nil, fmt.Errorf("azqpubsub: open subscription %v: %w", u, err)
	}
	return OpenSubscription(q, &opts), nil
}

// defaultAzureOpener makes its AzureURLOpener from the environment on
// first use.
type defaultAzureOpener struct {
	once   sync.Once
	opener *AzureURLOpener
	err    error
}

func (d *defaultAzureOpener) open() (*AzureURLOpener, error) {
	d.once.Do(func() {
		conn, err := connectionStringFromEnv()
		if err != nil {
			d.err = err
			return
		}
		svc, err := azure.NewServiceFromConnectionString(conn, nil)
		if err != nil {
			d.err = fmt.Errorf("azqpubsub: %s URLs: %w", AzureScheme, err)
			return
		}
		d.opener = &AzureURLOpener{Service: svc}
	})
	return d.opener, d.err
}

func (d *defaultAzureOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*pubsub.Topic, error) {
	o, err := d.open()
	if err != nil {
		return nil, err
	}
	return o.OpenTopicURL(ctx, u)
}

func (d *defaultAzureOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*pubsub.Subscription, error) {
	o, err := d.open()
	if err != nil {
		return nil, err
	}
	return o.OpenSubscriptionURL(ctx, u)
}

// connectionStringFromEnv returns the connection string that the
// environment describes (see AzureURLOpener.Service).
func connectionStringFromEnv() (string, error) {
	if c := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); c != "" {
		return c, nil
	}
	account, key := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_KEY")
	if account == "" || key == "" {
		return "", fmt.Errorf("azqpubsub: %s URLs need AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY, in the environment", AzureScheme)
	}
	domain, protocol := os.Getenv("AZURE_STORAGE_DOMAIN"), os.Getenv("AZURE_STORAGE_PROTOCOL")
	if domain == "" {
		domain = "core.windows.net"
	}
	if protocol == "" {
		protocol = "https"
	}
	return fmt.Sprintf("DefaultEndpointsProtocol=%s;AccountName=%s;AccountKey=%s;EndpointSuffix=%s", protocol, account, key, domain), nil
}

func openTopic(qs []azq.MessageQueue, opts *TopicOptions) *pubsub.Topic {
	if len(qs) == 1 {
		return OpenTopic(qs[0], opts)
	}
	return OpenFanoutTopic(NewFanout(qs...), opts)
}

// topicURL reads a topic URL: its queue names and options.
func topicURL(u *url.URL, opts TopicOptions) ([]string, TopicOptions, error) {
	names, err := queueNames(u)
	if err != nil {
		return nil, opts, err
	}
	for k, v := range u.Query() {
		switch {
		case k == "ttl" && len(v) == 1 && v[0] == "never":
			opts.TimeToLive = azq.NeverExpires
		case k == "ttl" && len(v) == 1:
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return nil, opts, fmt.Errorf("azqpubsub: open topic %v: ttl %q is neither a positive duration nor \"never\"", u, v[0])
			}
			opts.TimeToLive = d
		default:
			return nil, opts, fmt.Errorf("azqpubsub: open topic %v: unknown or repeated query parameter %q", u, k)
		}
	}
	return names, opts, nil
}

// subscriptionURL reads a subscription URL: its queue name and options.
func subscriptionURL(u *url.URL, opts SubscriptionOptions) (string, SubscriptionOptions, error) {
	names, err := queueNames(u)
	if err != nil {
		return "", opts, err
	}
	if len(names) != 1 {
		return "", opts, fmt.Errorf("azqpubsub: open subscription %v: a subscription receives from one queue", u)
	}
	for k, v := range u.Query() {
		switch {
		case k == "visibility" && len(v) == 1:
			d, err := time.ParseDuration(v[0])
			if err != nil || d < time.Second {
				return "", opts, fmt.Errorf("azqpubsub: open subscription %v: visibility %q is not a duration of a second or more", u, v[0])
			}
			opts.VisibilityTimeout = d
		default:
			return "", opts, fmt.Errorf("azqpubsub: open subscription %v: unknown or repeated query parameter %q", u, k)
		}
	}
	return names[0], opts, nil
}

// queueNames returns the queue names of a URL's host, checked against
// Azure's naming rules.
func queueNames(u *url.URL) ([]string, error) {
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("azqpubsub: %v: a URL names its queue in the host and has no path", u)
	}
	names := strings.Split(u.Host, ",")
	for _, n := range names {
		if err := azq.ValidateQueueName(n); err != nil {
			return nil, fmt.Errorf("azqpubsub: %v: %w", u, err)
		}
	}
	return names, nil
}
