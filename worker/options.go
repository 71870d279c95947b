package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/realclock"
	"github.com/benbjohnson/clock"
)

// Queue is what the worker needs from the queue it consumes: four of the
// message operations of azq.MessageQueue, the queue contract. *azq.Queue
// satisfies it, and so does a client of a remote queue such as
// *azure.Queue. Put is used on the poison queue only.
type Queue interface {
	Get(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error)
	Update(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt, visibility time.Duration, content *string) (azq.UpdateResult, error)
	Delete(ctx context.Context, id azq.MessageID, receipt azq.PopReceipt) error
	Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error)
}

// Receiver is implemented by a source that can wait for messages instead of
// being polled, as *azq.Queue can: Receive behaves like Get but blocks until
// at least one message is visible or ctx ends. The worker detects it with a
// type assertion.
type Receiver interface {
	Receive(ctx context.Context, n int, visibility time.Duration) ([]azq.Message, error)
}

// PoisonOpener opens the queue that poison messages go to, creating it if
// needed. The worker calls it the first time it sets a message aside, with
// the name PoisonQueueName chose, and keeps the result.
type PoisonOpener func(ctx context.Context, name string) (Queue, error)

// ServicePoison returns a PoisonOpener that creates the poison queue in svc,
// any back end of azq's service contract (an *azq.Service, an
// *azure.Service, ...), as Functions creates "<queue>-poison" in the
// storage account on first use. A poison queue that exists already is used
// as it is, whatever its metadata. The queue is addressed by name, so one
// deleted and created again is followed.
func ServicePoison(svc azq.QueueService) PoisonOpener {
	return func(ctx context.Context, name string) (Queue, error) {
		q, err := svc.Ref(name)
		if err != nil {
			return nil, err
		}
		if _, err := q.Create(ctx, nil); err != nil && !errors.Is(err, azq.ErrQueueAlreadyExists) {
			return nil, err
		}
		return q, nil
	}
}

// OpenerPoison returns a PoisonOpener that opens the poison queue through
// o, next to the queue o belongs to, as a remote source (an *azure.Queue)
// does in its storage account.
func OpenerPoison(o azq.QueueOpener) PoisonOpener {
	return func(ctx context.Context, name string) (Queue, error) {
		q, err := o.OpenQueue(ctx, name)
		if err != nil {
			return nil, err
		}
		return q, nil
	}
}

// Defaults, as the Azure Functions queue trigger has them.
const (
	DefaultBatchSize       = 16
	DefaultMaxDequeueCount = 5
	DefaultLeaseDuration   = 10 * time.Minute
	DefaultMinPollInterval = 100 * time.Millisecond
	DefaultMaxPollInterval = time.Minute
	// DefaultShutdownTimeout is azq's own choice: Functions has no
	// equivalent, because it never releases messages at shutdown.
	DefaultShutdownTimeout = 30 * time.Second
	// MaxBatchSize is the most messages one Get may return.
	MaxBatchSize = 32
)

// Options configure a Worker. The zero value of every field means its
// default, which is the Azure Functions default where Functions has one.
type Options struct {
	// BatchSize is how many messages one fetch asks for at most, 1 to 32.
	// Default 16 (Functions batchSize).
	BatchSize int
	// NewBatchThreshold: the worker fetches again when the number of
	// messages in flight falls to this. Default: Concurrency−BatchSize
	// when Concurrency is set and larger than BatchSize, Concurrency/2 when
	// it is set and not larger, else (BatchSize/2)·GOMAXPROCS as in
	// Functions. It is capped at Concurrency−1.
	NewBatchThreshold int
	// Concurrency is the most handlers that run at once. Default
	// BatchSize+NewBatchThreshold, the maximum Functions reaches (24 with
	// the defaults on one processor).
	Concurrency int
	// MaxDequeueCount is the number of attempts before a message is set
	// aside as poison. Default 5 (Functions maxDequeueCount).
	MaxDequeueCount int
	// LeaseDuration is the visibility timeout messages are fetched and
	// renewed with; the worker renews every LeaseDuration/2. Default 10
	// minutes (fixed in Functions). It must be at least the queue's
	// minimum visibility timeout for Get (1 s in Azure).
	LeaseDuration time.Duration
	// RetryDelay is the visibility timeout a failed message is released
	// with: the delay before its next attempt. Default 0 (Functions
	// visibilityTimeout).
	RetryDelay time.Duration
	// MinPollInterval and MaxPollInterval bound the idle back-off of a
	// polled source and the back-off after fetch errors. Defaults 100 ms
	// and 1 minute (Functions maxPollingInterval).
	MinPollInterval time.Duration
	MaxPollInterval time.Duration
	// ShutdownTimeout is how long handlers may keep running after Run's
	// context ends before they are cancelled and their messages released.
	// Default 30 s; a negative value releases at once.
	ShutdownTimeout time.Duration
	// SettleWindow is how long, at most, the delete of a message whose
	// handler succeeded waits for others to join it in one
	// azq.DeleteBatch: one call, and one commit where the back end
	// batches, for up to azq.MaxBatchSize deletes. A batch goes sooner
	// when it is full, when no other message is being handled, or when
	// Run stops, and the wait is at most LeaseDuration/10 and half what
	// the message's lease has left, so no lease lapses while its delete
	// waits. The message stays invisible meanwhile, and a worker that
	// crashes in the window leaves it to be handled again after its
	// lease, as one that crashes before its delete does. Default
	// DefaultSettleWindow (5 ms); a negative value deletes each message
	// on its own at once, as does a source that cannot delete many at the
	// cost of one (that is not an azq.MessageQueue and an
	// azq.BatchDeleter), where waiting would gain nothing.
	SettleWindow time.Duration

	// QueueName names the source queue when it has no Name method; it is
	// used to derive the poison queue's name.
	QueueName string
	// Poison opens the poison queue. Default: if the source is an
	// azq.QueueOpener, OpenerPoison of it, so the poison queue is created
	// next to the source on first use, as Functions does: in its Service
	// for an *azq.Queue made by Service.CreateQueue, an azq.NamedQueue or
	// a type embedding one, in its storage account for an *azure.Queue,
	// in its schema for a PostgreSQL queue; otherwise none. Without a
	// poison queue (Poison nil, a source name that must have none, see
	// PoisonQueueName, or an opener whose error matches
	// errors.ErrUnsupported, as a queue made by azq.New answers) a message
	// that has used up its attempts is left invisible until its lease
	// lapses and reported as EventAbandoned, as Functions does when it
	// cannot have a poison queue. Setting Poison when neither QueueName
	// (nor the source's Name method) nor PoisonQueueName gives a name is
	// an invalid option.
	Poison PoisonOpener
	// PoisonQueueName overrides the poison queue's name; by default it is
	// PoisonQueueName(QueueName).
	PoisonQueueName string
	// PoisonBodyOnly copies just the message body to the poison queue, as
	// Functions does, instead of a JSON PoisonRecord; the reason is then
	// only logged and reported in the EventPoisoned event.
	PoisonBodyOnly bool

	// Clock is the time source for every wait: polls, renewals, the
	// shutdown deadline. A mock clock set here is waited on alone, so a
	// test that sets one must move it when the worker waits to poll
	// (EventPollWait says for how long), or the worker never polls again.
	//
	// Default: the source queue's Clock method if it has one, else the
	// real clock. A source's clock is the time of its messages, and the
	// worker follows it, but the interval between polls is the worker's
	// own: when the source's clock is not the real one (the mock clock of
	// an azq queue or of azq's test server), a poll wait, and the settle
	// window, also end once as long has passed in real time. So a worker
	// on a mock clock that nobody moves still polls, and a test that
	// moves it wakes the worker at once, as before.
	Clock clock.Clock
	// Rand is the jitter source of the poll back-off; only the fetching
	// goroutine uses it. Default: a generator seeded at random.
	Rand *rand.Rand

	// Logger, if set, receives one record per event, with the message
	// "worker: " and the event's name, at a level by kind: debug for the
	// routine EventFetched, EventPollWait and EventRenewed; info for the
	// outcomes EventSucceeded and EventReleased, and for EventStopping;
	// warn for the failures EventRenewFailed, EventRetry, EventPoisoned,
	// EventLeaseLost and EventAbandoned. Attributes, where they apply:
	// queue, message_id, dequeue_count, n, wait and error.
	Logger *slog.Logger
	// OnEvent, if set, is called for every event, from the goroutine where
	// it happens; it must be quick and safe for concurrent use.
	OnEvent func(Event)
}

// config is Options with defaults filled in and checked.
type config struct {
	Options
	poisonName string // "" if there is no poison queue
	clk        clock.Clock
	// pollRealToo: poll waits also end after as long on the real clock,
	// since clk is the source's and not the real one (see Options.Clock).
	pollRealToo bool
}

func newConfig(q Queue, o Options) (config, error) {
	c := config{Options: o}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		bad("BatchSize %d is outside 1..%d", c.BatchSize, MaxBatchSize)
	}
	if c.Concurrency < 0 || c.NewBatchThreshold < 0 {
		bad("Concurrency and NewBatchThreshold must not be negative")
	}
	switch {
	case c.Concurrency == 0 && c.NewBatchThreshold == 0:
		c.NewBatchThreshold = max(c.BatchSize/2, 1) * runtime.GOMAXPROCS(0)
		c.Concurrency = c.BatchSize + c.NewBatchThreshold
	case c.Concurrency == 0:
		c.Concurrency = c.BatchSize + c.NewBatchThreshold
	case c.NewBatchThreshold == 0:
		if c.Concurrency > c.BatchSize {
			c.NewBatchThreshold = c.Concurrency - c.BatchSize
		} else {
			c.NewBatchThreshold = c.Concurrency / 2
		}
	}
	c.NewBatchThreshold = min(c.NewBatchThreshold, c.Concurrency-1)

	if c.MaxDequeueCount == 0 {
		c.MaxDequeueCount = DefaultMaxDequeueCount
	}
	if c.MaxDequeueCount < 1 {
		bad("MaxDequeueCount %d is below 1", c.MaxDequeueCount)
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.LeaseDuration < 0 {
		bad("LeaseDuration %v is negative", c.LeaseDuration)
	}
	if c.RetryDelay < 0 {
		bad("RetryDelay %v is negative", c.RetryDelay)
	}
	if c.MinPollInterval == 0 {
		c.MinPollInterval = DefaultMinPollInterval
	}
	if c.MaxPollInterval == 0 {
		c.MaxPollInterval = max(DefaultMaxPollInterval, c.MinPollInterval)
	}
	if c.MinPollInterval < 0 || c.MaxPollInterval < c.MinPollInterval {
		bad("poll intervals %v..%v are not a range", c.MinPollInterval, c.MaxPollInterval)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.SettleWindow == 0 {
		c.SettleWindow = DefaultSettleWindow
	}

	c.clk = c.Clock
	if c.clk == nil {
		if cq, ok := q.(interface{ Clock() clock.Clock }); ok {
			c.clk = cq.Clock()
			c.pollRealToo = c.clk != nil && !realclock.Is(c.clk)
		}
	}
	if c.clk == nil {
		c.clk = clock.New()
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}

	if c.QueueName == "" {
		if nq, ok := q.(interface{ Name() string }); ok {
			c.QueueName = nq.Name()
		}
	}
	defaultPoison := false
	if c.Poison == nil {
		// As Functions creates "<queue>-poison" in the storage account
		// of the queue, a source that opens queues next to it gets its
		// poison queue there: a queue of an *azq.Service in that
		// Service, a remote one in its account.
		if o, ok := q.(azq.QueueOpener); ok {
			c.Poison, defaultPoison = OpenerPoison(o), true
		}
	}
	if c.Poison != nil {
		switch {
		case c.PoisonQueueName != "":
			c.poisonName = c.PoisonQueueName
		case c.QueueName == "" && defaultPoison:
			// Nothing names the source (a queue made by azq.New): it
			// has no poison queue unless the options ask for one.
			c.Poison = nil
		case c.QueueName == "":
			// Poisoning was asked for, but nothing names the queue:
			// silently keeping no poison queue would leave every
			// hopeless message invisible instead.
			bad("Poison is set, but neither QueueName nor PoisonQueueName names the poison queue")
		default:
			// "" for a name that must have no poison queue (one that
			// is already a poison queue, or too long to suffix).
			c.poisonName, _ = PoisonQueueName(c.QueueName)
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return c, nil
}
