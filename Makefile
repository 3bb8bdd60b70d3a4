# bridge-runner. `make test` is the whole suite (it starts the real services
# it needs); `make build` gives bin/bridge-runner.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
IMAGE   ?= bridge-runner:$(VERSION)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
export CGO_ENABLED := 0
# Where make build puts the release binary.
BIN     ?= bin/bridge-runner

.PHONY: build test bench e2e unit lint docs image set-image services-up services-down clean

build:
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/bridge-runner

# The whole suite against real services (kube-apiserver + etcd, Slurm).
test:
	bash hack/test.sh

# End to end: Argo runs the shipped templates in real pods of a real
# single-node Kubernetes, against a real Slurm and S3 on this machine (root).
e2e:
	bash hack/e2e.sh

# Benchmarks against the real services: figures, not assertions.
bench:
	bash hack/bench.sh

# Only what needs no service (the rest skips outside CI). Tests build with
# the bridgetest tag (test hooks such as crash points); releases never do.
unit:
	go test -tags bridgetest -count=1 ./...

# Argo 4's validator module builds with the flags that hack/build-cluster.sh builds
# Argo's own binaries with (and pins the same module versions), so the two share
# Go's build cache: a cold CI compiles Argo 4's packages and Kubernetes 0.33 once.
ARGO4_GO = CGO_ENABLED=0 go

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	go vet ./...
	cd workflows/argo4 && $(ARGO4_GO) vet -trimpath ./...
	go vet -tags bridgetest ./runner/...
	go test -count=1 ./internal/funclimits

# docs/reference from the code: the command tree, the record's tables, the
# metrics registries. TestReferenceIsCurrent fails when it is stale.
docs:
	go test -count=1 -run '^TestReferenceIsCurrent$$' ./cmd/bridge-runner -args -update-docs

image:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

# Point the components, templates and examples at another image.
set-image:  ## make set-image IMAGE=registry/name:tag
	@test -n "$(filter command line,$(origin IMAGE))" || { echo 'usage: make set-image IMAGE=NAME:TAG'; exit 2; }
	bash hack/set-image.sh '$(IMAGE)'

services-up:
	bash hack/kube-up.sh
	bash hack/slurm-up.sh
	bash hack/slurm2411-up.sh
	bash hack/slurm2411dbd-up.sh
	bash hack/slurm2605-up.sh
	bash hack/slurm2605-nometrics-up.sh
	bash hack/slurmdbd-up.sh
	bash hack/s3-up.sh
	bash hack/ray-up.sh
	bash hack/ray-auth-up.sh
	. $${BRIDGE_SLURM_DIR:-/tmp/bridge-runner-slurm}/env && BRIDGE_SSHD_SETENV="SLURM_CONF=$$SLURM_CONF" bash hack/sshd-up.sh
	bash hack/htcondor-up.sh
	bash hack/htcondor25-up.sh

services-down:
	-bash hack/htcondor25-down.sh
	-bash hack/htcondor-down.sh
	-bash hack/sshd-down.sh
	-bash hack/ray-auth-down.sh
	-bash hack/ray-down.sh
	-bash hack/s3-down.sh
	-bash hack/slurm2605-nometrics-down.sh
	-bash hack/slurm2605-down.sh
	-bash hack/slurm2411dbd-down.sh
	-bash hack/slurm2411-down.sh
	-bash hack/slurmdbd-down.sh
	-bash hack/slurm-down.sh
	-bash hack/kube-down.sh

clean:
	rm -rf bin dist
