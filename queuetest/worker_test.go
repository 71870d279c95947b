package queuetest_test

import (
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/queuetest"
	"github.com/benbjohnson/clock"
)

// The suite on the in-memory and the durable Service.
func TestWorkerOnMemory(t *testing.T) {
	queuetest.RunWorkerTests(t, newMemoryWorkerFixture, queuetest.WorkerOptions{Runs: 50})
}

func TestWorkerOnDurable(t *testing.T) {
	queuetest.RunWorkerTests(t, func(t *testing.T) queuetest.WorkerFixture {
		mock := clock.NewMock()
		svc, err := azq.Open(t.TempDir(), azq.WithClock(mock))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		return queuetest.WorkerFixture{Service: svc, Clock: mock}
	}, queuetest.WorkerOptions{Runs: 10})
}
