#!/usr/bin/env bash
# The fleet's scale run (docs/gateway.md#scale): SITES simulated site
# records (default 1000) written into a real etcd member, one real gateway
# converging on them. Prints the time to converge, the time to apply one
# change among them (CHANGES times, default 10: median and max), and the
# memory per site against the same peers configured statically, as the
# engine's benchmark counts it (docs/benchmarks.md): the daemons' Go heap
# found live by a collection plus goroutine stacks (their engine
# counters), the agent's heap after a collection (its SIGUSR1 profile),
# over each with no site; RSS beside. Each process is measured after
# SETTLE (default 130s: past the Go runtime's forced collection every 2
# minutes, so that the live heap is fresh and RSS is what the processes
# keep, not their garbage). Root; needs etcd
# (apt install etcd-server etcd-client), wg, ip.
# CI runs the same test with 200 records and no settling (TestFleetScale).
set -euo pipefail
cd "$(dirname "$0")/.."
SITES="${SITES:-1000}"
FLEET_SCALE_SITES="$SITES" FLEET_SCALE_CHANGES="${CHANGES:-10}" FLEET_SCALE_SETTLE="${SETTLE:-130s}" \
	go test -count=1 -run '^TestFleetScale$' -v -timeout 20m ./internal/testkit/e2e | grep -E 'sites: converged|sites: the agent|sites, Go heap|writer: [0-9]+ records|^(--- |ok|FAIL)'
