//! The `taskstream` package's integration tests, one binary: each module is one part of the
//! suite, driving the built `taskstream` binary (`CARGO_BIN_EXE_taskstream`) as its peers would.
//! `cargo test -p taskstream --test taskstream -- server::` runs one part.

mod common;

mod client_suite;
mod conformance;
mod connect;
mod firmware;
mod gateway;
mod hostile;
mod http;
mod postgres;
mod schema;
mod server;
