# azqd, the Azure Queue Storage emulator, as a small static image.
#
#   docker build -t azqd .
#   docker run --rm -p 10001:10001 azqd
#
# The image answers to Azurite's queue command lines too:
#
#   docker run --rm -p 10001:10001 azqd azurite-queue --queueHost 0.0.0.0
#
# and to the Testcontainers Azurite modules' (azurite --blobHost 0.0.0.0
# --queueHost 0.0.0.0 --tableHost 0.0.0.0): azqd then also listens on
# 10000 and 10002, refusing every blob and table request with 501.
#
# cmd/azqd's TestDockerfileBuild runs this file's go build command and the
# binary it makes, so that the build is tested where no container engine
# is at hand.

FROM golang:1.23-alpine AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
# azqd is a module of its own (cmd/azqd) that requires the root module's
# release and has no replace directive, as go install …@version needs; in
# the clone, go.work gives it the clone's root module instead. Here
# GOWORK=off and a copy of its go.mod that replaces the root module with
# the clone's build it from those two modules alone, as before.
ENV GOWORK=off GOFLAGS=-modfile=/tmp/azqd/go.mod
COPY go.mod go.sum ./
COPY cmd/azqd/go.mod cmd/azqd/go.sum ./cmd/azqd/
RUN mkdir /tmp/azqd && cp cmd/azqd/go.mod cmd/azqd/go.sum /tmp/azqd/ && \
    printf '\nreplace github.com/azqlib/azq => /src\n' >> /tmp/azqd/go.mod && \
    cd cmd/azqd && go mod download
COPY . .
RUN cd cmd/azqd && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/usr/local/bin/azqd .
# Azurite's command names, for compose files and test containers written
# for Azurite's image; both start azqd, which serves queues only.
RUN ln -s azqd /out/usr/local/bin/azurite-queue && ln -s azqd /out/usr/local/bin/azurite

FROM scratch
COPY --from=build /out/ /
ENV PATH=/usr/local/bin
# Any user will do: azqd writes nothing to disk unless -data names a
# directory, which then must be a volume that user can write.
USER 65532:65532
EXPOSE 10001
# Listen on every interface of the container; the connection strings azqd
# prints name 127.0.0.1, which is right for a published port.
CMD ["azqd", "-addr", "0.0.0.0:10001"]
