package queuetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/queuetest"
	"github.com/benbjohnson/clock"
)

// mutant is an in-memory queue with one semantic of the contract broken.
type mutant struct {
	*azq.Queue
	name string

	mu     sync.Mutex
	latest map[azq.MessageID]azq.PopReceipt // staleReceiptWorks
}

// mutants are the broken back ends; the suite must fail on each.
var mutants = []string{
	"updateWithoutContentClears",
	"errorsLoseTheirSentinels",
	"peekDequeues",
	"countSkipsInvisible",
	"staleReceiptWorks",
	"putIgnoresVisibility",
	"putIgnoresTimeToLive",
	"batchFailsWhole",
	"batchPutDropsOptions",
	"batchDeleteIgnoresReceipts",
}

func (m *mutant) remember(id azq.MessageID, r azq.PopReceipt) {
	m.mu.Lock()
	if m.latest == nil {
		m.latest = make(map[azq.MessageID]azq.PopReceipt)
	}
	m.latest[id] = r
	m.mu.Unlock()
}

func (m *mutant) current(id azq.MessageID, r azq.PopReceipt) azq.PopReceipt {
	if m.name != "staleReceiptWorks" {
		return r
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.latest[id]; ok {
		return l
	}
	return r
}

func (m *mutant) err(err error) error {
	if err != nil && m.name == "errorsLoseTheirSentinels" {
		return errors.New(err.Error())
	}
	return err
}

func (m *mutant) Put(ctx context.Context, content string, opts *azq.PutOptions) (azq.Message, error) {
	if opts != nil {
		o := *opts
		switch m.name {
		case "putIgnoresVisibility":
			o.VisibilityTimeout = 0
		case "putIgnoresTimeToLive":
			o.TimeToLive = 0
		}
		opts = &o
	}
	msg, err := m.Queue.Put(ctx, content, opts)
	if err == nil {
		m.remember(msg.ID, msg.PopReceipt)
	}
	return msg, m.err(err)
}

func (m *mutant) Get(ctx context.Context, n int, vis time.Duration) ([]azq.Message, error) {
	ms, err := m.Queue.Get(ctx, n, vis)
	for _, msg := range ms {
		m.remember(msg.ID, msg.PopReceipt)
	}
	return ms, m.err(err)
}

func (m *mutant) Peek(ctx context.Context, n int) ([]azq.Message, error) {
	if m.name == "peekDequeues" {
		ms, err := m.Queue.Get(ctx, n, time.Second)
		for i := range ms {
			ms[i].PopReceipt = azq.PopReceipt{}
		}
		return ms, m.err(err)
	}
	ms, err := m.Queue.Peek(ctx, n)
	return ms, m.err(err)
}

func (m *mutant) Update(ctx context.Context, id azq.MessageID, r azq.PopReceipt, vis time.Duration, content *string) (azq.UpdateResult, error) {
	if content == nil && m.name == "updateWithoutContentClears" {
		content = new(string)
	}
	res, err := m.Queue.Update(ctx, id, m.current(id, r), vis, content)
	if err == nil {
		m.remember(id, res.PopReceipt)
	}
	return res, m.err(err)
}

func (m *mutant) Delete(ctx context.Context, id azq.MessageID, r azq.PopReceipt) error {
	return m.err(m.Queue.Delete(ctx, id, m.current(id, r)))
}

func (m *mutant) ApproximateCount(ctx context.Context) (int, error) {
	if m.name == "countSkipsInvisible" {
		ms, err := m.Queue.Peek(ctx, 32)
		return len(ms), err
	}
	n, err := m.Queue.ApproximateCount(ctx)
	return n, m.err(err)
}

// PutBatch is the queue's, but that the batchFailsWhole mutant fails the
// call for one item's failure, and batchPutDropsOptions drops the items'
// options.
func (m *mutant) PutBatch(ctx context.Context, reqs []azq.PutRequest) ([]azq.PutResult, error) {
	if m.name == "batchPutDropsOptions" {
		plain := make([]azq.PutRequest, len(reqs))
		for i, r := range reqs {
			plain[i].Content = r.Content
		}
		reqs = plain
	}
	res, err := m.Queue.PutBatch(ctx, reqs)
	if err == nil && m.name == "batchFailsWhole" {
		for _, r := range res {
			if r.Err != nil {
				return nil, r.Err
			}
		}
	}
	return res, m.err(err)
}

// DeleteBatch is the queue's, but that the batchFailsWhole mutant fails
// the call for one item's failure, and batchDeleteIgnoresReceipts deletes
// a message whatever receipt an item gives.
func (m *mutant) DeleteBatch(ctx context.Context, reqs []azq.DeleteRequest) ([]error, error) {
	if m.name == "batchDeleteIgnoresReceipts" {
		errs := make([]error, len(reqs))
		for i, r := range reqs {
			m.mu.Lock()
			p, ok := m.latest[r.ID]
			m.mu.Unlock()
			if !ok {
				p = r.PopReceipt
			}
			errs[i] = m.Queue.Delete(ctx, r.ID, p)
		}
		return errs, nil
	}
	errs, err := m.Queue.DeleteBatch(ctx, reqs)
	if err == nil && m.name == "batchFailsWhole" {
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
	}
	return errs, m.err(err)
}

// The suite passes on the in-memory queue, the reference back end.
func TestQueueContractOnMemory(t *testing.T) {
	queuetest.RunQueueTests(t, newMemoryQueue)
}

const mutantEnv = "QUEUETEST_MUTANT"

// The suite can fail: run in a child process against each broken back
// end, it reports a failure, in the subtests that check what was broken.
func TestSuiteCatchesBrokenBackEnds(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		queuetest.RunQueueTests(t, func(t *testing.T) queuetest.Fixture {
			mock := clock.NewMock()
			return queuetest.Fixture{Queue: &mutant{Queue: azq.New(azq.WithClock(mock)), name: name}, Clock: mock}
		})
		return
	}
	wantFailing := map[string][]string{
		"updateWithoutContentClears": {"UpdateContent"},
		"errorsLoseTheirSentinels":   {"GetRotatesTheReceipt", "MessageSizeLimit", "CountLimits"},
		"peekDequeues":               {"PeekChangesNothing", "DequeueCountCountsGetsOnly"},
		"countSkipsInvisible":        {"CountIncludesInvisible"},
		"staleReceiptWorks":          {"GetRotatesTheReceipt", "UpdateRotatesTheReceipt", "RedequeueKillsTheLapsedReceipt"},
		"putIgnoresVisibility":       {"PutVisibility"},
		"putIgnoresTimeToLive":       {"TimeToLive", "ExpiresWhileInvisible"},
		"batchFailsWhole":            {"BatchPutMatchesPut", "BatchDeleteMatchesDelete"},
		"batchPutDropsOptions":       {"BatchPutMatchesPut"},
		"batchDeleteIgnoresReceipts": {"BatchDeleteMatchesDelete"},
	}
	for _, name := range mutants {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesBrokenBackEnds$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed on a back end where %s:\n%s", name, out)
			}
			var failed []string
			for _, line := range strings.Split(string(out), "\n") {
				if _, sub, ok := strings.Cut(line, "--- FAIL: TestSuiteCatchesBrokenBackEnds/"); ok {
					sub, _, _ = strings.Cut(sub, " ")
					failed = append(failed, sub)
				}
			}
			sort.Strings(failed)
			for _, want := range wantFailing[name] {
				if i := sort.SearchStrings(failed, want); i == len(failed) || failed[i] != want {
					t.Errorf("%s: subtest %s passed; failed: %v", name, want, failed)
				}
			}
		})
	}
}
