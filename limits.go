package azq

import (
	"time"

	"github.com/benbjohnson/clock"
)

// Limits are the bounds azq enforces. The zero value of each field means
// Azure's value, so Limits{} is Azure's limits and a simulation can change
// just the ones it cares about.
type Limits struct {
	// MaxMessageSize is the largest message content in bytes. Azure: 65,536.
	MaxMessageSize int
	// MaxMessagesPerGet is the most messages one Get or Peek may ask for.
	// Azure: 32.
	MaxMessagesPerGet int
	// MaxVisibilityTimeout bounds the visibility timeout of Put, Get and
	// Update. Azure: 7 days.
	MaxVisibilityTimeout time.Duration
	// MinGetVisibilityTimeout is the shortest visibility timeout Get
	// accepts. Azure: 1 second.
	MinGetVisibilityTimeout time.Duration
	// DefaultTimeToLive applies when PutOptions.TimeToLive is zero.
	// Azure: 7 days.
	DefaultTimeToLive time.Duration
	// MaxTimeToLive caps PutOptions.TimeToLive and forbids NeverExpires
	// when positive, as Azure did before version 2017-07-29 (7 days then).
	// Zero means no cap, as Azure today.
	MaxTimeToLive time.Duration
}

// Azure's limits (spec §5).
const (
	azureMaxMessageSize      = 64 << 10
	azureMaxMessagesPerGet   = 32
	azureMaxVisibility       = 7 * 24 * time.Hour
	azureMinGetVisibility    = time.Second
	azureDefaultTimeToLive   = 7 * 24 * time.Hour
	azureMaxListQueueResults = 5000
)

// withDefaults fills each zero or negative field with Azure's value.
func (l Limits) withDefaults() Limits {
	if l.MaxMessageSize <= 0 {
		l.MaxMessageSize = azureMaxMessageSize
	}
	if l.MaxMessagesPerGet <= 0 {
		l.MaxMessagesPerGet = azureMaxMessagesPerGet
	}
	if l.MaxVisibilityTimeout <= 0 {
		l.MaxVisibilityTimeout = azureMaxVisibility
	}
	if l.MinGetVisibilityTimeout <= 0 {
		l.MinGetVisibilityTimeout = azureMinGetVisibility
	}
	if l.DefaultTimeToLive <= 0 {
		l.DefaultTimeToLive = azureDefaultTimeToLive
	}
	if l.MaxTimeToLive < 0 {
		l.MaxTimeToLive = 0
	}
	return l
}

// Option configures a Queue (New), a Service (NewService, Restore) or a
// durable Service (Open).
type Option interface {
	DurableOption
	apply(*config)
}

// DurableOption configures a durable Service (Open). Every Option is one;
// WithSyncInterval, WithCheckpointBytes and WithLogger are only that, so
// that New and NewService, which keep nothing on disk, do not take them.
type DurableOption interface {
	applyDurable(*durableConfig)
}

// option is an Option: a change to the configuration every Service shares.
type option func(*config)

func (o option) apply(c *config)               { o(c) }
func (o option) applyDurable(c *durableConfig) { o(&c.config) }

type config struct {
	clock  clock.Clock
	limits Limits
	// realTime is set while the clock is the default real one, whose time
	// wallNow reads more cheaply than clock.Now.
	realTime bool
}

func defaultConfig() config { return config{clock: clock.New(), realTime: true} }

// withDefaults fills in what the options left unset.
func (c config) withDefaults() config {
	c.limits = c.limits.withDefaults()
	return c
}

func newConfig(opts []Option) config {
	c := defaultConfig()
	for _, o := range opts {
		o.apply(&c)
	}
	return c.withDefaults()
}

// WithClock makes the queue (or every queue of a service) read time from c,
// typically a *clock.Mock in tests. The default is the real clock.
func WithClock(c clock.Clock) Option {
	return option(func(cfg *config) {
		if c != nil {
			cfg.clock = c
			cfg.realTime = false
		}
	})
}

// WithLimits replaces Azure's limits; zero fields keep Azure's values.
func WithLimits(l Limits) Option {
	return option(func(cfg *config) { cfg.limits = l })
}

// CheckPut checks Put's content and options against l as Queue.Put does,
// with the same errors, and returns the effective time-to-live: the
// default for zero, NeverExpires for never. Zero fields of l mean Azure's
// values. A back end of the queue contract that keeps messages elsewhere
// calls it, and the other Check methods, so that bad input gets exactly
// the in-memory queue's errors.
func (l Limits) CheckPut(content string, opts *PutOptions) (time.Duration, error) {
	var o PutOptions
	if opts != nil {
		o = *opts
	}
	l = l.withDefaults()
	return l.checkPut(content, &o)
}

// CheckGet checks the count and visibility timeout of Get and Receive as
// Queue.Get does, with the same errors.
func (l Limits) CheckGet(n int, visibility time.Duration) error {
	l = l.withDefaults()
	return l.checkGet(n, visibility)
}

// CheckPeek checks the count of Peek as Queue.Peek does, with the same
// errors.
func (l Limits) CheckPeek(n int) error {
	l = l.withDefaults()
	return l.checkCount(n)
}

// CheckUpdate checks Update's visibility timeout and, unless nil, its new
// content as Queue.Update does, with the same errors.
func (l Limits) CheckUpdate(visibility time.Duration, content *string) error {
	l = l.withDefaults()
	return l.checkUpdate(visibility, content)
}
