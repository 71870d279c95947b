# azqd, the Azure Queue Storage emulator, as a small static image.
#
#   docker build --build-arg AZQD_REVISION=$(git rev-parse HEAD) -t azqd .
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
# This file is the one recipe: container engines build it, and so does
# cmd/azqd/image, without one, which is the build CI runs and tests
# (.ci/run). That builder reads this file with docker build's parser and
# carries it out: it copies the build context (.dockerignore honoured)
# into a directory standing for the build stage's filesystem, runs each
# instruction of the build stage in order, each RUN under /bin/sh -c with
# its own Go toolchain in place of golang's image, rewriting the stage's
# own absolute paths (WORKDIR /src, the output /out) to that directory
# and refusing any other, with the build stage's ARG from its
# -build-arg; then makes each COPY --from of the final stage
# a layer and its other instructions the configuration. An instruction
# it cannot carry out as an engine would stops it with an error.

# Size, measured by cmd/azqd/image's TestImageSize on the image it builds
# (Go 1.26, linux/amd64): 17.5 MB unpacked, nearly all of it the binary,
# and 7.2 MB compressed, which is what a registry stores and a pull
# downloads. This file's golang:1.23 stage may differ by a few percent.

FROM golang:1.23-alpine AS build
WORKDIR /src
# azqd is built as its own module resolves its dependencies, the versions
# its go.mod gives, as go install github.com/azqlib/azq/cmd/azqd@version
# builds it, and not as go.work unifies them with the other modules'
# (GOWORK=off). Its go.mod requires the releases of the root module, of
# the PostgreSQL back end (postgres/), of metrics/, of server/ and of azure/ (which
# requires azqtest/) and replaces nothing, as go install needs;
# clone.mod, a copy of it that replaces those with this clone's (../..,
# ../../postgres and the others), is the go.mod the build reads
# (-modfile), with clone.sum, a copy of go.sum, beside it; .dockerignore
# leaves any clone.mod of the context out, so that COPY . . keeps this one.
ENV GOWORK=off
# Modules first, from the go.mod and go.sum files alone, so that a source
# change does not download them again.
COPY go.mod go.sum ./
COPY cmd/azqd/go.mod cmd/azqd/go.sum ./cmd/azqd/
COPY postgres/go.mod postgres/go.sum ./postgres/
COPY metrics/go.mod metrics/go.sum ./metrics/
COPY azure/go.mod azure/go.sum ./azure/
COPY azqtest/go.mod azqtest/go.sum ./azqtest/
COPY server/go.mod server/go.sum ./server/
# -x lists each download as it goes, which a first build waits minutes for.
RUN cd cmd/azqd && cp go.mod clone.mod && cp go.sum clone.sum && \
    go mod edit -replace=github.com/azqlib/azq=../.. -replace=github.com/azqlib/azq/postgres=../../postgres \
      -replace=github.com/azqlib/azq/metrics=../../metrics -replace=github.com/azqlib/azq/azure=../../azure \
      -replace=github.com/azqlib/azq/azqtest=../../azqtest -replace=github.com/azqlib/azq/server=../../server clone.mod && \
    go mod download -x -modfile=clone.mod
COPY . .
# The commit azqd is built from, for azqd -version: the build context has
# no .git, so Go records none. cmd/azqd/image gives it (git rev-parse
# HEAD, with -dirty for changes not committed); give it to an engine so:
#
#   docker build --build-arg AZQD_REVISION=$(git rev-parse HEAD) -t azqd .
#
# Without it, azqd -version says "no VCS revision in this build".
ARG AZQD_REVISION
RUN cd cmd/azqd && CGO_ENABLED=0 go build -modfile=clone.mod -trimpath \
    -ldflags="-s -w -X github.com/azqlib/azq/internal/buildinfo.revision=${AZQD_REVISION}" -o /out/usr/local/bin/azqd .
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
HEALTHCHECK --interval=5s --timeout=4s --start-period=5s --retries=3 CMD ["azqd", "-healthcheck", "http://127.0.0.1:10001/_azq/health"]
# Listen on every interface of the container; the connection strings azqd
# prints name 127.0.0.1, which is right for a published port.
CMD ["azqd", "-addr", "0.0.0.0:10001"]
