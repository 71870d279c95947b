module github.com/azqlib/azq/worker/sdktest

go 1.23.0

replace (
	github.com/azqlib/azq => ../..
	github.com/azqlib/azq/azqtest => ../../azqtest
	github.com/azqlib/azq/azure => ../../azure
	github.com/azqlib/azq/metrics => ../../metrics
	github.com/azqlib/azq/server => ../../server
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.18.0
	github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue v1.0.1
	github.com/azqlib/azq v0.2.0
	github.com/azqlib/azq/azqtest v0.2.0
	github.com/azqlib/azq/azure v0.2.0
	github.com/azqlib/azq/metrics v0.2.0
	github.com/benbjohnson/clock v1.3.5
	pgregory.net/rapid v1.3.0
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.11.1 // indirect
	github.com/azqlib/azq/server v0.0.0-00010101000000-000000000000 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.17.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)
