package faults

import (
	"math"
	"time"
)

// Throttle sets the rates past which requests are refused with 503
// ServerBusy, as Azure refuses them past its scalability targets. Each
// rate is a token bucket holding one second's worth, refilled on the
// Injector's clock: a burst of more than a second's worth is refused, a
// client paced at the rate never is. Zero turns a limit off.
type Throttle struct {
	// QueueMessagesPerSecond limits the messages of one queue: each Put,
	// Update, Delete and Clear counts one, each Get and Peek the number
	// of messages it asks for. Azure's target is 2,000. Refused with
	// ServerBusy, ReasonBusy's message.
	QueueMessagesPerSecond float64
	// AccountRequestsPerSecond limits the requests to one account,
	// whatever the operation. Azure's target is 20,000. Refused with
	// ServerBusy, ReasonOperations's message.
	AccountRequestsPerSecond float64
}

// AzureTargets are Azure's published scalability targets for a storage
// account's queues: 2,000 messages a second per queue and 20,000 requests
// a second per account.
var AzureTargets = Throttle{QueueMessagesPerSecond: 2000, AccountRequestsPerSecond: 20000}

// maxRate bounds a configured rate; a bucket of more is no limit.
const maxRate = 1e9

// Validate reports an invalid rate as a *FieldError.
func (t *Throttle) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"queue_messages_per_second", t.QueueMessagesPerSecond}, {"account_requests_per_second", t.AccountRequestsPerSecond}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > maxRate {
			return fieldErr(f.name, "%v: want a rate from 0 (no limit) to %g", f.v, float64(maxRate))
		}
	}
	return nil
}

// bucket is a token bucket: tokens, as of at, out of capacity, refilled
// at rate a second.
type bucket struct {
	tokens float64
	at     time.Time
}

// level is b's tokens at now, filled up since b.at.
func (b *bucket) level(now time.Time, rate float64) float64 {
	capacity := math.Max(rate, 1)
	if b.at.IsZero() {
		return capacity
	}
	if d := now.Sub(b.at); d > 0 {
		return math.Min(capacity, b.tokens+d.Seconds()*rate)
	}
	return b.tokens
}

// maxBuckets bounds the buckets kept; past it, full ones are dropped (a
// full bucket is the same as none).
const maxBuckets = 10000

// limiter is the state of a Throttle. Its owner's lock guards it.
type limiter struct {
	cfg      Throttle
	accounts map[string]*bucket
	queues   map[[2]string]*bucket
	refused  int64
}

func newLimiter(t Throttle) *limiter {
	return &limiter{cfg: t, accounts: map[string]*bucket{}, queues: map[[2]string]*bucket{}}
}

// admit takes a request's tokens, or refuses it with the reason Azure
// gives, taking nothing.
func (l *limiter) admit(r Request, now time.Time) (Reason, bool) {
	var ab, qb *bucket
	var alevel, qlevel float64
	if rate := l.cfg.AccountRequestsPerSecond; rate > 0 {
		ab = l.accounts[r.Account]
		if ab == nil {
			ab = &bucket{}
		}
		if alevel = ab.level(now, rate); alevel < 1 {
			l.refused++
			return ReasonOperations, false
		}
	}
	need := float64(r.Messages)
	if rate := l.cfg.QueueMessagesPerSecond; rate > 0 && r.Queue != "" && need > 0 {
		key := [2]string{r.Account, r.Queue}
		qb = l.queues[key]
		if qb == nil {
			qb = &bucket{}
		}
		// A request for more than a bucket holds (Get of 32 with a rate
		// under 32) waits for a full bucket rather than never passing.
		if qlevel = qb.level(now, rate); qlevel < math.Min(need, math.Max(rate, 1)) {
			l.refused++
			return ReasonBusy, false
		}
		qb.tokens, qb.at = qlevel-need, now
		if len(l.queues) >= maxBuckets {
			l.queues = prune(l.queues, now, rate)
		}
		l.queues[key] = qb
	}
	if ab != nil {
		ab.tokens, ab.at = alevel-1, now
		if len(l.accounts) >= maxBuckets {
			l.accounts = prune(l.accounts, now, l.cfg.AccountRequestsPerSecond)
		}
		l.accounts[r.Account] = ab
	}
	return "", true
}

func prune[K comparable](m map[K]*bucket, now time.Time, rate float64) map[K]*bucket {
	for k, b := range m {
		if b.level(now, rate) >= math.Max(rate, 1) {
			delete(m, k)
		}
	}
	return m
}
