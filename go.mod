module github.com/azqlib/azq

go 1.23

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
