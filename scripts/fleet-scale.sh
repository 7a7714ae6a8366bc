#!/usr/bin/env bash
# The fleet's scale run (docs/gateway.md#scale): SITES simulated site
# records (default 1000) written into a real etcd member, one real gateway
# converging on them. Prints the time to converge, the memory per site of
# the agent and of the daemon, and the time to apply one change. Root;
# needs etcd (apt install etcd-server etcd-client), wg, ip.
# CI runs the same test with 200 records (TestFleetScale).
set -euo pipefail
cd "$(dirname "$0")/.."
SITES="${SITES:-1000}"
FLEET_SCALE_SITES="$SITES" go test -count=1 -run '^TestFleetScale$' -v -timeout 10m ./internal/testkit/e2e | grep -E 'sites: converged|writer:|^(--- |ok|FAIL)'
