module github.com/azqlib/azq/postgres

go 1.23.0

replace github.com/azqlib/azq => ../

require (
	github.com/azqlib/azq v0.2.0
	github.com/azqlib/azq/server v0.0.0-00010101000000-000000000000
	github.com/benbjohnson/clock v1.3.5
	github.com/jackc/pgx/v5 v5.7.6
	pgregory.net/rapid v1.3.0
)

require (
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	golang.org/x/crypto v0.41.0 // indirect
	golang.org/x/sync v0.16.0 // indirect
	golang.org/x/text v0.28.0 // indirect
)

replace github.com/azqlib/azq/server => ../server
