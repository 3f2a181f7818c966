//! The protocol engine: one connection's state ([`state`]) and its decisions, each in a file
//! of its own idea, stacked so that each imports only those below it:
//!
//! | file | owns |
//! | --- | --- |
//! | `streams` | per-stream state: the core's table of a connection, a stream delivered on its own (HTTP), the lines a stream ends with |
//! | `state` | [`ConnectionState`], split by lifetime (the process's handles, the connection's own, its streams) |
//! | `tasks` | the Tasks methods in both codecs, task creation |
//! | `stream` | `tasks/stream` admission and cancellation |
//! | `plain` | plain tool calls, progress |
//! | `delivery` | the delivery pump: stream frames, status notifications, deferred answers; what the process tells a connection |
//! | `dispatch` | one incoming line: parse, era, route, limits |
//! | `connection` | [`Connection`], the public face the transports drive |
//!
//! The engine knows no socket and no framing: it takes lines and writes lines to the
//! [`Output`](crate::io::Output) it was given. The process (below it) sees a connection only
//! as a [`Peer`](crate::process::Peer).

mod connection;
mod delivery;
mod dispatch;
mod plain;
mod state;
mod stream;
mod streams;
mod tasks;

pub use connection::Connection;
pub(crate) use state::ConnectionState;
pub(crate) use streams::{Detached, DetachedStart, Frame};
