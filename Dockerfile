# azqd, the Azure Queue Storage emulator, as a small static image.
#
#   docker build -t azqd .
#   docker run --rm -p 10001:10001 azqd
#
# The image answers to Azurite's queue command lines too, with a volume:
#
#   docker run --rm -p 10001:10001 -v queues:/data azqd azurite-queue --queueHost 0.0.0.0 --location /data
#
# and to the Testcontainers Azurite modules' (azurite --blobHost 0.0.0.0
# --queueHost 0.0.0.0 --tableHost 0.0.0.0): azqd then also listens on
# 10000 and 10002, refusing every blob and table request with 501.
#
# Its user: azqd starts as root, as Azurite's image does, and with
# AZQD_USER set it runs as 65532:65532 before it serves. A data directory
# (--location or -data) that user may not write, such as a volume of
# Azurite's or a root-owned bind mount, is given to it first; a new named
# volume starts as a copy of the image's /data, which is that user's
# already. Azurite's files in a volume are left as they are.
#
# This file is the recipe for people and container engines; cmd/azqd/image
# builds the same image in Go, without a container engine, and is the one
# CI builds and runs (.ci/run). Its test TestDockerfileAgrees checks that
# the two say the same; cmd/azqd's TestDockerfileBuildSteps runs this
# file's go build and ln steps as written.
#
# Size, measured by cmd/azqd/image's TestImageSize on the image it builds
# (Go 1.26, linux/amd64): 10.7 MB unpacked, nearly all of it the binary,
# and 4.9 MB compressed, which is what a registry stores and a pull
# downloads. This file's golang:1.23 stage may differ by a few percent.

FROM golang:1.23-alpine AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
# azqd is a module of its own (cmd/azqd) that requires the releases of
# the root module and of the PostgreSQL back end (postgres/) and has no
# replace directive, as go install …@version needs; in the clone, go.work
# gives it the clone's modules instead. Here GOWORK=off and a copy of its
# go.mod that replaces those two with the clone's build it from the three
# modules alone.
ENV GOWORK=off GOFLAGS=-modfile=/tmp/azqd/go.mod
COPY go.mod go.sum ./
COPY cmd/azqd/go.mod cmd/azqd/go.sum ./cmd/azqd/
COPY postgres/go.mod postgres/go.sum ./postgres/
RUN mkdir /tmp/azqd && cp cmd/azqd/go.mod cmd/azqd/go.sum /tmp/azqd/ && \
    printf '\nreplace github.com/azqlib/azq => /src\nreplace github.com/azqlib/azq/postgres => /src/postgres\n' >> /tmp/azqd/go.mod && \
    cd cmd/azqd && go mod download
COPY . .
RUN cd cmd/azqd && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/usr/local/bin/azqd .
# Azurite's command names, for compose files and test containers written
# for Azurite's image; both start azqd, which serves queues only.
RUN ln -s azqd /out/usr/local/bin/azurite-queue && ln -s azqd /out/usr/local/bin/azurite
RUN mkdir /out/data

FROM scratch
COPY --from=build /out/usr/ /usr/
# /data, Azurite's usual --location, empty and the user's: a named volume
# mounted there starts as a copy of it.
COPY --from=build --chown=65532:65532 /out/data /data
ENV PATH=/usr/local/bin
ENV AZQD_USER=65532:65532
USER 0:0
EXPOSE 10001
LABEL org.opencontainers.image.title="azqd"
LABEL org.opencontainers.image.description="Azure Queue Storage emulator: the Azure Queue REST API, in memory or durable"
LABEL org.opencontainers.image.licenses="MIT"
# No curl in a scratch image: azqd asks its own health endpoint, and
# exits 0 when healthy, 1 when not. It assumes the default queue port.
HEALTHCHECK --interval=5s --timeout=5s --start-period=5s --retries=3 CMD ["azqd", "-healthcheck", "http://127.0.0.1:10001/_azq/health"]
# Listen on every interface of the container; the connection strings azqd
# prints name 127.0.0.1, which is right for a published port.
CMD ["azqd", "-addr", "0.0.0.0:10001"]
