package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// Request is what a rule is matched against: one operation on an account
// and, for queue and message operations, a queue.
type Request struct {
	// Operation is one of Operations.
	Operation string
	Account   string
	// Queue is empty for the service operations.
	Queue string
	// Messages is how many messages the request handles, for the queue's
	// throttle: 1 for Put, Update, Delete and Clear, the number asked for
	// by Get and Peek, 0 for the rest.
	Messages int
}

// Decision is what happens to a request. The zero Decision lets it
// through untouched.
type Decision struct {
	// Delay holds the answer back this long, before anything else
	// happens.
	Delay time.Duration
	// Error, if not nil, is the answer instead of the operation's.
	Error *azq.Error
	// Network, if not empty, fails the connection instead of answering.
	Network Network
	// Applied runs the operation before Error or Network replaces its
	// answer.
	Applied bool
	// Rule names the rule that chose Error or Network; for a request
	// the throttle refused, it is "throttle" and Throttled is set.
	Rule      string
	Throttled bool
}

// Fails reports whether d replaces the answer.
func (d Decision) Fails() bool { return d.Error != nil || d.Network != "" }

// ThrottleRule is Decision.Rule for a request the throttle refused.
const ThrottleRule = "throttle"

// Options configure an Injector.
type Options struct {
	// Config holds the seed, the rules and the throttle to start with.
	Config
	// Clock is the time rule windows and the throttle read: give the mock
	// clock the queues read, if they read one. nil means the real clock.
	Clock clock.Clock
}

// Injector decides, request by request, which fault a request meets: it
// holds the rules in order and the throttle. Rules are tried in order;
// every rule that matches and fires counts a hit; a rule with only a
// delay adds it and lets the next rules be tried, and the first rule that
// fails the request (an error or a network failure) ends the search.
//
// Random choices (Probability, a delay between Delay and MaxDelay) come
// from a generator per rule seeded with the seed and the rule's number,
// so the same seed and the same requests in the same order meet the same
// faults. An Injector is safe for concurrent use; concurrent requests
// take their turns in an order the scheduler picks.
type Injector struct {
	clock clock.Clock
	seed  uint64
	// active is set while there are rules or a throttle, so that Decide
	// costs one atomic load when there is nothing to do.
	active atomic.Bool

	mu       sync.Mutex // guards everything below
	rules    []*ruleState
	next     uint64 // the number of the next rule added, from 1
	throttle *limiter
	// throttled counts the requests a throttle refused, since New.
	throttled int64
	// retired holds the hits of the rules removed, by name, so that
	// Totals never goes back.
	retired map[string]int64
}

// ruleState is a rule with its counters and random generator.
type ruleState struct {
	Rule
	seq     uint64
	added   time.Time
	matches int64 // requests that matched When's fields, before Every
	hits    int64
	rng     *rand.Rand
}

// New returns an Injector with opts' rules and throttle, or the first
// invalid field of either.
func New(opts Options) (*Injector, error) {
	in := &Injector{clock: opts.Clock, seed: opts.Seed}
	if in.clock == nil {
		in.clock = clock.New()
	}
	if err := in.Add(opts.Rules...); err != nil {
		return nil, err
	}
	if err := in.SetThrottle(opts.Throttle); err != nil {
		return nil, err
	}
	return in, nil
}

// Add appends rules after the ones there are, or adds none and returns
// the first invalid field (prefixed "rules[i]") or a name in use.
func (in *Injector) Add(rules ...Rule) error {
	for i := range rules {
		if err := rules[i].Validate(); err != nil {
			return within(fmt.Sprintf("rules[%d]", i), err)
		}
	}
	if err := checkNames(rules); err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, r := range rules {
		if r.Name != "" && in.lookupLocked(r.Name) != nil {
			return fieldErr(fmt.Sprintf("rules[%d].name", i), "%q is the name of a rule already added", r.Name)
		}
	}
	now := in.clock.Now()
	for _, r := range rules {
		in.next++
		st := &ruleState{Rule: r, seq: in.next, added: now, rng: rand.New(rand.NewPCG(in.seed, in.next))}
		st.When.Operations = append([]string(nil), r.When.Operations...)
		if st.Name == "" {
			st.Name = in.freeNameLocked()
		}
		in.rules = append(in.rules, st)
	}
	in.active.Store(len(in.rules) > 0 || in.throttle != nil)
	return nil
}

func (in *Injector) lookupLocked(name string) *ruleState {
	for _, st := range in.rules {
		if st.Name == name {
			return st
		}
	}
	return nil
}

// freeNameLocked is "rule-N" for the rule being added, or the next N
// that no rule has taken.
func (in *Injector) freeNameLocked() string {
	for n := in.next; ; n++ {
		name := fmt.Sprintf("rule-%d", n)
		if in.lookupLocked(name) == nil {
			return name
		}
	}
}

// Remove deletes the named rule and reports whether there was one.
func (in *Injector) Remove(name string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, st := range in.rules {
		if st.Name == name {
			in.retireLocked(st)
			in.rules = append(in.rules[:i], in.rules[i+1:]...)
			in.active.Store(len(in.rules) > 0 || in.throttle != nil)
			return true
		}
	}
	return false
}

// Clear deletes every rule. The throttle stays.
func (in *Injector) Clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, st := range in.rules {
		in.retireLocked(st)
	}
	in.rules = nil
	in.active.Store(in.throttle != nil)
}

// retireLocked keeps the hits of st, which is being removed, for Totals.
func (in *Injector) retireLocked(st *ruleState) {
	if st.hits == 0 {
		return
	}
	if in.retired == nil {
		in.retired = map[string]int64{}
	}
	in.retired[st.Name] += st.hits
}

// SetThrottle replaces the throttle, emptying its buckets; nil turns
// throttling off. The count of requests refused goes on from where it
// was.
func (in *Injector) SetThrottle(t *Throttle) error {
	if t != nil {
		if err := t.Validate(); err != nil {
			return within("throttle", err)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.throttle = nil
	if t != nil && (t.QueueMessagesPerSecond > 0 || t.AccountRequestsPerSecond > 0) {
		in.throttle = newLimiter(*t, maxBuckets)
	}
	in.active.Store(len(in.rules) > 0 || in.throttle != nil)
	return nil
}

// RuleStatus is a rule as it stands: the rule, with the name it was
// given, and its counters.
type RuleStatus struct {
	Rule
	// Added is when the rule was added, on the Injector's clock.
	Added time.Time
	// Matches counts the requests that matched the rule's operations,
	// queue, account and window; Hits, the times it fired.
	Matches, Hits int64
	// Exhausted is set once Hits reaches When.Times.
	Exhausted bool
}

// Status is the state of an Injector: its rules with their counters, and
// its throttle.
type Status struct {
	Seed     uint64
	Rules    []RuleStatus
	Throttle *Throttle
	// Throttled counts the requests refused by a throttle since the
	// Injector was made: replacing the throttle or turning it off does
	// not set it back.
	Throttled int64
}

// Status returns the rules, in order, and the throttle.
func (in *Injector) Status() Status {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := Status{Seed: in.seed, Rules: make([]RuleStatus, len(in.rules))}
	for i, st := range in.rules {
		r := st.Rule
		r.When.Operations = append([]string(nil), r.When.Operations...)
		s.Rules[i] = RuleStatus{Rule: r, Added: st.added, Matches: st.matches, Hits: st.hits,
			Exhausted: r.When.Times > 0 && st.hits >= int64(r.When.Times)}
	}
	if in.throttle != nil {
		t := in.throttle.cfg
		s.Throttle = &t
	}
	s.Throttled = in.throttled
	return s
}

// Totals are an Injector's counters since New. They never go back,
// whatever rules are removed or throttle replaced, as the counters of a
// metrics scrape must not.
type Totals struct {
	// Hits counts the times the rules fired, by rule name: every rule
	// there is, and every rule removed after it fired. A rule added under
	// the name of one removed adds to its count.
	Hits map[string]int64
	// Throttled counts the requests refused by a throttle.
	Throttled int64
}

// Totals returns the Injector's counters since New.
func (in *Injector) Totals() Totals {
	in.mu.Lock()
	defer in.mu.Unlock()
	t := Totals{Hits: make(map[string]int64, len(in.retired)+len(in.rules)), Throttled: in.throttled}
	for name, n := range in.retired {
		t.Hits[name] = n
	}
	for _, st := range in.rules {
		t.Hits[st.Name] += st.hits
	}
	return t
}

// Hits returns how many times the named rule has fired (0 if there is no
// such rule).
func (in *Injector) Hits(name string) int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	if st := in.lookupLocked(name); st != nil {
		return st.hits
	}
	return 0
}

// Decide returns what happens to r: the rules' delays and the first
// failure, or the throttle's refusal. It counts matches and hits.
func (in *Injector) Decide(r Request) Decision {
	if !in.active.Load() {
		return Decision{}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	now := in.clock.Now()
	var d Decision
	if in.throttle != nil {
		if reason, ok := in.throttle.admit(r, now); !ok {
			in.throttled++
			d.Error, d.Rule, d.Throttled = ServerBusy(reason), ThrottleRule, true
			return d
		}
	}
	for _, st := range in.rules {
		if !st.fires(r, now) {
			continue
		}
		t := &st.Then
		delay := t.Delay
		if t.MaxDelay > t.Delay {
			delay += time.Duration(st.rng.Int64N(int64(t.MaxDelay-t.Delay) + 1))
		}
		d.Delay += delay
		if t.Error == "" && t.Network == "" {
			continue
		}
		d.Error, d.Network, d.Rule = t.AzureError(), t.Network, st.Name
		d.Applied = t.Applied || t.Network == NetworkTruncate
		break
	}
	return d
}

// fires reports whether the rule fires on r at now, counting the match
// and the hit.
func (st *ruleState) fires(r Request, now time.Time) bool {
	w := &st.When
	if w.Times > 0 && st.hits >= int64(w.Times) {
		return false
	}
	if len(w.Operations) > 0 && !slices.Contains(w.Operations, r.Operation) {
		return false
	}
	if w.Account != "" && w.Account != r.Account {
		return false
	}
	if w.Queue != "" {
		if r.Queue == "" {
			return false
		}
		if prefix, ok := strings.CutSuffix(w.Queue, "*"); ok {
			if !strings.HasPrefix(r.Queue, prefix) {
				return false
			}
		} else if w.Queue != r.Queue {
			return false
		}
	}
	start, end := w.From, w.Until
	if w.After > 0 {
		start = st.added.Add(w.After)
	}
	if w.For > 0 {
		base := start
		if base.IsZero() {
			base = st.added
		}
		end = base.Add(w.For)
	}
	if !start.IsZero() && now.Before(start) || !end.IsZero() && !now.Before(end) {
		return false
	}
	st.matches++
	if w.Every > 1 && st.matches%int64(w.Every) != 0 {
		return false
	}
	if w.Probability > 0 && st.rng.Float64() >= w.Probability {
		return false
	}
	st.hits++
	return true
}

// Sleep waits d on the real clock, or until ctx is done, and returns
// ctx's error in that case. It is how a Decision's Delay is served.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
