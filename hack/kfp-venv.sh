# shellcheck shell=bash
# Sourced by hack/kfp-check.sh and hack/kfp-local.sh: makes sure the pinned KFP
# SDK (hack/kfp-requirements.txt, with the docker client that kfp.local's
# DockerRunner needs) is installed in a venv under
# ${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}/kfp-venv, reused while the
# requirements file is unchanged, and sets VENV to it. One script at a time
# installs it (flock), so two runs side by side share one install.
KFP_VENV_REQ=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kfp-requirements.txt
VENV=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}/kfp-venv
kfp_venv() {
  local stamp python=${PYTHON:-python3}
  stamp=$(sha256sum "$KFP_VENV_REQ" | cut -d' ' -f1)
  mkdir -p "$(dirname "$VENV")"
  (
    flock -w 900 9 || { echo "could not lock $VENV.lock" >&2; exit 1; }
    if [ "$(cat "$VENV/.bridge-stamp" 2>/dev/null)" != "$stamp" ]; then
      echo "== installing the KFP SDK into $VENV" >&2
      rm -rf "$VENV"
      "$python" -m venv "$VENV"
      "$VENV/bin/pip" install --quiet --no-input -r "$KFP_VENV_REQ"
      echo "$stamp" >"$VENV/.bridge-stamp"
    fi
  ) 9>"$VENV.lock"
}
