package workertest_test

import (
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/internal/workertest"
	"github.com/benbjohnson/clock"
)

// The suite on the in-memory and the durable Service.
func TestWorkerOnMemory(t *testing.T) {
	workertest.Run(t, func(t *testing.T) workertest.Fixture {
		mock := clock.NewMock()
		svc := azq.NewService(azq.WithClock(mock))
		t.Cleanup(func() { svc.Close() })
		return workertest.Fixture{Service: svc, Clock: mock}
	}, workertest.Options{Runs: 50})
}

func TestWorkerOnDurable(t *testing.T) {
	workertest.Run(t, func(t *testing.T) workertest.Fixture {
		mock := clock.NewMock()
		svc, err := azq.Open(t.TempDir(), azq.WithClock(mock))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		return workertest.Fixture{Service: svc, Clock: mock}
	}, workertest.Options{Runs: 10})
}
