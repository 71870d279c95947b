package azq_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/internal/vfs"
	"pgregory.net/rapid"
)

// TestModelDurable runs TestModel's reference model against a queue of a
// durable Service (azq.Open) on a strict in-memory file system, which
// keeps across a simulated power cut only what was synced, with four
// more actions: Reopen closes the Service and opens its directory again;
// Crash cuts the power and opens what survived; Checkpoint writes a
// checkpoint; CrashInCheckpoint cuts the power at a random point inside
// one. Every check of the model holds across them: the same messages,
// times, dequeue counts, order, and receipts that still work (the model
// keeps using the ones it was given before the restart), since every
// operation the model saw return was synced first.
//
// Run it harder with: go test -run TestModelDurable -rapid.checks=1000 .
// (TestModelDurableLong runs ten times the checks.)
func TestModelDurable(t *testing.T) {
	rapid.Check(t, checkDurableModel)
}

// TestModelDurableLong is the long run of TestModelDurable: ten times its
// checks, from ten different seeds (unless -rapid.seed fixes one).
func TestModelDurableLong(t *testing.T) {
	longrun.Skip(t)
	for i := 0; i < 10; i++ {
		t.Run(fmt.Sprint(i), rapid.MakeCheck(checkDurableModel))
	}
}

func checkDurableModel(t *rapid.T) {
	m := &durableModel{queueModel: newQueueModel(t)}
	m.mem = vfs.NewMem()
	m.mem.SetTornWrites(rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "torn"), 0)))
	m.open(t)
	defer func() { m.svc.Close() }()
	t.Repeat(rapid.StateMachineActions(m))
}

const modelDir = "/model"

type durableModel struct {
	*queueModel
	mem *vfs.MemFS
	svc *azq.Service
	// ops counts the file system's mutating operations; the one numbered
	// crashAt (if not 0) cuts the power.
	ops, crashAt atomic.Int64
}

func (m *durableModel) open(t *rapid.T) {
	mem := m.mem
	fs := vfs.Inject(mem, func(op vfs.Op) error {
		if op.Kind.Mutates() {
			if n, at := m.ops.Add(1), m.crashAt.Load(); at > 0 && n >= at {
				mem.Crash()
			}
		}
		return nil
	})
	// Checkpoints come from the actions only, so that a run is the same
	// every time.
	svc, err := azq.Open(modelDir, azq.WithFS(fs), azq.WithClock(m.clk), azq.WithLimits(m.lim), azq.WithCheckpointBytes(1<<40))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	q, _, err := svc.CreateQueue(context.Background(), "model", nil)
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	if got := q.Limits(); got != m.lim {
		t.Fatalf("Limits() = %+v, want %+v", got, m.lim)
	}
	m.svc, m.q = svc, q
}

// Reopen closes the Service and opens its directory again.
func (m *durableModel) Reopen(t *rapid.T) {
	if err := m.svc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	m.open(t)
}

// Crash cuts the power and opens what the file system kept.
func (m *durableModel) Crash(t *rapid.T) {
	m.powerCut(t)
}

func (m *durableModel) powerCut(t *rapid.T) {
	m.mem.Crash()
	m.svc.Close() // fails: the file system is gone
	m.mem = m.mem.CrashImage()
	m.crashAt.Store(0)
	m.open(t)
}

// Checkpoint writes a checkpoint.
func (m *durableModel) Checkpoint(t *rapid.T) {
	if err := m.svc.Checkpoint(context.Background()); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
}

// CrashInCheckpoint cuts the power at the k-th file system operation of
// a checkpoint (after it, if it has fewer).
func (m *durableModel) CrashInCheckpoint(t *rapid.T) {
	k := rapid.Int64Range(1, 40).Draw(t, "k")
	m.crashAt.Store(m.ops.Load() + k)
	m.svc.Checkpoint(context.Background())
	m.powerCut(t)
}
