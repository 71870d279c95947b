package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server/admin"
	"github.com/benbjohnson/clock"
)

// TestDataSurvivesRestart opens -data twice: queues, messages and the
// mock clock's time come back, and start-up reports what it recovered.
func TestDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseFlags([]string{"-data", dir, "-clock-control"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	newMock := func() *clock.Mock {
		m := clock.NewMock()
		m.Set(start)
		return m
	}
	mock := newMock()
	var out bytes.Buffer
	services, save, err := openData(cfg, mock, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	svc := services["devstoreaccount1"]
	if svc == nil {
		t.Fatalf("no service for the development account: %v", services)
	}
	ctx := context.Background()
	q, err := svc.Ref("orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, "hello", &azq.PutOptions{TimeToLive: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.NewClock(mock, save).Advance(time.Hour); err != nil {
		t.Fatalf("advance: %v", err)
	}
	closeAll(services)

	mock = newMock()
	out.Reset()
	services, _, err = openData(cfg, mock, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(services)
	if got, want := mock.Now(), start.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("the clock resumed at %v, want %v", got, want)
	}
	if !strings.Contains(out.String(), "recovered 1 queues and 1 messages") {
		t.Fatalf("start-up report %q does not say what was recovered", out.String())
	}
	q, err = services["devstoreaccount1"].Ref("orders")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := q.Peek(ctx, 1)
	if err != nil || len(msgs) != 1 || msgs[0].Content != "hello" {
		t.Fatalf("Peek after the restart: %v, %v", msgs, err)
	}
	// An hour more on the restored clock and the message has expired.
	mock.Add(time.Hour)
	if n, _ := q.ApproximateCount(ctx); n != 0 {
		t.Fatalf("%d messages after their time-to-live, want 0", n)
	}
}
