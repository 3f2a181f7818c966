#!/usr/bin/env bash
# Measures the store's durable append rates per --durability mode against raw write+fdatasync at
# the same batch size, and counts real fdatasync calls with strace (when installed).
# Usage: std-host/scripts/store-measure.sh   (from the workspace root; builds in release)
set -euo pipefail
cd "$(dirname "$0")/../.."
TASKSTREAM_STORE_MEASURE=1 cargo test --release -p taskstream-store --test store -- \
  --exact durability::append_rates durability::fdatasync_calls_follow_the_durability_mode --nocapture --test-threads 1
