module github.com/azqlib/azq/gocloud

go 1.23.0

replace github.com/azqlib/azq => ../

require (
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.18.0
	github.com/azqlib/azq v0.2.0
	github.com/azqlib/azq/azqtest v0.2.0
	github.com/azqlib/azq/azure v0.2.0
	github.com/benbjohnson/clock v1.3.5
	gocloud.dev v0.40.0
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.11.1 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue v1.0.1 // indirect
	github.com/azqlib/azq/server v0.0.0-00010101000000-000000000000 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/golang/groupcache v0.0.0-20210331224755-41bb18bfe9da // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/googleapis/gax-go/v2 v2.13.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	go.opencensus.io v0.24.0 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/oauth2 v0.30.0 // indirect
	golang.org/x/sync v0.16.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	golang.org/x/xerrors v0.0.0-20240716161551-93cc26a95ae9 // indirect
	google.golang.org/api v0.191.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240812133136-8ffd90a71988 // indirect
	google.golang.org/grpc v1.65.0 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)

replace github.com/azqlib/azq/azure => ../azure

replace github.com/azqlib/azq/server => ../server

replace github.com/azqlib/azq/azqtest => ../azqtest
