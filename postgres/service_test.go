package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/benbjohnson/clock"
)

var bg = context.Background()

// Creating a queue again: the same metadata (names ignoring case) is no
// error and creates nothing; other metadata is ErrQueueAlreadyExists.
func TestCreateQueue(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	md := map[string]string{"Team": "blue", "cost_centre": "42"}
	q, created, err := s.CreateQueue(bg, "orders", md)
	if err != nil || !created {
		t.Fatalf("CreateQueue: %v, created %v", err, created)
	}
	md["Team"] = "changed after the call"
	_, created, err = s.CreateQueue(bg, "orders", map[string]string{"team": "blue", "COST_CENTRE": "42"})
	if err != nil || created {
		t.Fatalf("CreateQueue with the same metadata: %v, created %v", err, created)
	}
	_, _, err = s.CreateQueue(bg, "orders", map[string]string{"team": "red", "cost_centre": "42"})
	if !errors.Is(err, azq.ErrQueueAlreadyExists) {
		t.Fatalf("CreateQueue with other metadata: %v", err)
	}
	_, _, err = s.CreateQueue(bg, "orders", nil)
	if !errors.Is(err, azq.ErrQueueAlreadyExists) {
		t.Fatalf("CreateQueue without metadata: %v", err)
	}
	p, err := q.Properties(bg)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"Team": "blue", "cost_centre": "42"}; !reflect.DeepEqual(p.Metadata, want) {
		t.Fatalf("metadata %v, want %v", p.Metadata, want)
	}
	// A queue without metadata is created again without metadata.
	if _, _, err := s.CreateQueue(bg, "plain", nil); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.CreateQueue(bg, "plain", map[string]string{}); err != nil || created {
		t.Fatalf("CreateQueue of plain again: %v, %v", err, created)
	}
}

// Metadata values are bytes: any Go string round-trips, as in memory.
func TestMetadata(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	q, _, err := s.CreateQueue(bg, "meta", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Properties(bg)
	if err != nil || p.Metadata != nil || p.ApproximateMessagesCount != 0 {
		t.Fatalf("Properties of a new queue: %+v, %v", p, err)
	}
	md := map[string]string{"a": "", "b": "\x00\xff not UTF-8", "C_3": "ünïcødé"}
	if err := q.SetMetadata(bg, md); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(bg, "m", nil); err != nil {
		t.Fatal(err)
	}
	p, err = q.Properties(bg)
	if err != nil || !reflect.DeepEqual(p.Metadata, md) || p.ApproximateMessagesCount != 1 {
		t.Fatalf("Properties: %+v, %v; want %v and 1", p, err, md)
	}
	if err := q.SetMetadata(bg, nil); err != nil {
		t.Fatal(err)
	}
	if p, err = q.Properties(bg); err != nil || p.Metadata != nil {
		t.Fatalf("Properties after clearing: %+v, %v", p, err)
	}
}

// Access policies round-trip in order, times to the nanosecond, unset
// fields unset, and are replaced and cleared as a whole.
func TestAccessPolicies(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	q, _, err := s.CreateQueue(bg, "acl", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := q.AccessPolicies(bg); err != nil || ps != nil {
		t.Fatalf("AccessPolicies of a new queue: %v, %v", ps, err)
	}
	ps := []azq.AccessPolicy{
		{ID: "zeta", Start: time.Date(2026, 5, 4, 9, 12, 33, 123456789, time.UTC), Expiry: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), Permission: "raup"},
		{ID: "alpha"},
		{ID: strings.Repeat("i", 64), Expiry: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), Permission: "p"},
		{ID: "\x00bytes\xff", Start: time.Unix(-5, 7).UTC()},
	}
	if err := q.SetAccessPolicies(bg, ps); err != nil {
		t.Fatal(err)
	}
	got, err := q.AccessPolicies(bg)
	if err != nil || !reflect.DeepEqual(got, ps) {
		t.Fatalf("AccessPolicies: %+v, %v; want %+v", got, err, ps)
	}
	if err := q.SetAccessPolicies(bg, ps[1:2]); err != nil {
		t.Fatal(err)
	}
	if got, err := q.AccessPolicies(bg); err != nil || !reflect.DeepEqual(got, ps[1:2]) {
		t.Fatalf("AccessPolicies after replacing: %+v, %v", got, err)
	}
	if err := q.SetAccessPolicies(bg, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := q.AccessPolicies(bg); err != nil || got != nil {
		t.Fatalf("AccessPolicies after clearing: %+v, %v", got, err)
	}
	// Many replacing at once leave one of their lists, whole.
	errs := make(chan error)
	for i := 0; i < 8; i++ {
		go func() { errs <- q.SetAccessPolicies(bg, ps[i%4:]) }()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err = q.AccessPolicies(bg)
	if err != nil || len(got) == 0 || !reflect.DeepEqual(got, ps[len(ps)-len(got):]) {
		t.Fatalf("AccessPolicies after concurrent replacements: %+v, %v", got, err)
	}
}

// ListQueues pages through the queues as the in-memory Service does: the
// same pages, markers and metadata, with and without a prefix.
func TestListQueuesAsInMemory(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	mem := azq.NewService()
	names := []string{"a-1", "a-2", "a-3", "abc", "b-1", "b-2", "c00", "zzz"}
	for _, svc := range []azq.QueueService{mem, s} {
		for i, n := range names {
			r, err := svc.Ref(n)
			if err != nil {
				t.Fatal(err)
			}
			var md map[string]string
			if i%2 == 0 {
				md = map[string]string{"n": n}
			}
			if _, err := r.Create(bg, md); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, prefix := range []string{"", "a", "a-", "b", "nothing"} {
		for _, max := range []int{0, 1, 2, 3, 5000} {
			for _, withMD := range []bool{false, true} {
				opts := azq.ListQueuesOptions{Prefix: prefix, MaxResults: max, IncludeMetadata: withMD}
				for page := 0; ; page++ {
					want, err := mem.ListQueues(bg, opts)
					if err != nil {
						t.Fatal(err)
					}
					got, err := s.ListQueues(bg, opts)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%+v, page %d: %+v, in memory %+v", opts, page, got, want)
					}
					if want.NextMarker == "" {
						break
					}
					opts.Marker = want.NextMarker
				}
			}
		}
	}
}

// A deleted queue's messages go with it; its name is free at once, and a
// queue made again under it is new: empty, with none of the old receipts
// working.
func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	q, _, err := s.CreateQueue(bg, "doomed", map[string]string{"a": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.SetAccessPolicies(bg, []azq.AccessPolicy{{ID: "p"}}); err != nil {
		t.Fatal(err)
	}
	// More messages than a batch removes, written at once, and one put.
	if _, err := s.Pool().Exec(bg, `INSERT INTO `+s.Schema()+`.messages (id_rand, queue_id, inserted_at, visible_at, expires_at, tag, content)
		SELECT 1, (SELECT id FROM `+s.Schema()+`.queues WHERE name = 'doomed'), 0, 0, 9223372036854775807, 1, ''::bytea
		FROM generate_series(1, $1)`, 2*postgres.RemoveBatch+3); err != nil {
		t.Fatal(err)
	}
	last, err := q.Put(bg, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := s.CreateQueue(bg, "kept", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put(bg, "kept", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteQueue(bg, "doomed"); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"Put":          func() error { _, err := q.Put(bg, "m", nil); return err }(),
		"Get":          func() error { _, err := q.Get(bg, 1, time.Minute); return err }(),
		"Peek":         func() error { _, err := q.Peek(bg, 1); return err }(),
		"Update":       func() error { _, err := q.Update(bg, last.ID, last.PopReceipt, 0, nil); return err }(),
		"Delete":       q.Delete(bg, last.ID, last.PopReceipt),
		"Clear":        q.Clear(bg),
		"Count":        func() error { _, err := q.ApproximateCount(bg); return err }(),
		"Props":        func() error { _, err := q.Properties(bg); return err }(),
		"Meta":         q.SetMetadata(bg, nil),
		"ACL":          func() error { _, err := q.AccessPolicies(bg); return err }(),
		"SetACL":       q.SetAccessPolicies(bg, nil),
		"Delete queue": s.DeleteQueue(bg, "doomed"),
	} {
		if !errors.Is(err, azq.ErrQueueNotFound) {
			t.Errorf("%s on a deleted queue: %v, want ErrQueueNotFound", what, err)
		}
	}
	var rows, dropped, policies int
	if err := s.Pool().QueryRow(bg, "SELECT (SELECT count(*) FROM "+s.Schema()+".messages), (SELECT count(*) FROM "+
		s.Schema()+".dropped_queues), (SELECT count(*) FROM "+s.Schema()+".access_policies)").Scan(&rows, &dropped, &policies); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || dropped != 0 || policies != 0 {
		t.Fatalf("after the deletion: %d messages, %d dropped queues, %d policies; want 1 (the other queue's), 0, 0", rows, dropped, policies)
	}
	if _, created, err := s.CreateQueue(bg, "doomed", nil); err != nil || !created {
		t.Fatalf("CreateQueue again: %v, %v", err, created)
	}
	if n, err := q.ApproximateCount(bg); err != nil || n != 0 {
		t.Fatalf("the new queue has %d messages, %v", n, err)
	}
	if err := q.Delete(bg, last.ID, last.PopReceipt); !errors.Is(err, azq.ErrMessageNotFound) {
		t.Fatalf("an old receipt in the new queue: %v", err)
	}
}

// OpenQueue, for the worker's poison queues, creates a queue or opens it
// whatever its metadata.
func TestOpenQueue(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	q, _, err := s.CreateQueue(bg, "work", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.OpenQueue(bg, "work-poison")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Put(bg, "poison", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateQueue(bg, "tagged", map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.OpenQueue(bg, "tagged"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.OpenQueue(bg, "Bad_Name"); !errors.Is(err, azq.ErrInvalidQueueName) {
		t.Fatalf("OpenQueue of a bad name: %v", err)
	}
}

// Content is bytes: any Go string round-trips, the empty one and 64 KiB
// included.
func TestContentIsBytes(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	q := newQueue(t, s)
	for _, c := range []string{"", "\x00", "\xff\xfe not UTF-8 \x00", strings.Repeat("\x80", 64<<10-1)} {
		m, err := q.Put(bg, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := q.Get(bg, 1, time.Minute)
		if err != nil || len(got) != 1 || got[0].Content != c {
			t.Fatalf("content %q came back as %v, %v", c[:min(len(c), 16)], got, err)
		}
		c2 := c + "!"
		if _, err := q.Update(bg, m.ID, got[0].PopReceipt, 0, &c2); err != nil {
			t.Fatal(err)
		}
		p, err := q.Peek(bg, 1)
		if err != nil || len(p) != 1 || p[0].Content != c2 {
			t.Fatalf("updated content %q came back as %v, %v", c2[:min(len(c2), 16)], p, err)
		}
		if err := q.Clear(bg); err != nil {
			t.Fatal(err)
		}
	}
}

// Two Services on one schema, each with its own pool, share the queues:
// a message put through one is got through the other, and the receipt
// of either works on both.
func TestServicesShareQueues(t *testing.T) {
	t.Parallel()
	schema := pgtest.Shared(t).NewSchema(t)
	mock := clock.NewMock()
	svcs := [2]*postgres.Service{
		open(t, postgres.Options{Schema: schema, Clock: mock}),
		open(t, postgres.Options{Schema: schema, Clock: mock}),
	}
	a, _, err := svcs[0].CreateQueue(bg, "shared", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := svcs[1].Named("shared")
	m, err := a.Put(bg, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(bg, 1, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("Get through the other Service: %v, %v", got, err)
	}
	u, err := a.Update(bg, m.ID, got[0].PopReceipt, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(bg, m.ID, u.PopReceipt); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ApproximateCount(bg); err != nil || n != 0 {
		t.Fatalf("count %d, %v", n, err)
	}
}

// The times of the far future behave as in memory: a clock past 2262
// stands still, and an expiry past it reads as never.
func TestTimeEdgesAsInMemory(t *testing.T) {
	t.Parallel()
	s, pgClock := openMock(t)
	memClock := clock.NewMock()
	pg := newQueue(t, s)
	mem := azq.New(azq.WithClock(memClock))
	for _, at := range []time.Time{
		time.Date(2262, 4, 11, 23, 47, 16, 0, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854775806, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		pgClock.Set(at)
		memClock.Set(at)
		for _, opts := range []*azq.PutOptions{nil, {TimeToLive: 365 * 24 * time.Hour}, {VisibilityTimeout: time.Hour, TimeToLive: azq.NeverExpires}} {
			a, errA := mem.Put(bg, "m", opts)
			b, errB := pg.Put(bg, "m", opts)
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			if !a.InsertionTime.Equal(b.InsertionTime) || !a.ExpirationTime.Equal(b.ExpirationTime) || !a.NextVisibleTime.Equal(b.NextVisibleTime) {
				t.Fatalf("at %v, %+v: %+v, in memory %+v", at, opts, b, a)
			}
		}
		ga, _ := mem.Get(bg, 32, time.Hour)
		gb, err := pg.Get(bg, 32, time.Hour)
		if err != nil || len(ga) != len(gb) {
			t.Fatalf("at %v: Get %d messages (%v), in memory %d", at, len(gb), err, len(ga))
		}
		for i := range ga {
			if !ga[i].NextVisibleTime.Equal(gb[i].NextVisibleTime) || !ga[i].ExpirationTime.Equal(gb[i].ExpirationTime) {
				t.Fatalf("at %v: Get %+v, in memory %+v", at, gb[i], ga[i])
			}
		}
		mem.Clear(bg)
		pg.Clear(bg)
	}
}

// Closing a Service ends what it runs: its waiting Receive calls return,
// its listener goes, and later calls fail with ErrQueueNotFound, as on a
// closed in-memory Service. Its queues stay in the database.
func TestClose(t *testing.T) {
	srv := pgtest.Shared(t)
	schema := srv.NewSchema(t)
	before := runtime.NumGoroutine()
	s, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := s.CreateQueue(bg, "kept", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := q.Receive(bg, 1, time.Minute)
		done <- err
	}()
	for !s.Registered("kept") {
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Receive on Close: %v", err)
	}
	if _, err := q.Put(bg, "m", nil); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Fatalf("Put after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	// Every goroutine of the Service and its pool ends.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
	s2, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Named("kept").ApproximateCount(bg); err != nil {
		t.Fatalf("the queue after Close: %v", err)
	}
}

// A message's ID is a version 4 UUID that carries its key: an ID changed
// in its random half, its key or its variant names no message, even with
// the message's current receipt, and changes nothing.
func TestIDsCarryTheKey(t *testing.T) {
	t.Parallel()
	s, _ := openMock(t)
	q := newQueue(t, s)
	seen := map[azq.MessageID]bool{}
	for i := 0; i < 3; i++ {
		m, err := q.Put(bg, "m", nil)
		if err != nil {
			t.Fatal(err)
		}
		if version, variant := m.ID[6]>>4, m.ID[8]>>6; version != 4 || variant != 0b10 || seen[m.ID] {
			t.Fatalf("ID %v: version %d, variant %b, seen before %v", m.ID, version, variant, seen[m.ID])
		}
		seen[m.ID] = true
	}
	ms, err := q.Get(bg, 1, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatal(ms, err)
	}
	m := ms[0]
	for _, c := range []struct {
		name string
		bit  int // of the ID, from the first byte's highest
	}{{"random half", 3}, {"version", 49}, {"key", 127}, {"key's high bit", 66}, {"variant", 65}} {
		forged := m.ID
		forged[c.bit/8] ^= 0x80 >> (c.bit % 8)
		if err := q.Delete(bg, forged, m.PopReceipt); !errors.Is(err, azq.ErrMessageNotFound) {
			t.Errorf("Delete with the %s changed: %v, want ErrMessageNotFound", c.name, err)
		}
		if _, err := q.Update(bg, forged, m.PopReceipt, 0, nil); !errors.Is(err, azq.ErrMessageNotFound) {
			t.Errorf("Update with the %s changed: %v, want ErrMessageNotFound", c.name, err)
		}
	}
	if n, err := q.ApproximateCount(bg); err != nil || n != 3 {
		t.Fatalf("after the forged IDs: %d messages, %v", n, err)
	}
	if err := q.Delete(bg, m.ID, m.PopReceipt); err != nil {
		t.Fatalf("Delete with the message's own ID: %v", err)
	}
}
