package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/server"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultPostgresSchema is -postgres-schema's default: a schema of each
// account's own, as Azure keeps accounts apart.
const defaultPostgresSchema = "azq_{account}"

// accountPlaceholder stands for the account's name in -postgres-schema.
const accountPlaceholder = "{account}"

// maxIdentifier is the longest name PostgreSQL keeps of an identifier, in
// bytes; a longer one is cut short, silently.
const maxIdentifier = 63

// postgresSchema is the schema of account's queues under the
// -postgres-schema template.
func postgresSchema(template, account string) string {
	return strings.ReplaceAll(template, accountPlaceholder, account)
}

// checkPostgresSchemas checks -postgres-schema against the accounts: each
// account's schema must be a plain lower-case identifier, which needs no
// quoting, that PostgreSQL does not cut short, and accounts must not share
// one, or they would share their queues.
func checkPostgresSchemas(template string, accounts []server.Account) error {
	seen := map[string]string{}
	for _, a := range accounts {
		s := postgresSchema(template, a.Name)
		if err := plainIdentifier(s); err != nil {
			return fmt.Errorf("-postgres-schema %q: the schema of account %s, %q, %v", template, a.Name, s, err)
		}
		if other, ok := seen[s]; ok {
			return &hintError{fmt.Errorf("-postgres-schema %q: accounts %s and %s would share the schema %q, and so their queues", template, other, a.Name, s),
				"put " + accountPlaceholder + " in the schema's name, which stands for the account's: -postgres-schema " + defaultPostgresSchema}
		}
		seen[s] = a.Name
	}
	return nil
}

// plainIdentifier accepts the names PostgreSQL takes unquoted as they are
// written: a lower-case letter or _, then lower-case letters, digits and
// _, at most 63 bytes. (The Service quotes the schema's name in every
// statement; keeping it plain keeps it the same name in psql.)
func plainIdentifier(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	if len(s) > maxIdentifier {
		return fmt.Errorf("is %d bytes long; PostgreSQL keeps %d", len(s), maxIdentifier)
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return errors.New("is not a plain name: want lower-case letters, digits and _, starting with a letter or _")
		}
	}
	if strings.HasPrefix(s, "pg_") {
		return errors.New("starts with pg_, which PostgreSQL keeps for its own schemas")
	}
	return nil
}

// defaultPoolSize is the most connections azqd holds to PostgreSQL for
// each account unless the URL says (pool_max_conns): enough for as many
// requests at once as commits a disk syncs together, few enough for
// several replicas under a server's default max_connections of 100.
const defaultPoolSize = 20

// postgresStartTimeout bounds start-up's connecting and migrating: a
// database that does not answer fails azqd instead of hanging it.
const postgresStartTimeout = 30 * time.Second

// openPostgres opens the -postgres database for every account, each on
// its schema (-postgres-schema) and on a connection pool of its own, which
// the account's Service closes. It makes or upgrades each schema.
//
// A pool per account, rather than one for all, keeps the accounts apart
// as Azure keeps them: requests that wait on a lock in one account's
// schema, as many as that pool holds, leave the other accounts'
// connections free. Each request waits at most its deadline (the
// timeout parameter, at most 30 s) for a connection of its account's
// pool, and each statement at most the statement and lock timeouts that
// the URL may set (statement_timeout, lock_timeout; by default those of
// package postgres).
func openPostgres(ctx context.Context, cfg *config) (map[string]azq.QueueService, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.postgresURL)
	if err != nil {
		// pgx's message quotes nothing of the URL, which may hold a
		// password.
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	if !strings.Contains(cfg.postgresURL, "pool_max_conns") {
		pcfg.MaxConns = defaultPoolSize
	}
	ctx, cancel := context.WithTimeout(ctx, postgresStartTimeout)
	defer cancel()
	services := map[string]azq.QueueService{}
	for _, a := range cfg.accounts {
		schema := postgresSchema(cfg.postgresSchema, a.Name)
		s, err := postgres.OpenConfig(ctx, pcfg.Copy(), &postgres.Options{Schema: schema})
		if err != nil {
			closeAll(services)
			return nil, fmt.Errorf("opening the schema %s of account %s on PostgreSQL at %s: %w", schema, a.Name, postgresWhere(pcfg), err)
		}
		services[a.Name] = s
	}
	return services, nil
}

// postgresWhere names the database of pcfg for messages: user, host, port
// and database, never the password.
func postgresWhere(pcfg *pgxpool.Config) string {
	c := pcfg.ConnConfig
	host := c.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	}
	return fmt.Sprintf("%s@%s:%d/%s", c.User, host, c.Port, c.Database)
}

// postgresMode is the start-up line's description of -postgres.
func postgresMode(cfg *config) string {
	where := "?"
	if pcfg, err := pgxpool.ParseConfig(cfg.postgresURL); err == nil {
		where = postgresWhere(pcfg)
	}
	schemas := make([]string, len(cfg.accounts))
	for i, a := range cfg.accounts {
		schemas[i] = postgresSchema(cfg.postgresSchema, a.Name)
	}
	return fmt.Sprintf("on PostgreSQL at %s (schema %s)", where, strings.Join(schemas, ", "))
}

// pinger is what the health check asks of a back end that keeps its
// queues in a database: a PostgreSQL Service has it.
type pinger interface {
	Ping(ctx context.Context) error
}

// pingers returns the back ends that answer a ping, by account name. A
// failed ping is logged with the database's error (which names its user,
// host or socket) and reported to the health check, which anyone may ask,
// only as the database's unavailability.
func pingers(services map[string]azq.QueueService, logger *slog.Logger) map[string]pinger {
	m := make(map[string]pinger, len(services))
	for name, s := range services {
		if p, ok := s.(pinger); ok {
			m[name] = loggedPinger{p, name, logger}
		}
	}
	return m
}

// loggedPinger is a pinger whose failures say no more than that the
// database is unavailable; the details go to the log.
type loggedPinger struct {
	p       pinger
	account string
	log     *slog.Logger // nil: no log
}

// errDatabaseUnavailable is what the health check says of a database
// that failed its ping.
var errDatabaseUnavailable = errors.New("the database is unavailable")

func (l loggedPinger) Ping(ctx context.Context) error {
	err := l.p.Ping(ctx)
	if err == nil || ctx.Err() != nil {
		return err // the health check says that it did not answer in time
	}
	if l.log != nil {
		l.log.Error("health check: the database failed its check", "account", l.account, "err", err.Error())
	}
	return errDatabaseUnavailable
}

// healthPingTimeout bounds the health check's ping of the database: a
// container's health check gives the whole check 5 seconds.
const healthPingTimeout = 2 * time.Second
