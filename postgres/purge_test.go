package postgres_test

import (
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
)

// messageRows counts the rows of the messages table, expired ones too.
func messageRows(t *testing.T, s *postgres.Service) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(bg, "SELECT count(*) FROM "+s.Schema()+".messages").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Expired messages are never seen, and their rows go in bounded batches,
// as later Puts and Gets come: one batch per operation while there is a
// backlog. (The expiring messages are written by hand, thousands at once.)
func TestExpiredRowsGoInBatches(t *testing.T) {
	t.Parallel()
	s, mock := openMock(t)
	q := newQueue(t, s)
	const expiring = 2*postgres.RemoveBatch + 5
	if _, err := s.Pool().Exec(bg, `INSERT INTO `+s.Schema()+`.messages (id_rand, queue_id, inserted_at, visible_at, expires_at, tag, content)
		SELECT 1, (SELECT id FROM `+s.Schema()+`.queues WHERE name = $1), $2, $2, $2 + 60000000000, 1, ''::bytea
		FROM generate_series(1, $3)`, q.Name(), mock.Now().UnixNano(), expiring); err != nil {
		t.Fatal(err)
	}
	keep, err := q.Put(bg, "forever", &azq.PutOptions{TimeToLive: azq.NeverExpires})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.ApproximateCount(bg); err != nil || n != expiring+1 {
		t.Fatalf("count %d, %v", n, err)
	}
	mock.Add(2 * time.Minute)
	if n, err := q.ApproximateCount(bg); err != nil || n != 1 {
		t.Fatalf("count after the expiry %d, %v; want 1", n, err)
	}
	if ms, err := q.Peek(bg, 32); err != nil || len(ms) != 1 || ms[0].ID != keep.ID {
		t.Fatalf("Peek after the expiry: %v, %v", ms, err)
	}
	// The Peek and counts removed nothing; a Get does, a batch.
	if n := messageRows(t, s); n != expiring+1 {
		t.Fatalf("%d rows before any Get or Put, want %d", n, expiring+1)
	}
	// Each operation removes one batch at most: expiring rows less a
	// batch, plus the message put, less another batch, then the rest.
	for _, step := range []struct {
		op   string
		rows int
	}{
		{"Get", expiring + 1 - postgres.RemoveBatch},
		{"Put", expiring + 2 - 2*postgres.RemoveBatch},
		{"Get", 2},
	} {
		var err error
		if step.op == "Get" {
			_, err = q.Get(bg, 1, time.Second)
		} else {
			_, err = q.Put(bg, "m", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := messageRows(t, s); n != step.rows {
			t.Fatalf("%d rows after %s, want %d", n, step.op, step.rows)
		}
	}
}
