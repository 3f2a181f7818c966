//! A client for MCP servers with Tasks and SEP-2694 resumable task event streams, for any Rust
//! MCP host.
//!
//! | item | what it is |
//! | --- | --- |
//! | [`Client`] | one connection to a stdio server ([`Client::spawn`] a command, or [`Client::attach`] to any `Read` + `Write` pair) or to a Streamable HTTP endpoint ([`Client::connect_http`], 2026-07-28 era), in the modern (2026-07-28) or legacy (2025-11-25) era, or probing for it; tools, Tasks and `tasks/stream` requests, each with a deadline |
//! | [`EventStream`] | one raw `tasks/stream` request: events as the server sends them, then the result or an error; cancel with `notifications/cancelled` |
//! | [`ResumableStream`] | following a task across reconnects: cursor committed only after the handler processed an event (RS-08), `after` on resume (RS-09), duplicates dropped by (taskId, seq) (RS-10, RS-11), seq continuity checked, related-task `_meta` checked (NT-01, NT-02), `events_gone` handled by a [`GonePolicy`] (EG-02) |
//! | [`CursorStore`] | where cursors live: [`FileCursorStore`] (temp file, fsync, atomic rename) or [`MemoryCursorStore`] |
//! | [`ClientError`], [`FollowError`], [`CursorError`], [`Violation`] | typed errors |
//!
//! # Example
//!
//! ```no_run
//! use std::process::Command;
//! use taskstream_client::{
//!     Client, ClientOptions, FileCursorStore, Flow, FollowEnd, ResumableStream, StreamOptions,
//! };
//!
//! let mut cmd = Command::new("taskstream");
//! cmd.args(["serve", "--in-memory"]);
//! let client = Client::spawn(cmd, ClientOptions::default())?;
//! let task = client.start_task("run_trace", serde_json::json!({"name": "code-review"}))?;
//! let store = FileCursorStore::open("/tmp/cursors")?;
//! let mut stream = ResumableStream::new(task.task_id, store, StreamOptions::default())?;
//! let end = stream.follow(&client, |event| {
//!     println!("{} {}", event.seq, event.event_type);
//!     Ok::<_, std::convert::Infallible>(Flow::Continue)
//! })?;
//! assert!(matches!(end, FollowEnd::Completed(_)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Architecture
//!
//! One reader thread per connection routes each incoming line: a response to the waiter of
//! its id, an event to the open stream of its task, anything else to a bounded unsolicited
//! list. A stream's events and its final response share one channel, so nothing the server
//! sent before the result is lost behind it.
//!
//! **Architecture Invariant**: this crate does not depend on `taskstream-core` or on the
//! server; it carries its own wire handling on `serde_json`, so a bug in the server's
//! core cannot hide itself by agreeing with itself in the client.
//!
//! Payloads are untrusted data (SE-05): the client never interprets them beyond JSON.

mod conn;
mod cursor;
mod error;
mod http;
mod mcp_client;
mod resume;
mod stream;
mod types;

pub use cursor::{CursorStore, FileCursorStore, MemoryCursorStore, MAX_FILE_TASK_ID_BYTES};
pub use error::{
    ClientError, CursorError, EventsGone, FollowError, RpcError, Violation, EVENTS_GONE_CODE,
    EVENTS_GONE_REASON,
};
pub use mcp_client::{Client, ClientOptions};
pub use resume::{
    Delivery, Flow, FollowEnd, FollowStats, GonePolicy, ResumableStream, SkippedRange, StartAt,
    StreamOptions,
};
pub use stream::{EventStream, StreamItem};
pub use types::{
    seq_of, CallOutcome, Checkpoint, Era, EraChoice, EventRange, ServerInfo, TaskEvent, TaskInfo,
    TaskStatus, ToolInfo, CHECKPOINT_EVENT_TYPE, EVENTS_META, LEGACY_PROTOCOL_VERSION, MAX_SEQ,
    MODERN_PROTOCOL_VERSION, RELATED_TASK_META, TASKS_EXTENSION,
};
