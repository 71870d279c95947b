module github.com/azqlib/azq

go 1.23.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/google/uuid v1.6.0
	github.com/tidwall/btree v1.8.2
	pgregory.net/rapid v1.3.0
)
