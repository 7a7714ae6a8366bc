#!/usr/bin/env bash
# The long runs of the fault and flood tests (docs/security.md): a 50 MB
# file through a WireGuard tunnel over a bad link (loss, reordering,
# duplication, corruption, a path-MTU black hole, a link down for 5 s, the
# peer's daemon SIGKILLed and restarted), the same through an OpenVPN
# tunnel (no black hole, no kill), then the handshake-flood benchmark
# against wireguard-go. Needs root, ncat and ss.
# Usage: sudo scripts/faults.sh [FILE_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
FAULT_FILE_MB="${1:-50}" go test -count=1 -timeout 60m -v -run 'TestFaultsOnTheUnderlay' ./internal/testkit/e2e |
	grep -E '^(=== RUN|--- |\s+--- |ok|FAIL)|transfer took'
FAULT_FILE_MB="${1:-50}" go test -count=1 -timeout 60m -v -run 'TestE2EOpenVPNFaultsOnTheUnderlay' ./internal/tunnel/ovpntunnel |
	grep -E '^(=== RUN|--- |\s+--- |ok|FAIL)|MB in'
go test -count=1 -run '^$' -bench 'HandshakeUnderFlood' -benchtime 1x -v ./device | grep -E 'handshakes under flood|flood [0-9]|^Benchmark'
