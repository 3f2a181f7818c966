//! `taskstream`: a stdio MCP server with Tasks and SEP-2694 resumable task event streams, on a
//! sled-backed write-ahead log; and a client library for such streams.
//!
//! ## A server of your own tools
//!
//! A Rust MCP server with a durable, resumable tool is one short file: define the tool
//! ([`tool::Tool`]: name, description, JSON input schema, handler), hand it to a
//! [`ServerBuilder`], serve. The handler emits events through its [`tool::TaskContext`]; when
//! the client calls the tool as a task, each event is durable before any client sees it and the
//! client follows it with `tasks/stream`, resuming with `after`. The builder takes every option
//! of `taskstream serve`. (`examples/walk/main.rs` is a complete one.)
//!
//! ```no_run
//! use serde_json::json;
//! use taskstream::tool::{Tool, ToolResult};
//! use taskstream::ServerBuilder;
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
//! | [`client`] | a resumable event-stream client for any Rust MCP host (RS-08..RS-11, EG-02): the crate `taskstream-client`, which needs none of the server |
//! | [`connect`] | `taskstream connect`: the stdio relay to a data dir's long-lived server |
//! | [`config`] | the options of `taskstream serve` |
//! | [`gateway`] | `taskstream gateway`: taskstream in front of any stdio MCP server |
//! | [`demo`] | `taskstream demo`: the reviewer's walk-through, built on [`client`] |
//! | [`clock`] | the wall clock, as the core's `Millis` |
//! | [`log`] | stderr logging |
//! | [`server`] | the stdio MCP server: eras, tools, Tasks, `tasks/stream`, delivery |
//! | [`store`] | tasks and their event logs, durable as `--durability` says |
//! | [`tool`] | the public tool API: [`tool::Tool`], [`tool::TaskContext`], served by [`ServerBuilder`] |
//! | `workloads` | `taskstream serve`'s own tools (`emit`, `run_trace`), on [`tool`] |

/// The resumable event-stream client: the crate [`taskstream_client`], re-exported.
pub use taskstream_client as client;
pub mod clock;
pub mod config;
pub mod connect;
pub mod demo;
pub mod gateway;
pub mod log;
pub mod server;
pub mod store;
pub mod tool;
mod workloads;

pub use server::ServerBuilder;
