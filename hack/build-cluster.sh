#!/usr/bin/env bash
# Builds (once, cached) everything the single-node e2e cluster needs, from
# Debian's packages and the Go module proxy only:
#
#   Debian:    containerd, runc, containernetworking-plugins, iptables, conntrack
#   Go proxy:  kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
#              kubelet, kubectl (KUBE_VERSION, default v1.32.4)
#              -> $BRIDGE_CACHE/kube/<version>/  (the same directory hack/build-kube.sh
#                 uses, so its kube-apiserver is shared)
#              Argo workflow-controller and argoexec (ARGO_VERSION, default ARGO_DEFAULT_VERSION of lib.sh;
#              v4.x builds from the module's /v4 path)
#              -> $BRIDGE_CACHE/argo/<version>/
#   e2e/:      the pause binary and the image builder (e2e/cmd/pause, e2e/cmd/mkimage),
#              and the image tarballs pause.tar and argoexec.tar
#              -> $BRIDGE_CACHE/images/
#
# Prints the cache directory on stdout (last line). Idempotent: what is cached is
# reused; a partial build is never taken for a finished one (binaries are renamed
# into place when complete). Timings of every step go to stderr.
#
# Environment: BRIDGE_CACHE (default ~/.cache/bridge-runner), KUBE_VERSION, ARGO_VERSION,
#              BRIDGE_SKIP_APT=1 (do not install Debian packages).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HACK")
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

KUBE_VERSION=${KUBE_VERSION:-v1.32.4}
ARGO_VERSION=${ARGO_VERSION:-$ARGO_DEFAULT_VERSION}
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
KUBE_OUT=$CACHE/kube/$KUBE_VERSION
ARGO_OUT=$CACHE/argo/$ARGO_VERSION
IMG_OUT=$CACHE/images
# Argo's module path carries its major version (github.com/argoproj/argo-workflows/v3, /v4).
ARGO_MOD=github.com/argoproj/argo-workflows/${ARGO_VERSION%%.*}
t0=$(now_ms)
mkdir -p "$CACHE" "$KUBE_OUT" "$ARGO_OUT" "$IMG_OUT"
# Each part has a lock of its own (Debian packages, Kubernetes and Argo per version,
# the image tools), so that two runs starting together build each part once, and a
# run waits only for the parts it needs: building Argo v4 does not wait behind a
# build of v3.7, nor behind one of Kubernetes for another version.
locked() { # FD FILE: after exec FD>FILE
  flock -w "$BUILD_LOCK_WAIT" "$1" || die "could not lock $2 within ${BUILD_LOCK_WAIT}s"
}

# sum.golang.org is not reachable here, only the module proxy.
export GOFLAGS=-mod=mod GONOSUMDB=k8s.io,sigs.k8s.io GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=0

# ------------------------------------------------------------------ Debian packages
if [ "${BRIDGE_SKIP_APT:-0}" != 1 ]; then
  exec 8>"$CACHE/build-cluster-apt.lock" && locked 8 "$CACHE/build-cluster-apt.lock"
  PKGS=(containerd runc containernetworking-plugins iptables conntrack nftables curl)
  missing=()
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    ta=$(now_ms)
    log "installing Debian packages: ${missing[*]}"
    # Keep the maintainer scripts from starting a system containerd with /etc's config.
    policy_added=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
      chmod 755 /usr/sbin/policy-rc.d
      policy_added=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    [ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
    log "packages installed in $(elapsed_s "$ta")s"
  fi
  exec 8>&-
fi

# ------------------------------------------------------------------ Kubernetes
kube_bins=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)
# The same per-version lock as hack/build-kube.sh, which builds kube-apiserver alone.
exec 7>"$KUBE_OUT.lock" && locked 7 "$KUBE_OUT.lock"
kube_missing=()
for b in "${kube_bins[@]}"; do [ -x "$KUBE_OUT/$b" ] || kube_missing+=("$b"); done
if [ ${#kube_missing[@]} -gt 0 ]; then
  tk=$(now_ms)
  log "building ${kube_missing[*]} $KUBE_VERSION from the Go module proxy (minutes on a cold cache)"
  work=$(mktemp -d "${TMPDIR:-/tmp}/kube-build.XXXXXX")
  staging="${KUBE_VERSION/v1./v0.}" # staging modules are tagged v0.MINOR.PATCH
  (
    cd "$work"
    printf 'module kubebuild\n\ngo 1.23\n\nrequire k8s.io/kubernetes %s\n' "$KUBE_VERSION" >go.mod
    go mod download k8s.io/kubernetes@"$KUBE_VERSION" >&2
    modfile=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBE_VERSION.mod
    # k8s.io/kubernetes replaces its staging modules with ./staging paths; mirror
    # each with its published version so that the build resolves from the proxy.
    for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$modfile" | awk '{print $1}'); do
      echo "replace $m => $m $staging" >>go.mod
    done
    pkgs=()
    for b in "${kube_missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for p in "${pkgs[@]}"; do printf '\t_ "%s"\n' "$p"; done
      printf ')\n'
    } >tools.go
    go mod tidy >&2 2>/dev/null || true
    mkdir -p out
    go build -trimpath -ldflags='-s -w' -o out/ "${pkgs[@]}" >&2
    for b in "${kube_missing[@]}"; do mv "out/$b" "$KUBE_OUT/$b.tmp" && mv "$KUBE_OUT/$b.tmp" "$KUBE_OUT/$b"; done
  ) || { rm -rf "$work"; die "building Kubernetes $KUBE_VERSION failed"; }
  rm -rf "$work"
  log "built ${kube_missing[*]} in $(elapsed_s "$tk")s"
fi
exec 7>&-

# ------------------------------------------------------------------ Argo
# Held to the end: the argoexec image of this version is made below.
exec 6>"$ARGO_OUT.lock" && locked 6 "$ARGO_OUT.lock"
if [ ! -x "$ARGO_OUT/workflow-controller" ] || [ ! -x "$ARGO_OUT/argoexec" ]; then
  tg=$(now_ms)
  log "building Argo workflow-controller and argoexec $ARGO_VERSION from the Go module proxy"
  work=$(mktemp -d "${TMPDIR:-/tmp}/argo-build.XXXXXX")
  (
    cd "$work"
    mod=$ARGO_MOD
    dir=$(GOFLAGS='' go mod download -json "$mod@$ARGO_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
    [ -d "$dir" ] || { echo "module $mod@$ARGO_VERSION has no directory" >&2; exit 1; }
    # A writable copy of the module, built as the main module (its own go.mod,
    # go.sum and replace directives apply). The module zip lacks
    # workflow/executor/osspecific/signal_linux.go (a symlink to signal_darwin.go
    # in git): restore it, or argoexec does not compile (undefined: Setpgid).
    cp -r "$dir" src && chmod -R u+w src
    cd src
    [ -e workflow/executor/osspecific/signal_linux.go ] ||
      cp workflow/executor/osspecific/signal_darwin.go workflow/executor/osspecific/signal_linux.go
    # The controller's health server listens on ":6060" (every address) and
    # cannot be configured: bind it to loopback only, as every server here is.
    sed -i 's#http.ListenAndServe(":6060", nil)#http.ListenAndServe("127.0.0.1:6060", nil)#' cmd/workflow-controller/main.go
    grep -q '"127.0.0.1:6060"' cmd/workflow-controller/main.go || { echo "could not patch the :6060 listener" >&2; exit 1; }
    ldflags="-s -w -X $mod.version=$ARGO_VERSION"
    go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$ARGO_OUT/workflow-controller.tmp" ./cmd/workflow-controller >&2
    go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$ARGO_OUT/argoexec.tmp" ./cmd/argoexec >&2
    mv "$ARGO_OUT/workflow-controller.tmp" "$ARGO_OUT/workflow-controller"
    mv "$ARGO_OUT/argoexec.tmp" "$ARGO_OUT/argoexec"
  ) || { rm -rf "$work"; die "building Argo $ARGO_VERSION failed"; }
  rm -rf "$work"
  log "built Argo in $(elapsed_s "$tg")s"
fi

# The CRDs the controller needs, from the same module version.
if [ ! -s "$ARGO_OUT/crds/argoproj.io_workflows.yaml" ]; then
  dir=$(cd "${TMPDIR:-/tmp}" && GOFLAGS='' go mod download -json "$ARGO_MOD@$ARGO_VERSION" |
    sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir/manifests/base/crds/minimal" ] || die "no CRDs in the Argo module ($dir)"
  rm -rf "$ARGO_OUT/crds.tmp" && mkdir -p "$ARGO_OUT/crds.tmp"
  cp "$dir"/manifests/base/crds/minimal/argoproj.io_*.yaml "$ARGO_OUT/crds.tmp/"
  chmod -R u+w "$ARGO_OUT/crds.tmp" && rm -rf "$ARGO_OUT/crds" && mv "$ARGO_OUT/crds.tmp" "$ARGO_OUT/crds"
fi

# ------------------------------------------------------------------ images
# The tools come from the e2e module (fast: no Kubernetes in them); rebuilt when
# their source is newer than the binary.
build_tool() { # NAME
  local src="$ROOT/e2e/cmd/$1" bin="$IMG_OUT/$1"
  if [ ! -x "$bin" ] || [ -n "$(find "$src" "$ROOT/e2e/go.mod" -newer "$bin" -print -quit)" ]; then
    (cd "$ROOT/e2e" && go build -trimpath -ldflags='-s -w' -o "$bin.tmp" "./cmd/$1") >&2
    mv "$bin.tmp" "$bin"
  fi
}
exec 5>"$IMG_OUT/tools.lock" && locked 5 "$IMG_OUT/tools.lock"
build_tool mkimage
build_tool pause
if [ ! -s "$IMG_OUT/pause.tar" ] || [ "$IMG_OUT/pause" -nt "$IMG_OUT/pause.tar" ]; then
  "$IMG_OUT/mkimage" -binary "$IMG_OUT/pause" -path /pause -entrypoint /pause -user 65535:65535 \
    -tag bridge-e2e.local/pause:3.10 -o "$IMG_OUT/pause.tar"
fi
exec 5>&-
if [ ! -s "$IMG_OUT/argoexec-$ARGO_VERSION.tar" ] || [ "$ARGO_OUT/argoexec" -nt "$IMG_OUT/argoexec-$ARGO_VERSION.tar" ]; then
  "$IMG_OUT/mkimage" -binary "$ARGO_OUT/argoexec" -path /bin/argoexec -entrypoint argoexec \
    -tag "bridge-e2e.local/argoexec:$ARGO_VERSION" -o "$IMG_OUT/argoexec-$ARGO_VERSION.tar"
fi

log "cluster binaries and images ready in $(elapsed_s "$t0")s (cache $CACHE)"
echo "$CACHE"
