#!/usr/bin/env bash
# What observability costs the durable path: the data dir's group-commit live rate
# (`taskstream_stdio_live_durable_group` of benches/src/bin/compare.rs) with metrics and traces
# off, metrics on, and metrics on with traces exported to a local OTLP/HTTP sink, run
# interleaved in pairs (A/B, then B/A, …) so that the machine's load falls on both sides.
# Loopback only (127.0.0.1).
#
# Usage: benches/overhead.sh OFF_BIN ON_BIN [PAIRS] [compare options]
#   OFF_BIN  a taskstream binary whose metrics are not updated (there is no switch: build one
#            with the hot-path updates removed, as benches/REPORT.md says)
#   ON_BIN   the taskstream binary as shipped (metrics always on; traces on when an OTLP
#            endpoint is set)
#   PAIRS    how many times each comparison runs, alternating the order               [4]
# compare options default to: --no-ts --rounds 3 --events 20000 --durable-live-events 3000
# Environment: COMPARE, a compare binary already built (else it is built first);
#              OVERHEAD_TRACES=0 to compare metrics only (no traced runs).
# Output: one line per run and the medians; saved to benches/overhead-last.txt (not committed).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
off="${1:?usage: benches/overhead.sh OFF_BIN ON_BIN [PAIRS] [compare options]}"
on="${2:?usage: benches/overhead.sh OFF_BIN ON_BIN [PAIRS] [compare options]}"
pairs="${3:-4}"
shift $(( $# < 3 ? $# : 3 ))
opts=("$@")
if [ ${#opts[@]} -eq 0 ]; then
    opts=(--no-ts --rounds 3 --events 20000 --durable-live-events 3000)
fi

# $COMPARE: a compare binary already built (else it is built now).
if [ -z "${COMPARE:-}" ]; then
    cargo build --release -p taskstream-benches --bin compare >&2
fi
compare="${COMPARE:-$target/release/compare}"

# The OTLP/HTTP sink: answers every POST 200 with an empty ExportTraceServiceResponse and
# counts the bytes it received.
sink_dir=$(mktemp -d)
python3 - "$sink_dir/port" "$sink_dir/bytes" <<'EOF' &
import http.server, sys
port_file, bytes_file = sys.argv[1], sys.argv[2]
total = 0
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global total
        n = int(self.headers.get("content-length", "0"))
        total += len(self.rfile.read(n))
        with open(bytes_file, "w") as f:
            f.write(str(total))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
with open(port_file, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
EOF
sink=$!
trap 'kill "$sink" 2>/dev/null || true; rm -rf "$sink_dir"' EXIT
for _ in $(seq 100); do [ -s "$sink_dir/port" ] && break; sleep 0.05; done
endpoint="http://127.0.0.1:$(cat "$sink_dir/port")"

# One run of compare against BIN (with an OTLP endpoint when ENDPOINT is not empty): the
# durable group-commit live rate, k events/s (the median of its rounds).
run() {
    local bin=$1 endpoint=$2
    local out
    out=$(env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT \
        ${endpoint:+OTEL_EXPORTER_OTLP_ENDPOINT=$endpoint} \
        TASKSTREAM_BIN="$bin" "$compare" "${opts[@]}")
    echo "$out" | awk '$1 == "taskstream_stdio_live_durable_group" { print $0; exit }' >&2
    echo "$out" | awk '$1 == "taskstream_stdio_live_durable_group" {
        for (i = 2; i <= NF; i++) if ($i ~ /^[0-9.]+$/) {
            print ($(i + 1) == "M/s") ? $i * 1000 : ($(i + 1) == "/s") ? $i / 1000 : $i; exit } }'
}

{
echo "=== machine: nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg); compare ${opts[*]}"
# One comparison run PAIRS times, the order alternated: LABEL, then the A side's and the B side's
# binary and OTLP endpoint. Prints each pair and leaves the rates in the arrays side_a / side_b.
compare_pairs() {
    local label=$1 a_bin=$2 a_end=$3 b_bin=$4 b_end=$5 i x y order
    side_a=() side_b=()
    for i in $(seq "$pairs"); do
        if [ $((i % 2)) -eq 1 ]; then
            x=$(run "$a_bin" "$a_end"); y=$(run "$b_bin" "$b_end"); order='off, on'
        else
            y=$(run "$b_bin" "$b_end"); x=$(run "$a_bin" "$a_end"); order='on, off'
        fi
        side_a+=("$x"); side_b+=("$y")
        echo "$label pair $i ($order): off $x, on $y k events/s, on/off $(awk -v a="$y" -v b="$x" 'BEGIN { printf "%.3f", a / b }')"
    done
}
compare_pairs metrics "$off" "" "$on" ""
a_off=("${side_a[@]}"); a_on=("${side_b[@]}")
if [ "${OVERHEAD_TRACES:-1}" != 0 ]; then
    compare_pairs traces "$on" "" "$on" "$endpoint"
    b_on=("${side_a[@]}"); b_tr=("${side_b[@]}")
fi
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
if [ "${OVERHEAD_TRACES:-1}" != 0 ]; then
    echo "medians: metrics off $(median "${a_off[@]}"), on $(median "${a_on[@]}"); traces off $(median "${b_on[@]}"), on $(median "${b_tr[@]}") k events/s"
else
    echo "medians: metrics off $(median "${a_off[@]}"), on $(median "${a_on[@]}") k events/s"
fi
echo "the sink received $(cat "$sink_dir/bytes" 2>/dev/null || echo 0) bytes of OTLP"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$here/overhead-last.txt"
