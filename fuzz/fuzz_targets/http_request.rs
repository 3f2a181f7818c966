//! `serve --http` against arbitrary bytes on its socket: a real server (in memory, small
//! limits, short timeouts) runs in this process, and each input is sent as the start of a
//! connection, after a valid request line and `Host` header so that the input reaches the
//! headers, the body framing (`Content-Length`, chunked, bad chunk sizes), the body's JSON and
//! the protocol checks (`MCP-Protocol-Version`, `Mcp-Method`) rather than stopping at the
//! request line. Any panic in any thread of the server aborts (a crash for the fuzzer), and
//! every 64 inputs a ping must still be answered.
#![no_main]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use taskstream_server::config::{HttpConfig, HttpLimits, ServeConfig};
use taskstream_server::ServerBuilder;

/// The server's port, started once.
fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        std::env::set_var("TASKSTREAM_LOG", "off");
        // A panic anywhere (a connection's task included, which tokio would catch) is a crash.
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default(info);
            std::process::abort();
        }));
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = free.local_addr().expect("its address").port();
        drop(free);
        let mut limits = HttpLimits::default();
        limits.header_timeout = Duration::from_secs(1);
        limits.body_timeout = Duration::from_secs(1);
        limits.idle_timeout = Duration::from_secs(1);
        limits.write_stall_timeout = Duration::from_secs(1);
        limits.max_body_memory_bytes = 1 << 20;
        let mut config = ServeConfig::in_memory();
        config.http = Some(HttpConfig {
            bind: format!("127.0.0.1:{port}"),
            auth_token_file: None,
            allowed_origins: Vec::new(),
            max_body_bytes: 64 * 1024,
            max_sessions: 64,
            limits,
            oauth: None,
            drain: Duration::ZERO,
            status_page: true,
        });
        std::thread::spawn(move || {
            let served = ServerBuilder::new("fuzz", "0")
                .builtin_tools()
                .config(config)
                .serve();
            panic!("the server stopped: {served:?}");
        });
        // Up (bounded): the listener accepts.
        for _ in 0..500 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return port;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the server did not start");
    })
}

/// Sends `bytes` on a fresh connection and reads what comes back (bounded). With `half_close`
/// the write side is shut after sending, so that an incomplete request ends at once instead of
/// at the head's deadline (the server then closes without an answer: it does not serve
/// half-closed requests).
fn exchange(port: u16, bytes: &[u8], half_close: bool) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    // The server may answer and close before reading everything.
    let _ = s.write_all(bytes);
    if half_close {
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = s.take(1 << 20).read_to_end(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let port = port();
    let mut request = format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").into_bytes();
    request.extend_from_slice(data);
    let answer = exchange(port, &request, true);
    // Whatever came back is HTTP/1.1 (or nothing, for a connection closed at a bad head).
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 "),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    static RUNS: AtomicU64 = AtomicU64::new(0);
    if RUNS.fetch_add(1, Ordering::Relaxed) % 64 == 0 {
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
        let canary = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n",
            ping.len()
        );
        let mut bytes = canary.into_bytes();
        bytes.extend_from_slice(ping);
        let answer = exchange(port, &bytes, false);
        assert!(
            answer.starts_with(b"HTTP/1.1 200"),
            "the server stopped answering: {:?}",
            String::from_utf8_lossy(&answer)
        );
    }
});
