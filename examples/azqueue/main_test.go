package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azqtest"
)

// TestRunAgainstTheServer runs the program against azq's REST server over
// loopback, as it runs against azqd.
func TestRunAgainstTheServer(t *testing.T) {
	srv := azqtest.NewServer(t)
	var out bytes.Buffer
	if err := run(context.Background(), srv.ConnectionString, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "got: hello\ndeleted\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if qs, _ := srv.Service.ListQueues(context.Background(), azq.ListQueuesOptions{}); len(qs.Queues) != 0 {
		t.Errorf("queues left behind: %v", qs.Queues)
	}
}
