#!/usr/bin/env bash
# Proves that the real KFP SDK accepts what we ship: loads every
# components/*.yaml with kfp.components.load_component_from_file and compiles
# every examples/*/kfp_pipeline.py with kfp.compiler.Compiler, checking the
# compiled IR (executor arguments, Secret mounts, no caching). Prints
# "kfp-check: N passed, M failed" and exits non-zero on any failure.
#
# The SDK (hack/kfp-requirements.txt, every version pinned) is installed once
# into a venv (hack/kfp-venv.sh) and reused while the requirements file is
# unchanged.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HACK")
# shellcheck source=hack/kfp-venv.sh
source "$HACK/kfp-venv.sh"
kfp_venv
exec "$VENV/bin/python" "$HACK/kfp_check.py" "$ROOT"
