//! `taskstream`: a stdio MCP server with Tasks and SEP-2694 resumable task event streams, on a
//! sled-backed write-ahead log; and a client library for such streams.

pub mod store;
