#!/usr/bin/env bash
# Measures the store's durable append rates per --durability mode against raw write+fdatasync at
# the same batch size (benches/src/bin/store_append_rates.rs), then counts real fdatasync calls
# with strace (the store's `fdatasync_calls_follow_the_durability_mode`, which needs strace).
# Usage: std-host/scripts/store-measure.sh   (from the workspace root; builds in release)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run --release -p taskstream-benches --bin store_append_rates
cargo test --release -p taskstream-store --test store -- \
  --exact durability::fdatasync_calls_follow_the_durability_mode --ignored --nocapture --test-threads 1
