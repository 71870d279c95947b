package postgres_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/azqlib/azq/server"
)

// A Service keeps the account's service properties for azq's REST server.
var _ server.PropertiesKeeper = (*postgres.Service)(nil)

// The properties document is the schema's: none at first, then what an
// update stored, read by every Service on the schema; an update that
// fails changes nothing and returns its error unchanged.
func TestServiceProperties(t *testing.T) {
	t.Parallel()
	a := open(t, postgres.Options{})
	b := open(t, postgres.Options{Schema: a.Schema()})
	if doc, err := a.ServiceProperties(bg); err != nil || doc != nil {
		t.Fatalf("properties of a new schema: %q, %v; want none", doc, err)
	}
	first := []byte("<StorageServiceProperties>first</StorageServiceProperties>")
	if err := a.UpdateServiceProperties(bg, func(stored []byte) ([]byte, error) {
		if stored != nil {
			t.Errorf("update of a new schema given %q", stored)
		}
		return first, nil
	}); err != nil {
		t.Fatal(err)
	}
	if doc, err := b.ServiceProperties(bg); err != nil || !bytes.Equal(doc, first) {
		t.Fatalf("b reads %q, %v; want what a stored", doc, err)
	}
	refused := errors.New("not a document")
	err := b.UpdateServiceProperties(bg, func(stored []byte) ([]byte, error) {
		if !bytes.Equal(stored, first) {
			t.Errorf("update given %q, want %q", stored, first)
		}
		return nil, refused
	})
	if err != refused {
		t.Fatalf("a failed update returned %v, want its own error", err)
	}
	if doc, err := a.ServiceProperties(bg); err != nil || !bytes.Equal(doc, first) {
		t.Fatalf("after a failed update: %q, %v", doc, err)
	}
}

// Updates through two Services at once apply one after the other, each
// to what the one before stored: none is lost.
func TestServicePropertiesUpdatesDoNotRace(t *testing.T) {
	t.Parallel()
	a := open(t, postgres.Options{})
	b := open(t, postgres.Options{Schema: a.Schema()})
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.UpdateServiceProperties(bg, func(stored []byte) ([]byte, error) {
				return append(append([]byte{}, stored...), 'x'), nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if doc, err := a.ServiceProperties(bg); err != nil || len(doc) != n {
		t.Fatalf("after %d updates of one byte each: %q, %v", n, doc, err)
	}
}

// A schema of version 1, from before the service properties were kept,
// is brought up to date by Open: its queues stay, and it has no
// properties yet.
func TestSchemaUpgradeToServiceProperties(t *testing.T) {
	t.Parallel()
	s := open(t, postgres.Options{})
	q := newQueue(t, s)
	if _, err := q.Put(bg, "kept", nil); err != nil {
		t.Fatal(err)
	}
	// Back to version 1.
	if _, err := s.Pool().Exec(bg, "DROP TABLE "+s.Schema()+".service_properties; DELETE FROM "+s.Schema()+".schema_version WHERE version = 2"); err != nil {
		t.Fatal(err)
	}
	up := open(t, postgres.Options{Schema: s.Schema()})
	if got := schemaVersions(t, pgtest.Shared(t).URL(), s.Schema()); len(got) != 2 || got[2] != 1 {
		t.Fatalf("schema_version after the upgrade: %v", got)
	}
	if doc, err := up.ServiceProperties(bg); err != nil || doc != nil {
		t.Fatalf("properties after the upgrade: %q, %v", doc, err)
	}
	if n, err := up.Named(q.Name()).ApproximateCount(bg); err != nil || n != 1 {
		t.Fatalf("the queue after the upgrade: %d messages, %v", n, err)
	}
}
