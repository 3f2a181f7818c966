//! Tests of `taskstream_client` and `taskstream demo`: one test binary with modules.
//!
//! | module | what |
//! | --- | --- |
//! | `real` | the client against the real `taskstream serve --in-memory --durability none`: streaming, resume, de-duplication, `events_gone` policies, both eras |
//! | `conformance_server` | the client against `taskstream conformance-server` with each client fault: early closes (RS-08, RS-09), repeated events on resume (RS-10, RS-11), `events_gone` on resume (EG-02) |
//! | `fake` | the client against a scripted server that breaks the rules: gaps, missing related-task `_meta`, changed duplicates, bad `events_gone`, silence, EOF |
//! | `cursor` | the file cursor store: round trip, atomic replacement under concurrent readers, leftovers of a crash |
//! | `http` | the client's Streamable HTTP transport against the real `taskstream serve --http`: a cut connection resumed on a new one while the task runs, cancelling by closing the response, errors |
//! | `demo` | `taskstream demo --json` end to end (the slowest test: about 15 s) |
//!
//! No test sleeps to wait for a condition: each waits on the condition itself (a stream's
//! end, a message on a channel) with a deadline.

mod conformance_server;
mod cursor;
mod demo;
mod fake;
mod http;
mod real;
