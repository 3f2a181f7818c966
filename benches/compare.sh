#!/usr/bin/env bash
# The side-by-side comparison: the same workloads against the machine's bounds (fdatasync of
# small appends, lines through a pipe) and against the official MCP TypeScript SDK (its
# resumable Streamable HTTP server with the example InMemoryEventStore, and its stdio server),
# interleaved in rounds, then medians and the ratios of the performance targets.
# Loopback only (127.0.0.1). Needs node and npm for the SDK (pinned in compare/ts/package-lock.json);
# without them, or with --no-ts, only the bounds and taskstream run.
#
# Usage: benches/compare.sh [compare options]   e.g. --rounds 7 --events 100000
#   --rounds R              rounds (each runs every workload once, order rotated)   [5]
#   --events N              events per stream workload (replays, live emit, pipe)  [100000]
#   --fsync-events M        durable appends per round, per-event modes              [500]
#   --appenders K           concurrent appenders of group commit, and the raw batch [64]
#   --durable-live-events D live emit through a server with --durability group      [1000]
#   --payload B             payload bytes                                           [300]
#   --store-url URL         also run taskstream serve --store URL (live emit, replay); compare.sh
#                           passes a throwaway cluster's database unless TASKSTREAM_BENCH_PG=0
# Environment: TASKSTREAM_BENCH_DIR picks the disk of the scratch files; CARGO_TARGET_DIR as usual.
# Output: the table on stdout; also saved to benches/compare-last.txt (not committed).
# Then the PostgreSQL store against the data dir and against PostgreSQL's own bulk-insert
# bound (store_backends, its cluster started and stopped by it; benches/store-backends-last.txt).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"

echo "=== build: cargo build --release -p taskstream -p taskstream-benches --bin taskstream --bin compare"
cargo build --release -p taskstream -p taskstream-benches --bin taskstream --bin compare

args=("$@")
if [[ " ${args[*]:-} " != *" --no-ts "* ]]; then
    if command -v node >/dev/null && command -v npm >/dev/null; then
        echo "=== the TypeScript SDK: npm ci in benches/compare/ts (node $(node --version))"
        (cd "$here/compare/ts" && npm ci --no-audit --no-fund --loglevel=error)
        echo "    @modelcontextprotocol/sdk $(node -p "require('$here/compare/ts/node_modules/@modelcontextprotocol/sdk/package.json').version")"
    else
        echo "=== node/npm not found: the SDK comparisons are skipped"
        args+=(--no-ts)
    fi
fi

echo "=== machine"
echo "    nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); kernel $(uname -r)"
scratch="${TASKSTREAM_BENCH_DIR:-${TMPDIR:-/tmp}}"
echo "    scratch files on: $(df -T "$scratch" | awk 'NR == 2 { print $1, $2 }') ($scratch)"
echo "    load before: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "${TASKSTREAM_BENCH_PG:-1}" != 0 ]; then
    echo "=== a throwaway PostgreSQL cluster (scripts/postgres) for the serve --store workloads"
    pg_dir=$(mktemp -d)
    trap 'bash "$root/scripts/postgres" stop "$pg_dir/pg" >/dev/null 2>&1 || true; rm -rf "$pg_dir"' EXIT
    bash "$root/scripts/postgres" start "$pg_dir/pg" >/dev/null
    args+=(--store-url "$(bash "$root/scripts/postgres" createdb "$pg_dir/pg" compare)")
fi

echo "=== run: compare ${args[*]:-}"
TASKSTREAM_BIN="$target/release/taskstream" "$target/release/compare" "${args[@]}" | tee "$here/compare-last.txt"
if [ -n "${pg_dir:-}" ]; then
    bash "$root/scripts/postgres" stop "$pg_dir/pg" >/dev/null
fi

if [ "${TASKSTREAM_BENCH_PG:-1}" != 0 ]; then
    echo "=== the PostgreSQL store beside the data dir: store_backends (its own throwaway cluster"
    echo "    of scripts/postgres, started and stopped by it; TASKSTREAM_BENCH_PG=0 skips it)"
    cargo build --release -p taskstream-benches --bin store_backends
    "$target/release/store_backends" --rounds "${TASKSTREAM_BENCH_PG_ROUNDS:-3}" \
        | tee "$here/store-backends-last.txt"
fi
