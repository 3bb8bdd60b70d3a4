# Multi-stage: a static binary on distroless, running as non-root.
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

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/bridge-runner /bridge-runner
USER 65532:65532
ENTRYPOINT ["/bridge-runner"]
