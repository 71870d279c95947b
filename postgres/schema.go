package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema's migrations: schema/NNN_name.sql makes version NNN from
// version NNN-1. A file, once released, never changes; a new version is
// a new file.
//
//go:embed schema/*.sql
var schemaFiles embed.FS

// migration is one version of the schema.
type migration struct {
	version int
	name    string
	sql     string // with {{schema}} for the schema's quoted name
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(schemaFiles, "schema/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, "schema/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("postgres: migration %s is not named NNN_name.sql", n)
		}
		b, err := schemaFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("postgres: migration %s is version %d, want %d", m.name, m.version, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the version of the schema that this package makes and
// uses. Open brings a schema of an older version up to it; a newer one,
// made by a later release, it refuses.
const SchemaVersion = 3

// migrate brings the schema up to SchemaVersion, creating it if need be.
// It holds a session-level advisory lock of the schema for the whole
// time, so that Services opening together on one database apply each
// migration once, one after the other; each migration is applied in a
// transaction of its own with the row that records it, so that a failure
// leaves the schema at the version before.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, keys lockKeys) (err error) {
	ms, err := migrations()
	if err != nil {
		return err
	}
	if len(ms) != SchemaVersion {
		return fmt.Errorf("postgres: %d migrations are embedded, and SchemaVersion is %d", len(ms), SchemaVersion)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// A migration may take longer than a queue operation is allowed, and
	// its lock waits for another process's migration: the statement and
	// lock timeouts are off on this connection while it migrates, bounded
	// by ctx alone, and back to the connection's own afterwards (or the
	// connection is closed, not put back without them).
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0; SET lock_timeout = 0"); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, rerr := conn.Exec(cctx, "RESET statement_timeout; RESET lock_timeout"); rerr != nil {
			conn.Conn().Close(cctx)
		}
	}()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1::int4, $2::int4)", keys.migrate[0], keys.migrate[1]); err != nil {
		return err
	}
	defer func() {
		// A connection that lost its lock with its session is closed by
		// the pool; one that still holds it must give it back.
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, uerr := conn.Exec(cctx, "SELECT pg_advisory_unlock($1::int4, $2::int4)", keys.migrate[0], keys.migrate[1]); uerr != nil && err == nil {
			err = uerr
		}
	}()
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+q+";"+
		"CREATE TABLE IF NOT EXISTS "+q+".schema_version ("+
		"version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return err
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+q+".schema_version").Scan(&current); err != nil {
		return err
	}
	if current > SchemaVersion {
		return fmt.Errorf("postgres: the schema %s is at version %d, newer than this release's %d: upgrade azq", schema, current, SchemaVersion)
	}
	r := strings.NewReplacer("{{schema}}", q)
	for _, m := range ms[current:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, r.Replace(m.sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+q+".schema_version (version) VALUES ($1)", m.version)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.name, err)
		}
	}
	return nil
}

// cleanupTimeout bounds the statements that clean up after an operation
// whatever became of its context: a database that stopped answering must
// not hold the caller for longer.
const cleanupTimeout = 5 * time.Second

// cleanupContext is ctx's values without its end, ending after
// cleanupTimeout.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}
