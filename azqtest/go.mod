module github.com/azqlib/azq/azqtest

go 1.23.0

replace github.com/azqlib/azq => ../

require (
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.18.0
	github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue v1.0.1
	github.com/azqlib/azq v0.2.0
	github.com/azqlib/azq/azure v0.0.0-00010101000000-000000000000
	github.com/azqlib/azq/server v0.0.0-00010101000000-000000000000
	github.com/benbjohnson/clock v1.3.5
	github.com/google/uuid v1.6.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.11.1 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/text v0.28.0 // indirect
)

replace github.com/azqlib/azq/azure => ../azure

replace github.com/azqlib/azq/server => ../server
