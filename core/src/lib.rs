//! `taskstream-core`: everything of SEP-2694 ("Resumable Task Event Streams") that is not I/O.
//!
//! This crate is `#![no_std]` and never allocates: every capacity is a const generic or a buffer
//! the caller lends. It is meant to be compiled into a constrained MCP agent (a Cortex-M board
//! speaking JSON-RPC over a UART) as well as into the `taskstream` stdio server.
//!
//! # Layers
//!
//! | module | owns |
//! | --- | --- |
//! | [`seq`] | [`Seq`], the wire-safe sequence number, and [`SeqAllocator`] |
//! | [`time`] | [`Millis`]: the caller's clock; the core never reads one |
//! | [`event`] | validated event types ([`EventType`]) and payloads ([`Payload`]) |
//! | [`json`] | a strict, iterative JSON validator and compactor |
//! | [`retention`] | [`RetentionPolicy`]: what a receiver keeps, as data |
//! | [`ring`] | [`EventRing`]: fixed-capacity per-task storage of encoded events |
//! | [`resume`] | [`resume::decide`]: the resume / `events_gone` rules as one pure function |
//! | [`streams`] | [`StreamTable`]: the active `tasks/stream` requests of one connection, and the pump |
//! | [`rpc`] | sans-IO JSON-RPC: parsing incoming lines, writing the stream messages and errors |
//! | [`frame`] | newline framing: a feed-style line reader and a writer, with `embedded-io` adapters |
//! | [`record`] | the postcard log record of a stored event, versioned and checksummed |
//!
//! # Panics
//!
//! No function of this crate panics on any input that came from outside (bytes, JSON,
//! cursors, records); the fuzz targets in `fuzz/` exercise exactly that contract.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod event;
pub mod frame;
pub mod id;
pub mod json;
pub mod record;
pub mod resume;
pub mod retention;
pub mod ring;
pub mod rpc;
pub mod seq;
pub mod streams;
pub mod time;

pub use event::{CompactPayload, EventType, Payload};
pub use id::RequestId;
pub use resume::{Lifecycle, Resume, ResumeError, Retained};
pub use retention::{RetentionPolicy, CHECKPOINT_EVENT_TYPE};
pub use ring::EventRing;
pub use seq::{Seq, SeqAllocator};
pub use streams::StreamTable;
pub use time::Millis;
