#!/usr/bin/env bash
# Installs what hack/dashshot needs to draw the dashboard's pictures, from
# the host's Debian sources, when missing: Debian's chromium (headless
# screenshots) and its prometheus (the throwaway Prometheus of
# hack/dashshot's test). The prometheus package's maintainer scripts are
# kept from starting the system service (policy-rc.d, as
# hack/prometheus-up.sh does); only the tests' own processes run.
#
#   bash hack/dashshot-deps.sh
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

export DEBIAN_FRONTEND=noninteractive
# Another script of the suite may be installing at the same time.
APT=(apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends)

apt_install() {
  "${APT[@]}" "$@" >/dev/null || { apt-get update -qq && "${APT[@]}" "$@" >/dev/null; }
}

if ! command -v chromium >/dev/null 2>&1; then
  log "installing Debian's chromium (headless screenshots)"
  apt_install chromium || die "apt-get install chromium failed"
fi
if ! command -v prometheus >/dev/null 2>&1; then
  log "installing Debian's prometheus package (its service not started)"
  policy_added=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  rc=0
  apt_install prometheus || rc=$?
  [ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || die "apt-get install prometheus failed"
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
command -v chromium >/dev/null && command -v prometheus >/dev/null
