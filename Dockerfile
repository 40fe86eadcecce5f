# agent-bridge serve in a container: the bridge (HTTP API, streams, web UI)
# with its SQLite database in the /data volume. docs/operations.md
# ("Container image") says when this fits (the bridge on a server) and when
# it does not (the coordinator runs where the agents' CLIs are), and how the
# container gets its token.
#
#   docker build -t agent-bridge .
#   docker run -d -p 127.0.0.1:5111:5111 -v agent-bridge-data:/data \
#     -e BRIDGE_TOKEN="$(cat ~/.config/agent-bridge/token)" agent-bridge

ARG GO_VERSION=1.26.8

# The build stage compiles the same static binary as the release archives
# (cgo for SQLite, glibc linked in), so the final stage needs no libc.
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=container
RUN CGO_ENABLED=1 go build -trimpath \
      -tags 'netgo osusergo sqlite_omit_load_extension sqlite_fts5' \
      -ldflags "-s -w -X main.version=${VERSION} -extldflags -static" \
      -o /out/agent-bridge ./cmd/agent-bridge \
 && mkdir -p /out/data

# distroless/static: about 2 MB, no shell or package manager, with
# /etc/passwd (the nonroot user, 65532), /tmp and CA certificates.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agent-bridge /usr/local/bin/agent-bridge
COPY --from=build --chown=65532:65532 /out/data /data
# Inside a container the bridge must listen on all interfaces (Docker
# forwards a published port to the container's own address, not its
# loopback), and the bridge refuses that without a token: give it
# BRIDGE_TOKEN, or --token-file with a mounted secret.
ENV BRIDGE_ADDR=0.0.0.0:5111 \
    BRIDGE_DB=/data/bridge.db
VOLUME ["/data"]
EXPOSE 5111
USER 65532:65532
WORKDIR /data
ENTRYPOINT ["/usr/local/bin/agent-bridge"]
CMD ["serve"]
