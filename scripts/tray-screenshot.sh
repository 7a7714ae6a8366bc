#!/usr/bin/env bash
# Takes the screenshot of wirelane-tray in a real panel that docs/tray.md
# shows: runs the e2e test TestTrayInARealPanel (Xvfb, xfce4-panel, the real
# service with a tunnel up, one down and one failed) and keeps its picture
# of the open menu with the up tunnel's details.
#
#   sudo ./scripts/tray-screenshot.sh [OUT.png]    (default docs/tray-menu.png)
#
# Needs root (network namespaces) and xvfb, xfce4-panel and xdotool
# (apt-get install them; scripts/test.sh does as root).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/find-go.sh
. scripts/lib/find-go.sh
find_go
out="${1:-docs/tray-menu.png}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
WIRELANE_TRAY_SCREENSHOT="$out" go test -count=1 -v -run '^TestTrayInARealPanel$' ./internal/testkit/e2e | grep -E '^(---|ok|FAIL)|screenshot' || true
test -s "$out" || { echo "tray-screenshot.sh: no screenshot was written (is the test skipping? run as root with xvfb, xfce4-panel and xdotool)" >&2; exit 1; }
echo "wrote $out"
