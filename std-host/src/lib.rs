//! `taskstream`: a stdio MCP server with Tasks and SEP-2694 resumable task event streams, on a
//! sled-backed write-ahead log; and a client library for such streams.
//!
//! | module | owns |
//! | --- | --- |
//! | [`client`] | a resumable event-stream client for any Rust MCP host (RS-08..RS-11, EG-02) |
//! | [`connect`] | `taskstream connect`: the stdio relay to a data dir's long-lived server |
//! | [`config`] | the options of `taskstream serve` |
//! | [`demo`] | `taskstream demo`: the reviewer's walk-through, built on [`client`] |
//! | [`clock`] | the wall clock, as the core's `Millis` |
//! | [`log`] | stderr logging |
//! | [`server`] | the stdio MCP server: eras, tools, Tasks, `tasks/stream`, delivery |
//! | [`store`] | tasks and their event logs, durable as `--durability` says |
//! | `workloads` | what the tools do (`emit`, `run_trace`), independent of the protocol |

pub mod client;
pub mod clock;
pub mod config;
pub mod connect;
pub mod demo;
pub mod log;
pub mod server;
pub mod store;
mod workloads;
