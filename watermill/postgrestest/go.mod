module github.com/azqlib/azq/watermill/postgrestest

go 1.25

replace (
	github.com/azqlib/azq => ../..
	github.com/azqlib/azq/postgres => ../../postgres
	github.com/azqlib/azq/watermill => ..
)

require (
	github.com/ThreeDotsLabs/watermill v1.5.1
	github.com/azqlib/azq/postgres v0.1.0
	github.com/azqlib/azq/watermill v0.1.0
)

require (
	github.com/azqlib/azq v0.2.0 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.7.6 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/lithammer/shortuuid/v3 v3.0.7 // indirect
	github.com/oklog/ulid v1.3.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	golang.org/x/crypto v0.41.0 // indirect
	golang.org/x/sync v0.16.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/azqlib/azq/azure => ../../azure

replace github.com/azqlib/azq/server => ../../server

replace github.com/azqlib/azq/azqtest => ../../azqtest
