#!/usr/bin/env bash
# Installs what hack/dashshot needs to draw the dashboard's pictures, from
# the host's Debian sources, when missing: Debian's chromium (headless
# screenshots) and its prometheus (the throwaway Prometheus of
# hack/dashshot's test, its system service kept off: need_cmd_no_service).
#
#   bash hack/dashshot-deps.sh
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

need_cmd chromium || die "apt-get install chromium failed"
need_cmd_no_service prometheus prometheus || die "apt-get install prometheus failed"
