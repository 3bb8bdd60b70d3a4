#!/usr/bin/env bash
# Pins the bridge-runner image everywhere users pick it up: the KFP
# components (components/*.yaml), the Argo templates (workflows/templates),
# the plain-Job examples, and the images: entry of workflows/kustomization.yaml
# (the one place kubectl apply -k takes it from). The tests read the pinned
# image from that kustomization and check that every other place agrees.
#
#   make set-image IMAGE=ghcr.io/bridge-runner/bridge-runner:v0.2.0
#   bash hack/set-image.sh registry.example.org:5000/bridge-runner:v0.2.0
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
IMAGE=${1:-${IMAGE:-}}
if [ -z "$IMAGE" ]; then
  echo "usage: hack/set-image.sh NAME:TAG  (or make set-image IMAGE=NAME:TAG)" >&2
  exit 2
fi
last=${IMAGE##*/}
case $last in
  *@*) echo "set-image: $IMAGE: digests are not supported; give NAME:TAG" >&2; exit 2 ;;
  *:*) ;;
  *) echo "set-image: $IMAGE has no tag; give NAME:TAG" >&2; exit 2 ;;
esac
name=${IMAGE%:*}
tag=${IMAGE##*:}
if ! [[ $name =~ ^[a-z0-9]([a-z0-9._:/-]*[a-z0-9])?$ && $tag =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "set-image: $IMAGE is not a valid image reference" >&2
  exit 2
fi
K=workflows/kustomization.yaml
old_name=$(awk '$1 == "newName:" {print $2; exit}' "$K")
old_tag=$(awk '$1 == "newTag:" {print $2; exit}' "$K")
old="$old_name:$old_tag"
files=(components/*.yaml workflows/templates/*.yaml examples/*/job.yaml deploy/operator/deployment.yaml)
n=$(grep -lF "image: $old" "${files[@]}" | wc -l)
sed -i -e "s#image: ${old//./\\.}\$#image: $IMAGE#" -e "s#--job-image=${old//./\\.}\$#--job-image=$IMAGE#" "${files[@]}"
sed -i -e "s#^\(  - name: \)${old_name//./\\.}\$#\1$name#" \
  -e "s#^\(    newName: \).*\$#\1$name#" \
  -e "s#^\(    newTag: \).*\$#\1$tag#" "$K"
echo "set-image: $old -> $IMAGE in $n files and $K"
