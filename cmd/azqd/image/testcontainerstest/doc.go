// Package testcontainerstest shows that testcontainers-go's Azurite
// module, as Go teams start Azurite in their tests, starts azqd's image
// unchanged: azurite.Run with the image's name and the Queue service
// alone, then the official Go SDK at the container's QueueServiceURL.
//
// It is a module of its own, outside go.work and never released, so
// that testcontainers-go's dependencies (the Docker client among them)
// are no one else's; run its test with GOWORK=off. The test needs a
// container engine with Docker's API (DOCKER_HOST; .ci/run starts
// podman system service) and the image as the Go builder writes it
// (AZQD_IMAGE_ARCHIVE, a docker-archive), which it loads under the name
// the docs give it, azqd:latest.
package testcontainerstest
