package postgres_test

import (
	"testing"

	"github.com/azqlib/azq/internal/longrun"
	"github.com/azqlib/azq/queuetest"
)

// Package worker's promises on PostgreSQL, through the service contract:
// each message handled, leases renewed, a crashed worker's message back
// after its lease, poison after the last attempt, unfinished work
// released at shutdown, and random failures, panics and crashes losing
// nothing; on a mock clock, the worker waiting in Receive.
func TestWorker(t *testing.T) {
	t.Parallel()
	runs := 5
	if longrun.Enabled() {
		runs = 100
	}
	queuetest.RunWorkerTests(t, func(t *testing.T) queuetest.WorkerFixture {
		s, mock := openMock(t)
		return queuetest.WorkerFixture{Service: s, Clock: mock}
	}, queuetest.WorkerOptions{Runs: runs})
}
