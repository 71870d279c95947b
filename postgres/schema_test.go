package postgres_test

import (
	"strings"
	"testing"

	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// schemaVersions returns the rows of the schema's version table.
func schemaVersions(t *testing.T, url, schema string) map[int]int {
	t.Helper()
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	rows, err := conn.Query(bg, "SELECT version, count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".schema_version GROUP BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int]int{}
	for rows.Next() {
		var v, n int
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		got[v] = n
	}
	return got
}

// Services that open together on a fresh schema all succeed, and the
// schema is made once.
func TestOpenRacesOnAFreshSchema(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.NewSchema(t)
	const n = 6
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			s, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema})
			if err == nil {
				_, _, err = s.CreateQueue(bg, "raced", nil)
				s.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := schemaVersions(t, srv.URL(), schema); len(got) != postgres.SchemaVersion || got[1] != 1 {
		t.Fatalf("schema_version: %v, want each version once", got)
	}
	// Opening again changes nothing.
	s, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := schemaVersions(t, srv.URL(), schema); len(got) != postgres.SchemaVersion {
		t.Fatalf("schema_version after opening again: %v", got)
	}
}

// A schema that a later release migrated is refused, and left alone.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.NewSchema(t)
	s, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(bg, "INSERT INTO "+schema+".schema_version (version) VALUES ($1)", postgres.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "newer than this release") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
	if got := schemaVersions(t, srv.URL(), schema); got[postgres.SchemaVersion+1] != 1 {
		t.Fatalf("schema_version: %v", got)
	}
}

// A migration that fails leaves nothing of itself: the schema stays at
// the version before, and a later Open, once the cause is gone, applies
// it.
func TestFailedMigrationLeavesNothing(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	schema := srv.NewSchema(t)
	conn, err := pgx.Connect(bg, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	// A table of the name version 1 creates is in the way.
	if _, err := conn.Exec(bg, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".messages (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "001_init.sql") {
		t.Fatalf("Open over a table in the way: %v", err)
	}
	if got := schemaVersions(t, srv.URL(), schema); len(got) != 0 {
		t.Fatalf("schema_version after a failed migration: %v", got)
	}
	var queues bool
	if err := conn.QueryRow(bg, "SELECT to_regclass($1) IS NOT NULL", schema+".queues").Scan(&queues); err != nil || queues {
		t.Fatalf("the failed migration left its queues table (%v)", err)
	}
	if _, err := conn.Exec(bg, "DROP TABLE "+schema+".messages"); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(bg, srv.URL(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
