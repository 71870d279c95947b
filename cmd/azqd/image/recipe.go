package main

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// recipe is the repository's Dockerfile, as data: what the image is built
// from and what it says. TestDockerfileAgrees checks each field against
// the Dockerfile, so that the two never part.
type recipe struct {
	// buildEnv is the build stage's ENV, which the build command runs
	// with.
	buildEnv []string
	// build is the RUN that builds azqd into out, verbatim; it runs
	// under /bin/sh from the repository's root, with out (/out/) replaced
	// by a temporary directory.
	build string
	// links is the RUN that makes Azurite's command names, verbatim.
	links string
	// out is the build stage's output directory, as build and links name
	// it.
	out string
	// binDir is where the binaries are, under the image's root.
	binDir string
	// dataDir is the image's empty data directory and dataOwner its
	// owner ("uid:gid").
	dataDir, dataOwner string
	// config is the image's configuration.
	user         string
	env          []string
	exposedPorts []string
	labels       map[string]string
	healthcheck  v1.HealthConfig
	cmd          []string
}

// azqdImage is the Dockerfile at the repository's root.
var azqdImage = recipe{
	buildEnv:     []string{"GOWORK=off"},
	build:        `cd cmd/azqd && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/usr/local/bin/azqd .`,
	links:        `ln -s azqd /out/usr/local/bin/azurite-queue && ln -s azqd /out/usr/local/bin/azurite`,
	out:          "/out/",
	binDir:       "usr/local/bin",
	dataDir:      "data",
	dataOwner:    "65532:65532",
	user:         "0:0",
	env:          []string{"PATH=/usr/local/bin", "AZQD_USER=65532:65532"},
	exposedPorts: []string{"10001"},
	labels: map[string]string{
		"org.opencontainers.image.title":       "azqd",
		"org.opencontainers.image.description": "Azure Queue Storage emulator: the Azure Queue REST API, in memory or durable",
		"org.opencontainers.image.licenses":    "MIT",
	},
	healthcheck: v1.HealthConfig{
		Test:        []string{"CMD", "azqd", "-healthcheck", "http://127.0.0.1:10001/_azq/health"},
		Interval:    5 * time.Second,
		Timeout:     5 * time.Second,
		StartPeriod: 5 * time.Second,
		Retries:     3,
	},
	cmd: []string{"azqd", "-addr", "0.0.0.0:10001"},
}
