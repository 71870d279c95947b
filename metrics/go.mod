module github.com/azqlib/azq/metrics

go 1.23.0

replace github.com/azqlib/azq => ../

require (
	github.com/azqlib/azq v0.2.0
	github.com/azqlib/azq/server v0.0.0-00010101000000-000000000000
	github.com/benbjohnson/clock v1.3.5
	github.com/prometheus/client_golang v1.23.2
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.66.1
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.17.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sys v0.35.0 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)

replace github.com/azqlib/azq/server => ../server
