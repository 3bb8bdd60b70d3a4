# Multi-stage: a static binary on distroless, running as non-root, plus one
# static shell. hack/build-image.sh builds the same image without a container
# engine for the e2e suite; keep the two equivalent.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/bridge-runner ./cmd/bridge-runner

# The local backend runs a job's script with /bin/sh, which distroless lacks:
# Debian's statically linked busybox (about 2 MB) serves as /bin/sh. Its shell
# runs its own applets (sleep, cat, ...) without a PATH lookup, so scripts get
# the usual tools and nothing else is added to the image.
FROM debian:bookworm-slim AS shell
RUN apt-get update && apt-get install -y --no-install-recommends busybox-static \
    && rm -rf /var/lib/apt/lists/*

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/bridge-runner /bridge-runner
COPY --from=shell /bin/busybox /bin/sh
USER 65532:65532
ENTRYPOINT ["/bridge-runner"]
