//! `taskstream-server`: an MCP server with Tasks and SEP-2694 resumable task event streams, on
//! stdio, a Unix socket or Streamable HTTP, in both protocol eras, with its tasks kept by
//! [`taskstream_store`] (re-exported as [`store`]). The client side is the crate
//! `taskstream-client`; the `taskstream` binary (CLI, demo) is built on this crate.
//!
//! ## A server of your own tools
//!
//! A Rust MCP server with a durable, resumable tool is one short file: define the tool
//! ([`tool::Tool`]: name, description, JSON input schema, handler), hand it to a
//! [`ServerBuilder`], serve. The handler emits events through its [`tool::TaskContext`]; when
//! the client calls the tool as a task, each event is durable before any client sees it and the
//! client follows it with `tasks/stream`, resuming with `after`. The builder takes every option
//! of `taskstream serve`. (`std-host/server/examples/walk.rs` is a complete one.)
//!
//! ```no_run
//! use serde_json::json;
//! use taskstream_server::tool::{Tool, ToolResult};
//! use taskstream_server::ServerBuilder;
//!
//! fn main() -> std::process::ExitCode {
//!     let build = Tool::new(
//!         "build",
//!         "Builds, step by step",
//!         json!({"type": "object", "properties": {"steps": {"type": "integer", "minimum": 1}}}),
//!         |ctx, args| {
//!             let steps = args.get("steps").and_then(|s| s.as_u64()).unwrap_or(3);
//!             for step in 1..=steps {
//!                 // Logged now, sent to no client before it is durable; its seq.
//!                 let _seq = ctx.emit("com.example.build.step", &json!({ "step": step }))?;
//!                 ctx.sleep(std::time::Duration::from_millis(200))?; // wakes on tasks/cancel
//!             }
//!             Ok(ToolResult::text("built"))
//!         },
//!     );
//!     ServerBuilder::new("builder", "1.0.0").tool(build).main()
//! }
//! ```
//!
//! | module | owns |
//! | --- | --- |
//! | [`tool`] | the public tool API: [`tool::Tool`], [`tool::TaskContext`], served by [`ServerBuilder`] |
//! | [`config`] | the options of `taskstream serve` ([`config::ServeConfig`]) |
//! | [`connect`] | `taskstream connect`: the stdio relay to a data dir's long-lived server |
//! | [`log`] | the stderr subscriber of the binaries (text or JSON) |
//! | [`otel`] | OpenTelemetry traces over OTLP/HTTP: `--otlp-endpoint`, the flush at exit |
//! | [`store`] | the crate [`taskstream_store`], re-exported: tasks and their event logs |
//! | `workloads` | `taskstream serve`'s own tools (`emit`, `run_trace`), on [`tool`]; its [`trace`]s are public |
//!
//! The server itself is built in floors, each module importing only the floors below it (no
//! module imports this root, which only declares and re-exports; `ARCHITECTURE.md` draws
//! them), from the ground up:
//!
//! | floor | modules | owns |
//! | --- | --- | --- |
//! | the ground | `wire` (`era`, `task`), `io`, `metrics`, [`otel`], `signal`, `error`, [`config`], [`log`], `guard`, `cancel`, `heap`, `input` | pure functions of bytes and values (errors, the eras and their codecs, a task on the wire), the line framing and the one output writer, counters, small state that knows no server |
//! | the tool API | [`tool`], `workloads`, `tools` | the public tool API and `serve`'s own tools |
//! | the process | `process` ([`Process`]) | what lives as long as the process: the store handle, tasks and their threads, the sweep, the step workers; it sees a connection only as a `Peer` |
//! | the engine | `engine` ([`Connection`]) | one connection's state, split by lifetime (the process's handles, the connection's own, one entry per stream), and its decisions: dispatch, Tasks, `tasks/stream`, plain calls, delivery |
//! | the transports | `stdio` ([`serve`]), [`socket`], `http` ([`serve_http`]), `builder` ([`ServerBuilder`]), [`connect`] | thin adapters that own their I/O |
//!
//! Threads (see `ARCHITECTURE.md`, "Concurrency"):
//! - the **reader** (the caller of [`serve`]) reads stdin line by line, classifies each line with
//!   the core's parser, and answers every request that can be answered at once; it never waits
//!   for a task;
//! - a task of a blocking tool ([`tool::Tool::new`]) runs on a thread of its own, a task of a
//!   stepped tool ([`tool::Tool::stepped`]) on the process's few step workers
//!   (`process/steps.rs`), which hold no thread while it waits; either appends to the store and
//!   never writes to stdout;
//! - the **delivery** thread waits on the store's change signal and writes stream frames, status
//!   notifications and deferred `tasks/result` answers;
//! - the **sweep** thread applies retention once a second and gives freed heap back to the
//!   system when a burst left much of it (`heap`).
//!
//! All output goes through one `io::Output` (a lock and a buffer, flushed per batch).
//!
//! [`serve`] is the stdio loop; it only frames lines and hands each to a [`Connection`], which
//! is the whole server minus the framing. Tests and the `server` fuzz target drive a
//! [`Connection`] in process with any writer.

pub mod config;
pub mod connect;
pub mod log;
pub mod otel;
pub mod tool;
mod workloads;

pub use taskstream_store as store;
/// The host's wall clock, as the core's `Millis`: [`taskstream_store::clock`], re-exported.
pub use taskstream_store::clock;
/// The bundled traces `run_trace` replays, and their format (`data/README.md`).
pub use workloads::trace;

// The ground: pure functions of bytes and values, and small tools with no state of the server.
mod cancel;
mod error;
mod follow;
mod guard;
mod heap;
mod input;
mod io;
mod metrics;
mod signal;
mod wire;

// The process: tasks, workers, the sweep, the store handle; the tools it runs.
pub(crate) mod process;
mod tools;

// The protocol engine: one connection's state and its decisions.
mod engine;

// The transports: thin adapters that own their I/O.
mod builder;
mod http;
pub mod socket;
mod stdio;

pub use builder::{open_store, ArgsError, ServerBuilder};
pub use engine::Connection;
pub use error::ServeError;
pub use http::serve_http;
pub use process::{Forward, Process};
pub use socket::serve_socket;
pub use stdio::serve;
