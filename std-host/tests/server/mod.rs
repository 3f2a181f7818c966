//! Black-box tests of `taskstream serve`: the real binary over pipes. One test binary with
//! modules; every wait is for a specific line with a deadline. Requirement IDs are those of
//! `docs/specification/requirements.md`.

pub(crate) use crate::common::client;
pub(crate) mod checkpoints;
mod crash;
mod durable_order;
mod faults;
mod lifecycle;
mod recovery;
use crate::common::rng;
mod scale;
mod stream;
mod tasks;
mod tools;
