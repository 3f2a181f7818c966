//! Hostile clients against `taskstream serve` (the real binary over pipes) and against the
//! in-process [`taskstream_server::Connection`]: whatever arrives on stdin is answered with a
//! clear error while the server reads on, keeps its memory bounded and loses nothing; the
//! limits of SEP-2694's "Security Implications" (SE-07) hold; and a principal sees only its own
//! tasks, across restarts (SE-01, SE-03). The bounds and the tests that prove them are listed
//! in `docs/security.md`. Every wait is for a condition, with a deadline.

mod check;
use crate::common::client;
mod drive;
use crate::common::files;
mod inproc;
mod input;
mod isolation;
mod limits;
