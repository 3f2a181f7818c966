#!/usr/bin/env bash
# Prints the median of every criterion benchmark from its estimates.json (criterion prints the
# mean's interval; the report quotes medians): id, median time per iteration, and the median
# throughput when the benchmark declares one.
# Usage: benches/medians.sh [--newer FILE] [CRITERION_DIR]
#   CRITERION_DIR defaults to ${CARGO_TARGET_DIR:-target}/criterion; with --newer, only results
#   written after FILE (the benchmarks of one run).
set -euo pipefail
cd "$(dirname "$0")/.."
newer=()
if [ "${1:-}" = --newer ]; then
    newer=(-newer "$2")
    shift 2
fi
dir="${1:-${CARGO_TARGET_DIR:-target}/criterion}"
[ -d "$dir" ] || { echo "no criterion results in $dir" >&2; exit 0; }
find "$dir" -path '*/new/estimates.json' "${newer[@]}" | sort | while read -r est; do
    meta="${est%estimates.json}benchmark.json"
    id=$(sed -n 's/.*"full_id":"\([^"]*\)".*/\1/p' "$meta")
    ns=$(sed -n 's/.*"median":{"confidence_interval":{[^}]*},"point_estimate":\([0-9.e+-]*\).*/\1/p' "$est")
    kind=$(sed -n 's/.*"throughput":{"\([A-Za-z]*\)":\([0-9]*\)}.*/\1/p' "$meta")
    per=$(sed -n 's/.*"throughput":{"\([A-Za-z]*\)":\([0-9]*\)}.*/\2/p' "$meta")
    awk -v id="$id" -v ns="$ns" -v kind="$kind" -v per="$per" 'BEGIN {
        if (ns >= 1e9) t = sprintf("%.3f s", ns / 1e9)
        else if (ns >= 1e6) t = sprintf("%.3f ms", ns / 1e6)
        else if (ns >= 1e3) t = sprintf("%.3f µs", ns / 1e3)
        else t = sprintf("%.2f ns", ns)
        r = ""
        if (kind != "" && ns > 0) {
            x = per / (ns / 1e9)
            unit = (kind == "Bytes") ? "B/s" : "elem/s"
            if (x >= 1e9) r = sprintf("%.2f G%s", x / 1e9, unit)
            else if (x >= 1e6) r = sprintf("%.2f M%s", x / 1e6, unit)
            else if (x >= 1e3) r = sprintf("%.1f K%s", x / 1e3, unit)
            else r = sprintf("%.0f %s", x, unit)
        }
        printf "  %-52s %12s  %s\n", id, t, r
    }'
done
