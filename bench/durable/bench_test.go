package durable

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"go.etcd.io/bbolt"
	"maragu.dev/goqite"
	_ "modernc.org/sqlite"
)

var payload16 = "0123456789abcdef"

// run runs b.N calls of op spread over callers goroutines and reports
// operations per second under the given unit.
func run(b *testing.B, callers int, unit string, op func() error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	b.ResetTimer()
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

var callerCounts = []int{1, 8}

// BenchmarkCycle is one Put→Get→Delete cycle of a 16-byte message with
// every operation durable before it returns, from 1 and from 8
// goroutines at once; ns/op is per cycle, all goroutines together.
func BenchmarkCycle(b *testing.B) {
	ctx := context.Background()
	for _, callers := range callerCounts {
		b.Run(fmt.Sprintf("azq/callers=%d", callers), func(b *testing.B) {
			s, err := azq.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			q, _, err := s.CreateQueue(ctx, "bench", nil)
			if err != nil {
				b.Fatal(err)
			}
			run(b, callers, "cycles/s", func() error {
				if _, err := q.Put(ctx, payload16, nil); err != nil {
					return err
				}
				// Another caller may have taken the message just put
				// and not yet put its own: take the next one.
				for {
					ms, err := q.Get(ctx, 1, azq.DefaultVisibilityTimeout)
					if err != nil {
						return err
					}
					if len(ms) == 1 {
						return q.Delete(ctx, ms[0].ID, ms[0].PopReceipt)
					}
				}
			})
		})
		b.Run(fmt.Sprintf("goqite/callers=%d", callers), func(b *testing.B) {
			q := openGoqite(b)
			run(b, callers, "cycles/s", func() error {
				if err := q.Send(ctx, goqite.Message{Body: []byte(payload16)}); err != nil {
					return err
				}
				for {
					m, err := q.Receive(ctx)
					if err != nil {
						return err
					}
					if m == nil {
						// Another caller took the message sent; take
						// the next one.
						continue
					}
					return q.Delete(ctx, m.ID)
				}
			})
		})
	}
}

// openGoqite opens a goqite queue as its README sets it up (WAL journal,
// a 5 s busy timeout, foreign keys, one connection), on the pure-Go
// driver, with SQLite's default synchronous=FULL stated explicitly: in WAL
// mode that syncs the log at every commit, so every operation is durable
// as azq's are.
func openGoqite(b *testing.B) *goqite.Queue {
	path := filepath.Join(b.TempDir(), "goqite.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	b.Cleanup(func() { db.Close() })
	if _, err := db.Exec(goqiteSchema); err != nil {
		b.Fatal(err)
	}
	return goqite.New(goqite.NewOpts{DB: db, Name: "bench", Timeout: 30 * time.Second})
}

// goqiteSchema is goqite's schema_sqlite.sql.
const goqiteSchema = `
create table goqite (
  id text primary key default ('m_' || lower(hex(randomblob(16)))),
  created text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  updated text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  queue text not null,
  body blob not null,
  timeout text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  received integer not null default 0,
  priority integer not null default 0
) strict;

create trigger goqite_updated_timestamp after update on goqite begin
  update goqite set updated = strftime('%Y-%m-%dT%H:%M:%fZ') where id = old.id;
end;

create index goqite_queue_priority_created_idx on goqite (queue, priority desc, created);
`

// BenchmarkAppend is the choice of log: one durable append of a 16-byte
// message, as azq's Put (its own log, group commit) and as a bbolt put
// (Update from one caller, Batch, bbolt's group commit, from 8).
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	for _, callers := range callerCounts {
		b.Run(fmt.Sprintf("azq/callers=%d", callers), func(b *testing.B) {
			s, err := azq.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			q, _, _ := s.CreateQueue(ctx, "bench", nil)
			run(b, callers, "appends/s", func() error {
				_, err := q.Put(ctx, payload16, nil)
				return err
			})
		})
		b.Run(fmt.Sprintf("bbolt/callers=%d", callers), func(b *testing.B) {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "bolt.db"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			bucket := []byte("q")
			var seq atomic.Uint64
			put := func(tx *bbolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists(bucket)
				if err != nil {
					return err
				}
				var k [8]byte
				binary.BigEndian.PutUint64(k[:], seq.Add(1))
				return bk.Put(k[:], []byte(payload16))
			}
			commit := db.Update
			if callers > 1 {
				commit = db.Batch
			}
			run(b, callers, "appends/s", func() error { return commit(put) })
		})
	}
}
