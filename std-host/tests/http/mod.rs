//! Black-box tests of `taskstream serve --http`: the real binary, a real HTTP client (reqwest
//! on hyper), both eras. The scenarios only a long-lived server can pass (a client drops its
//! connection mid-task and resumes on a new one while the task runs; two clients at different
//! speeds on one task; a late joiner), `Last-Event-ID` resumption and its `events_gone` case,
//! and each bad input of the HTTP binding, each followed by a request that must still be
//! served. Every wait has a deadline.

mod bad_input;
mod checkpoints;
pub(crate) mod client;
mod conformance;
mod hostile;
mod long_lived;
mod oauth;
pub(crate) mod ops;
mod scale;
mod status;
mod traces;
