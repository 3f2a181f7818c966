//! The whole server's message handling, in process: arbitrary sequences of lines go to a
//! `taskstream_server::Connection` (in memory, small limits) and must produce no panic (in
//! any of its threads), only well-formed JSON-RPC output, and every request answered exactly
//! once. The driver and its checks live with the hostile tests
//! (`std-host/tests/hostile/drive.rs`), which also replay this target's corpus.
#![no_main]

#[path = "../../std-host/tests/hostile/drive.rs"]
#[allow(dead_code)]
mod drive;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The server logs at `info` to stderr; the fuzzer's own output is what matters here.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::env::set_var("TASKSTREAM_LOG", "off"));
    if let Err(broken) = drive::run(data) {
        panic!("{broken}\ninput: {:?}", String::from_utf8_lossy(data));
    }
});
