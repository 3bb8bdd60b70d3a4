#!/usr/bin/env bash
# Builds the bridge-runner image as a tarball, without a registry or a container
# engine, and (if the e2e cluster is up) loads it into its containerd.
#
# The image is what the Dockerfile makes, the same way: the static binary built
# with CGO_ENABLED=0 -trimpath and the Dockerfile's -ldflags at /bridge-runner,
# Debian's busybox-static from the Dockerfile's Debian release as /bin/sh (the
# local backend's shell), entrypoint /bridge-runner, user 65532:65532, on an
# empty base with the few files of distroless/static (/etc/passwd, /etc/group,
# /tmp). The Dockerfile stays what users build.
#
# It is tagged with the image the shipped manifests pin (workflows/kustomization.yaml,
# so `kubectl apply -k workflows` runs it unchanged; the cluster's containerd can
# never pull, so nothing is fetched) and as bridge-e2e.local/bridge-runner:e2e.
#
#   bash hack/build-image.sh                 # prints the tarball path, then the image ref
#   BRIDGE_IMAGE_OUT=/tmp/x.tar bash hack/build-image.sh
#
# Environment: BRIDGE_CLUSTER_DIR (to find the cluster's containerd; default
# /tmp/bridge-runner-cluster), BRIDGE_IMAGE_LOAD=0 (do not load it there), BRIDGE_IMAGE_OUT (default <cache>/images/bridge-runner.tar),
# BRIDGE_CACHE, VERSION, COMMIT.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HACK")
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
STATE=${BRIDGE_CLUSTER_DIR:-/tmp/bridge-runner-cluster}
OUT=${BRIDGE_IMAGE_OUT:-$CACHE/images/bridge-runner.tar}
t0=$(now_ms)
mkdir -p "$(dirname "$OUT")" "$CACHE/images"

K=$ROOT/workflows/kustomization.yaml
pinned="$(awk '$1 == "newName:" {print $2; exit}' "$K"):$(awk '$1 == "newTag:" {print $2; exit}' "$K")"
[ "$pinned" != ":" ] || die "no image pinned in $K"
VERSION=${VERSION:-$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}

work=$(mktemp -d "${TMPDIR:-/tmp}/bridge-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
  -o "$work/bridge-runner" ./cmd/bridge-runner)
if command -v file >/dev/null; then
  file "$work/bridge-runner" | grep -q 'statically linked' || die "the bridge-runner binary is not statically linked"
fi
t_bin=$(now_ms)

# /bin/sh: busybox-static of the Debian release the Dockerfile's shell stage
# uses, fetched with this host's apt (which must be that release) and cached.
release=$(awk '$1 == "FROM" && $NF == "shell" {split($2, a, ":"); sub(/-slim$/, "", a[2]); print a[2]; exit}' "$ROOT/Dockerfile")
[ -n "$release" ] || die "no 'FROM debian:<release>-slim AS shell' stage in the Dockerfile"
BB=$CACHE/images/busybox-static-$release/bin/busybox
if [ ! -x "$BB" ]; then
  # shellcheck disable=SC1091
  host_release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ "$host_release" = "$release" ] || die "the Dockerfile's shell comes from Debian $release, this host is ${host_release:-unknown}: fetch busybox-static of $release by hand into $(dirname "$(dirname "$BB")")"
  (cd "$work" && apt-get download busybox-static >/dev/null 2>&1) || die "apt-get download busybox-static failed (apt-get update?)"
  rm -rf "$(dirname "$(dirname "$BB")")"
  dpkg-deb -x "$work"/busybox-static_*.deb "$(dirname "$(dirname "$BB")")"
  [ -x "$BB" ] || die "busybox-static has no /bin/busybox"
fi

MK=$CACHE/images/mkimage
if [ ! -x "$MK" ] || [ -n "$(find "$ROOT/e2e/cmd/mkimage" "$ROOT/e2e/go.mod" -newer "$MK" -print -quit)" ]; then
  (cd "$ROOT/e2e" && CGO_ENABLED=0 go build -trimpath -o "$MK.tmp.$$" ./cmd/mkimage) && mv "$MK.tmp.$$" "$MK"
fi
"$MK" -binary "$work/bridge-runner" -path /bridge-runner -entrypoint /bridge-runner -user 65532:65532 \
  -file "$BB:/bin/sh" \
  -tag "$pinned,bridge-e2e.local/bridge-runner:e2e" -o "$OUT"
log "image $pinned built in $(elapsed_s "$t0")s (go build $(( (t_bin - t0) / 1000 ))s; $(du -h "$OUT" | cut -f1))"

SOCK=$STATE/containerd/containerd.sock
# BRIDGE_IMAGE_LOAD=0: a build for another daemon (kfp-local.sh) leaves the
# cluster's image alone while the e2e suite may be running beside it.
if [ "${BRIDGE_IMAGE_LOAD:-1}" = 1 ] && [ -S "$SOCK" ]; then
  tl=$(now_ms)
  ctr --address "$SOCK" -n k8s.io images import "$OUT" >/dev/null
  log "loaded into the e2e cluster's containerd in $(elapsed_s "$tl")s"
fi
echo "$OUT"
echo "$pinned"
