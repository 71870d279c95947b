module github.com/azqlib/azq/server

go 1.23.0

replace github.com/azqlib/azq => ../

require (
	github.com/azqlib/azq v0.2.0
	github.com/benbjohnson/clock v1.3.5
	github.com/golang-jwt/jwt/v5 v5.3.1
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
)
