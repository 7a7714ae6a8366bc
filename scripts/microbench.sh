#!/usr/bin/env bash
# Runs the micro-benchmarks quoted in docs/benchmarks.md and prints, for each
# benchmark, the median of COUNT runs (ns/op, MB/s, B/op, allocs/op) as a
# Markdown table. Usage: scripts/microbench.sh [COUNT] [BENCHTIME]
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT="${1:-5}"
BT="${2:-200ms}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

run() { # pkg regexp [extra flags]
	local pkg=$1 re=$2; shift 2
	echo "running $pkg $re $*" >&2
	go test -run '^$' -bench "$re" -benchmem -benchtime "$BT" -count "$COUNT" "$@" "$pkg" | grep '^Benchmark' >>"$out" || true
}

run ./conn/ '^BenchmarkSend$' -cpu 1,2,4,8
run ./device/noise/ '^Benchmark(Reference)?(Create|Consume)(Initiation|Response)$'
run ./device/allowedips/ '^Benchmark(Reference)?LookupBytes[46]$'
run ./device/replay/ '^BenchmarkValidateInOrder$'
run ./internal/control/uapi/ '^Benchmark(WriterGet|ServeGet|ParseSet)131071AllowedIPs$'
run ./device/ 'Pipeline'
run ./internal/crypto/chachapoly/ '^BenchmarkAEAD$'

echo "| benchmark | median ns/op | median MB/s | B/op | allocs/op | runs |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
awk '
{
	name=$1; ns=""; mbs="-"; bop="-"; aop="-"
	for (i=2;i<=NF;i++) {
		if ($i=="ns/op") ns=$(i-1)
		if ($i=="MB/s") mbs=$(i-1)
		if ($i=="B/op") bop=$(i-1)
		if ($i=="allocs/op") aop=$(i-1)
	}
	if (!(name in n)) order[++k]=name
	n[name]++; v[name, n[name]]=ns; m[name, n[name]]=mbs; B[name]=bop; A[name]=aop
}
function median(arr, name, cnt,   i, j, t, a) {
	for (i=1;i<=cnt;i++) a[i]=arr[name,i]+0
	for (i=1;i<=cnt;i++) for (j=i+1;j<=cnt;j++) if (a[j]<a[i]) { t=a[i]; a[i]=a[j]; a[j]=t }
	if (cnt%2) return a[(cnt+1)/2]
	return (a[cnt/2]+a[cnt/2+1])/2
}
END {
	for (i=1;i<=k;i++) {
		nm=order[i]
		mb=(m[nm,1]=="-") ? "-" : sprintf("%.0f", median(m, nm, n[nm]))
		printf "| %s | %.0f | %s | %s | %s | %d |\n", nm, median(v, nm, n[nm]), mb, B[nm], A[nm], n[nm]
	}
}' "$out"
