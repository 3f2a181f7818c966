//! The shared pieces of taskstream's benchmarks (`benches/*.rs`) and of the side-by-side
//! comparison (`src/bin/compare.rs`, driven by `compare.sh`).
//!
//! - [`lines`]: a line splitter over raw bytes, so a reading client is never the bottleneck.
//! - [`stdio`]: a minimal MCP client over a child's stdin/stdout (any server: taskstream, the
//!   TypeScript SDK), with the taskstream steps the benchmarks need (create an `emit` task,
//!   stream it with `after`).
//! - [`http`]: a minimal HTTP/1.1 + SSE client for the TypeScript SDK's Streamable HTTP server,
//!   loopback only.
//! - [`raw`]: the machine's bounds: `fdatasync` of small appends, lines through a pipe.
//! - [`scale`]: how big a run is (`full` under `cargo bench`, `smoke`, `test` under `cargo test`).
//! - [`stats`]: medians and formatting.
//! - [`store`]: driving `taskstream_store::Store` directly.
//!
//! Nothing here asserts a timing: figures are printed, never gated on.

pub mod http;
pub mod lines;
pub mod raw;
pub mod scale;
pub mod stats;
pub mod stdio;
pub mod store;

use std::path::PathBuf;
use std::process::Command;

/// The event type every workload appends (the `emit` tool's).
pub const TICK: &str = "dev.taskstream.tick";

/// The payload size the targets speak of (bytes of compact JSON).
pub const PAYLOAD_BYTES: usize = 300;

/// `{"i":0,"data":"xxxx…"}` of exactly `bytes` bytes (at least 17).
#[must_use]
pub fn payload_of(bytes: usize) -> Vec<u8> {
    let overhead = r#"{"i":0,"data":""}"#.len();
    format!(
        r#"{{"i":0,"data":"{}"}}"#,
        "x".repeat(bytes.saturating_sub(overhead))
    )
    .into_bytes()
}

/// The `payload_bytes` argument of `emit` that gives payloads of about `bytes` bytes.
#[must_use]
pub fn emit_data_len(bytes: usize) -> usize {
    bytes.saturating_sub(r#"{"i":00000,"data":""}"#.len())
}

/// The `taskstream` binary to spawn: `$TASKSTREAM_BIN` if set; otherwise the one in the same
/// target directory as the running executable, rebuilt first with the `cargo` that runs us (a
/// no-op when fresh), so a benchmark never measures a stale server.
///
/// # Panics
/// If the binary cannot be found or built.
#[must_use]
pub fn taskstream_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("TASKSTREAM_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the running executable's path");
    // target/<profile>/deps/<bench>-<hash>, or target/<profile>/<bin>.
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let bin = dir.join("taskstream");
    // `cargo bench` builds with the `bench` profile into `release/`: building the server with
    // the same profile reuses every dependency already compiled for the benchmarks.
    let profile = if dir.file_name().is_some_and(|n| n == "release") {
        "bench"
    } else {
        "dev"
    };
    let cargo = std::env::var_os("CARGO");
    if let (Some(cargo), Some(target)) = (cargo, dir.parent()) {
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "taskstream", "--profile", profile])
            .env("CARGO_TARGET_DIR", target)
            .status()
            .expect("running cargo build -p taskstream");
        assert!(status.success(), "cargo build -p taskstream failed");
    }
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release -p taskstream` or set TASKSTREAM_BIN",
        bin.display()
    );
    bin
}

/// A fresh scratch directory, removed when dropped: under `$TASKSTREAM_BENCH_DIR` if set (to
/// measure a particular disk), else the system's temporary directory.
///
/// # Panics
/// If it cannot be created.
#[must_use]
pub fn scratch_dir() -> tempfile::TempDir {
    let parent =
        std::env::var_os("TASKSTREAM_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    std::fs::create_dir_all(&parent).expect("create the scratch parent");
    tempfile::Builder::new()
        .prefix("taskstream-bench-")
        .tempdir_in(parent)
        .expect("create a scratch dir")
}
