package postgres_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/azqlib/azq/server"
	"github.com/jackc/pgx/v5"
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

// A schema of version 1, from before the service properties were kept
// and when a message's key was a UUID, is brought up to date by Open: its
// queues and messages stay, each message with a new ID that Get gives
// and Delete takes, and it has no properties yet.
func TestSchemaUpgradeFromVersion1(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.NewSchema(t)
	v1, err := os.ReadFile("schema/001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(bg, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	q := pgx.Identifier{schema}.Sanitize()
	for _, st := range []string{
		"CREATE SCHEMA " + q,
		strings.ReplaceAll(string(v1), "{{schema}}", q),
		"CREATE TABLE " + q + ".schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
		"INSERT INTO " + q + ".schema_version (version) VALUES (1)",
		"INSERT INTO " + q + ".queues (name) VALUES ('kept')",
		"INSERT INTO " + q + ".messages (id, queue_id, inserted_at, visible_at, expires_at, tag, content) " +
			"SELECT gen_random_uuid(), id, 0, 0, 9223372036854775807, 1, convert_to('from version 1', 'UTF8') FROM " + q + ".queues",
	} {
		if _, err := conn.Exec(bg, st); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, postgres.Options{Schema: schema})
	if got := schemaVersions(t, srv.URL(), schema); len(got) != postgres.SchemaVersion {
		t.Fatalf("schema_version after the upgrade: %v", got)
	}
	if doc, err := s.ServiceProperties(bg); err != nil || doc != nil {
		t.Fatalf("properties after the upgrade: %q, %v", doc, err)
	}
	ms, err := s.Named("kept").Get(bg, 32, time.Minute)
	if err != nil || len(ms) != 1 || ms[0].Content != "from version 1" {
		t.Fatalf("the message of version 1 after the upgrade: %+v, %v", ms, err)
	}
	if err := s.Named("kept").Delete(bg, ms[0].ID, ms[0].PopReceipt); err != nil {
		t.Fatalf("deleting it: %v", err)
	}
	if n, err := s.Named("kept").ApproximateCount(bg); err != nil || n != 0 {
		t.Fatalf("after the delete: %d messages, %v", n, err)
	}
}
