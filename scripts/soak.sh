#!/usr/bin/env bash
# The long rekey soak (docs/security.md): REKEYS (default 200) WireGuard
# rekeys under traffic both ways with the protocol's timers shortened
# inside the test (no product configuration can shorten them): every packet
# delivered, none sent under a session past RejectAfterTime, goroutines and
# heap flat from the tenth rekey on. CI runs 20 (TestRekeySoak).
# Usage: scripts/soak.sh [REKEYS]
set -euo pipefail
cd "$(dirname "$0")/.."
SOAK_REKEYS="${1:-200}" go test -count=1 -timeout 30m -v -run '^TestRekeySoak$' ./device | grep -E '^(--- |ok|FAIL)|rekeys;|grew|drops'
