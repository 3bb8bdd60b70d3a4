#!/usr/bin/env bash
# Builds kube-apiserver (and kubectl) of one Kubernetes version from the Go module
# proxy and caches the binaries under $BRIDGE_CACHE/kube/<version>/. Idempotent: a
# cached build is reused. Why from source: no release downloads are reachable here,
# only the module proxy.
set -euo pipefail
KUBE_VERSION=${KUBE_VERSION:-v1.32.4}
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
out="$CACHE/kube/$KUBE_VERSION"
want=(kube-apiserver)
[ "${KUBE_WITH_KUBECTL:-0}" = 1 ] && want+=(kubectl)
missing=()
for b in "${want[@]}"; do [ -x "$out/$b" ] || missing+=("$b"); done
[ ${#missing[@]} -eq 0 ] && { echo "$out"; exit 0; }

# One build per version at a time (hack/build-cluster.sh takes the same lock): a
# second caller waits, then builds only what is still missing.
mkdir -p "$out"
exec 8>"$out.lock"
flock -w 2400 8 || { echo "could not lock $out.lock (another build still running?)" >&2; exit 1; }
missing=()
for b in "${want[@]}"; do [ -x "$out/$b" ] || missing+=("$b"); done
[ ${#missing[@]} -eq 0 ] && { echo "$out"; exit 0; }

staging="${KUBE_VERSION/v1./v0.}"   # staging modules are tagged v0.MINOR.PATCH
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > go.mod <<MOD
module kubebuild

go 1.23

require k8s.io/kubernetes $KUBE_VERSION
MOD
# k8s.io/kubernetes replaces its staging modules with ./staging paths; mirror every
# one of them with the published version so the build resolves from the proxy.
export GOFLAGS=-mod=mod GONOSUMDB=k8s.io,sigs.k8s.io GONOSUMCHECK=1 GOSUMDB=off
go mod download k8s.io/kubernetes@"$KUBE_VERSION" >&2
modfile=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBE_VERSION.mod
for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$modfile" | awk '{print $1}'); do
  echo "replace $m => $m $staging" >> go.mod
done
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
GO
go mod tidy >&2 2>/dev/null || true
mkdir -p "$out"
for b in "${missing[@]}"; do
  case $b in
    kube-apiserver) pkg=k8s.io/kubernetes/cmd/kube-apiserver ;;
    kubectl) pkg=k8s.io/kubectl/cmd/kubectl 2>/dev/null || pkg=k8s.io/kubernetes/cmd/kubectl ;;
  esac
  echo "building $b $KUBE_VERSION (several minutes on a cold cache)..." >&2
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/$b.tmp" "$pkg" >&2
  mv "$out/$b.tmp" "$out/$b"
done
echo "$out"
