package azq_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"pgregory.net/rapid"
)

// TestModelDurable runs TestModel's reference model against a queue of a
// durable Service (azq.Open), with one more action: Reopen closes the
// Service (which checkpoints) and opens the directory again. Every check
// of the model holds across it: the same messages, times, dequeue counts,
// order, and receipts that still work (the model keeps using the ones it
// was given before the restart).
//
// The Service syncs on an interval here, which changes when data reaches
// the disk, not what a reopened Service holds after Close; the crash
// harness (TestCrashRecovery) covers syncing on every operation and
// kills.
//
// Run it harder with: go test -run TestModelDurable -rapid.checks=1000 .
func TestModelDurable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "azq-model-")
		if err != nil {
			t.Fatal(err)
		}
		m := &durableModel{queueModel: newQueueModel(t), dir: dir}
		m.open(t)
		defer func() { m.svc.Close(); os.RemoveAll(m.dir) }()
		t.Repeat(rapid.StateMachineActions(m))
	})
}

type durableModel struct {
	*queueModel
	dir string
	svc *azq.Service
}

func (m *durableModel) open(t *rapid.T) {
	svc, err := azq.Open(m.dir, azq.WithClock(m.clk), azq.WithLimits(m.lim), azq.WithSync(azq.SyncInterval(time.Hour)))
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

// Crash opens a copy of the directory taken while the Service runs, which
// is what a killed process leaves: no checkpoint, so the reopened
// Service replays the log.
func (m *durableModel) Crash(t *rapid.T) {
	dir, err := os.MkdirTemp("", "azq-model-")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.svc.Close()
	os.RemoveAll(m.dir)
	m.dir = dir
	m.open(t)
}
