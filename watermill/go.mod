module github.com/azqlib/azq/watermill

go 1.23.0

replace github.com/azqlib/azq => ../

require (
	github.com/ThreeDotsLabs/watermill v1.5.1
	github.com/azqlib/azq v0.2.0
	github.com/azqlib/azq/azqtest v0.2.0
	github.com/azqlib/azq/azure v0.2.0
	github.com/benbjohnson/clock v1.3.5
	go.uber.org/goleak v1.3.0
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.18.0 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.11.1 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue v1.0.1 // indirect
	github.com/azqlib/azq/server v0.0.0-00010101000000-000000000000 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/lithammer/shortuuid/v3 v3.0.7 // indirect
	github.com/oklog/ulid v1.3.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/azqlib/azq/azure => ../azure

replace github.com/azqlib/azq/server => ../server

replace github.com/azqlib/azq/azqtest => ../azqtest
