#!/usr/bin/env bash
# Proves that the real KFP SDK accepts what we ship: loads every
# components/*.yaml with kfp.components.load_component_from_file and compiles
# every examples/*/kfp_pipeline.py with kfp.compiler.Compiler, checking the
# compiled IR (executor arguments, Secret mounts, no caching). Prints
# "kfp-check: N passed, M failed" and exits non-zero on any failure.
#
# The SDK (hack/kfp-requirements.txt, every version pinned) is installed once
# into a venv under ${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}/kfp-venv and
# reused while the requirements file is unchanged.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HACK")
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
VENV=$CACHE/kfp-venv
REQ=$HACK/kfp-requirements.txt
PYTHON=${PYTHON:-python3}

stamp=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ "$(cat "$VENV/.bridge-stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "== kfp-check: installing the KFP SDK into $VENV"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --no-input -r "$REQ"
  echo "$stamp" >"$VENV/.bridge-stamp"
fi
exec "$VENV/bin/python" "$HACK/kfp_check.py" "$ROOT"
