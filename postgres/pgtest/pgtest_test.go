package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A schema of a test is its own, and goes when the test ends.
func TestNewSchema(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = srv.NewSchema(t)
		conn, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name+"; CREATE TABLE "+name+".t (a int)"); err != nil {
			t.Fatal(err)
		}
	})
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s is still there after its test", name)
	}
}

// A server of a test's own keeps its data across a restart, and its
// clients see their connections end when it stops.
func TestStopAndRestart(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("starts a server of its own")
	}
	srv := pgtest.Start(t, pgtest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (a int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a query on a stopped server succeeded")
	}
	conn.Close(ctx)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var a int
	if err := conn.QueryRow(ctx, "SELECT a FROM kept").Scan(&a); err != nil || a != 42 {
		t.Fatalf("after the restart: %d, %v", a, err)
	}
}
