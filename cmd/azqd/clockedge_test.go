package main

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/azqlib/azq/server/admin"
)

// TestClockControlRefusesUnrepresentableTimes: the clock endpoints refuse
// to move the clock past the last instant azq represents (Unix nanoseconds
// overflow after 2262-04-11T23:47:16.854775807Z) instead of letting time
// wrap into 1678, and the emulator still serves at that last instant.
func TestClockControlRefusesUnrepresentableTimes(t *testing.T) {
	d := start(t, "-clock-control")
	before := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now
	clockCall(t, "POST", d.base+"/_azq/clock/set?to=2262-04-12T00:00:00Z", 400)
	clockCall(t, "POST", d.base+"/_azq/clock/set?to=9999-12-31T23:59:59Z", 400)
	clockCall(t, "POST", d.base+"/_azq/clock/advance?by=2562047h", 400)
	if got := clockCall(t, "GET", d.base+"/_azq/clock", 200).Now; !got.Equal(before) {
		t.Fatalf("a refused move changed the clock from %v to %v", before, got)
	}

	last := "2262-04-11T23:47:16.854775807Z"
	if got := clockCall(t, "POST", d.base+"/_azq/clock/set?to="+last, 200).Now; !got.Equal(admin.MaxClockTime) {
		t.Fatalf("set to the last instant: now %v, want %v", got, admin.MaxClockTime)
	}
	clockCall(t, "POST", d.base+"/_azq/clock/advance?by=1ns", 400)
	clockCall(t, "POST", d.base+"/_azq/clock/advance?by=0", 200)

	ctx := testContext(t)
	qc := queueClient(t, d.conns["devstoreaccount1"], "edge")
	if _, err := qc.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	put, err := qc.EnqueueMessage(ctx, "last", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ins := *put.Messages[0].InsertionTime; ins.Year() != 2262 {
		t.Fatalf("insertion time %v at the last instant", ins)
	}
	n := int32(32)
	got, err := qc.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: &n})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || *got.Messages[0].DequeueCount != 1 {
		t.Fatalf("Get(32) at the last instant returned %d messages", len(got.Messages))
	}
}
