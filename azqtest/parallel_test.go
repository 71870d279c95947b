package azqtest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/azqtest"
	"github.com/azqlib/azq/internal/longrun"
)

// Parallel subtests, each with a server of its own (account, mock clock,
// queues) reached in process through the official SDK: nothing is shared
// and no port is opened, so they run together, and each sees only its
// own messages on its own time. A hundred by default; a thousand in a
// long run (AZQ_LONG=1), which takes about 4 s of CPU under -race on two
// cores, 16 s of wall time on a machine loaded by other work.
func TestParallelServers(t *testing.T) {
	n := 100
	if longrun.Enabled() {
		n = 1000
	}
	for i := 0; i < n; i++ {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := azqtest.NewInProcessServer(t)
			client, err := srv.NewServiceClient(nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.CreateQueue(ctx, "jobs", nil); err != nil {
				t.Fatal(err)
			}
			jobs := client.NewQueueClient("jobs")
			// Due after i seconds of this server's clock, which no other
			// subtest moves.
			delay := int32(i%60 + 1)
			mine := "job " + strconv.Itoa(i)
			if _, err := jobs.EnqueueMessage(ctx, mine, &azqueue.EnqueueMessageOptions{VisibilityTimeout: &delay}); err != nil {
				t.Fatal(err)
			}
			if got, err := jobs.DequeueMessage(ctx, nil); err != nil || len(got.Messages) != 0 {
				t.Fatalf("before it is due: %d messages, %v", len(got.Messages), err)
			}
			srv.Clock.Add(time.Duration(delay) * time.Second)
			got, err := jobs.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: ptr(int32(32))})
			if err != nil || len(got.Messages) != 1 || *got.Messages[0].MessageText != mine {
				t.Fatalf("when it is due: %d messages, %v", len(got.Messages), err)
			}
		})
	}
}
