//! `serve --socket`: the long-lived server of a data dir on the Unix socket
//! [`SOCKET_FILE`] inside it, which `taskstream connect` relays to.
//!
//! Each accepted socket is one connection of the [`Process`] (its own streams, limits, era and
//! principal), served by a thread that reads lines exactly as the stdio loop does. A socket
//! begins with one hello line each way ([`hello`]): the client's version and principal, then the
//! server's version and pid; a version mismatch is refused there, before any MCP message.
//!
//! Safety of the socket: it is bound only once the store's `LOCK` is held (so a socket file
//! found then is stale and is replaced), it is created 0600 in the owner-only data dir, and a
//! peer whose uid (`SO_PEERCRED`) is not the server's is refused.
//!
//! The server exits by itself after `--idle-exit` seconds with no connection and no running
//! task, and on SIGTERM / SIGINT: it removes the socket, ends every connection (their clients
//! see the socket close), and stops the process as at any stop.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::engine::Connection;
use crate::error::ServeError;
use crate::log::log;
use crate::process::Process;

/// The socket's file name inside the data dir.
pub const SOCKET_FILE: &str = "taskstream.sock";
/// The background server's log file inside the data dir (written by `taskstream connect`).
pub const LOG_FILE: &str = "server.log";
/// The version of the hello exchange (the member `taskstream-relay` of each hello line).
pub const RELAY_PROTOCOL: u64 = 1;
/// The version both ends compare: a server answers only a client of its own version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The longest hello line read.
pub const MAX_HELLO_BYTES: usize = 4096;
/// How long a peer may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the idle and storage checks run.
const TICK: Duration = Duration::from_millis(200);
/// The longest path a Unix socket address holds (`sun_path`, less its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The hello lines of the socket.
pub mod hello {
    use serde_json::{json, Value};

    use super::{RELAY_PROTOCOL, VERSION};

    /// The client's hello: its version and the principal it acts as.
    #[must_use]
    pub fn client(principal: &str) -> String {
        json!({"taskstream-relay": RELAY_PROTOCOL, "version": VERSION, "principal": principal})
            .to_string()
    }

    /// The hello that asks the server to stop (`taskstream connect --stop`); honoured whatever
    /// the versions, so that a server of another version can be stopped.
    #[must_use]
    pub fn stop() -> String {
        json!({"taskstream-relay": RELAY_PROTOCOL, "version": VERSION, "stop": true}).to_string()
    }

    /// The server's hello: its version and pid, and `error` when it refuses the client.
    #[must_use]
    pub fn server(error: Option<&str>) -> String {
        let mut v = json!({"taskstream-relay": RELAY_PROTOCOL, "version": VERSION,
                           "pid": std::process::id()});
        if let Some(e) = error {
            v["error"] = Value::String(e.to_owned());
        }
        v.to_string()
    }

    /// The version in a hello line, if it is one.
    #[must_use]
    pub fn version(v: &Value) -> Option<&str> {
        if v.get("taskstream-relay").and_then(Value::as_u64) != Some(RELAY_PROTOCOL) {
            return None;
        }
        v.get("version").and_then(Value::as_str)
    }
}

/// Reads one line of at most [`MAX_HELLO_BYTES`] (without its newline).
///
/// # Errors
/// A read error, the end of the stream, or a line too long.
pub fn read_hello(r: &mut impl BufRead) -> std::io::Result<Value> {
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_HELLO_BYTES).unwrap_or(u64::MAX);
    r.take(limit + 1).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "no hello line",
        ));
    }
    serde_json::from_slice(&line)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "the hello is not JSON"))
}

/// The path of the socket of `data_dir`.
#[must_use]
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET_FILE)
}

/// Live connections: their sockets (to end them at shutdown) and their count.
#[derive(Default)]
struct Conns {
    open: Mutex<Vec<(u64, UnixStream)>>,
    count: AtomicUsize,
    /// Set when the server stops: a hello not yet answered is not answered, so its client
    /// tries again (and starts the next server).
    stopping: AtomicBool,
    /// A client asked the server to stop.
    stop: tokio::sync::Notify,
}

/// Serves `process` on the Unix socket of `data_dir` until SIGTERM / SIGINT, `idle_exit`
/// without connections and running tasks (`None`: never), or storage failing (then the
/// process exits 74 once every client was told, as on stdio). The caller holds the store, so
/// the data dir's `LOCK` is held.
///
/// # Errors
/// [`ServeError::Http`] (a message) if the socket cannot be bound or the runtime not started.
pub fn serve_socket(
    process: Arc<Process>,
    data_dir: &Path,
    idle_exit: Option<Duration>,
) -> Result<(), ServeError> {
    let fail = ServeError::Http;
    let path = socket_path(data_dir);
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(fail(format!(
            "the socket path {} is longer than a Unix socket address holds ({MAX_SOCKET_PATH} \
             bytes); use a shorter --data-dir",
            path.display()
        )));
    }
    replace_stale(&path).map_err(fail)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(format!("starting the runtime: {e}")))?;
    let conns = Arc::new(Conns::default());
    let threads = Mutex::new(Vec::new());
    let result = runtime.block_on(async {
        let listener = std::os::unix::net::UnixListener::bind(&path)
            .map_err(|e| fail(format!("binding {}: {e}", path.display())))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail(format!("chmod {}: {e}", path.display())))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
        let listener = tokio::net::UnixListener::from_std(listener)
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
        let signal = crate::signal::shutdown_signal()?;
        tokio::pin!(signal);
        log!(
            Info,
            "listening on unix socket {} (pid {}, idle exit {})",
            path.display(),
            std::process::id(),
            idle_exit.map_or("never".to_owned(), |d| format!("after {} s", d.as_secs()))
        );
        let mut tick = tokio::time::interval(TICK);
        let mut idle_since: Option<Instant> = None;
        loop {
            tokio::select! {
                () = &mut signal => {
                    log!(Info, "signal: shutting down");
                    break;
                }
                () = conns.stop.notified() => {
                    log!(Info, "a client asked the server to stop: shutting down");
                    break;
                }
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        idle_since = None;
                        conns.count.fetch_add(1, Ordering::SeqCst);
                        let handle = accept(stream, &process, &conns);
                        let mut t = threads.lock().unwrap_or_else(PoisonError::into_inner);
                        t.retain(|h: &std::thread::JoinHandle<()>| !h.is_finished());
                        t.extend(handle);
                    }
                    Err(e) => {
                        // Out of file descriptors, say: not a busy loop while it lasts.
                        log!(Warn, "accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                _ = tick.tick() => {
                    if process.store.has_failed() {
                        log!(Error, "storage failed; every client is told; the server stops \
                                     (a new connect recovers the data dir)");
                        // Delivery threads end their streams with the error first.
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        break;
                    }
                    let idle = conns.count.load(Ordering::SeqCst) == 0
                        && process.running("").1 == 0;
                    match (idle, idle_since, idle_exit) {
                        (false, _, _) | (_, _, None) => idle_since = None,
                        (true, None, Some(_)) => idle_since = Some(Instant::now()),
                        (true, Some(since), Some(limit)) if since.elapsed() >= limit => {
                            log!(Info, "idle for {} s: exiting", limit.as_secs());
                            break;
                        }
                        (true, Some(_), Some(_)) => {}
                    }
                }
            }
        }
        conns.stopping.store(true, Ordering::SeqCst);
        // Refuse new connections first (connects then start a new server, which waits for
        // the LOCK this one still holds), then end the open ones.
        drop(listener);
        let _ = std::fs::remove_file(&path);
        Ok(())
    });
    drop(runtime);
    process.begin_shut_down();
    for (_, s) in conns
        .open
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    process.shut_down();
    for t in std::mem::take(&mut *threads.lock().unwrap_or_else(PoisonError::into_inner)) {
        let _ = t.join();
    }
    if process.store.has_failed() {
        std::process::exit(crate::wire::EXIT_STORAGE_FAILED);
    }
    result
}

/// Removes a socket file left by a server that is gone (the caller holds the `LOCK`, so no
/// server serves it); refuses anything else at that path.
fn replace_stale(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
        Ok(m) if m.file_type().is_socket() && m.uid() == rustix::process::geteuid().as_raw() => {
            log!(
                Warn,
                "replacing the socket a server that is gone left ({})",
                path.display()
            );
            std::fs::remove_file(path).map_err(|e| format!("removing {}: {e}", path.display()))
        }
        Ok(_) => Err(format!(
            "{} exists and is not a socket of this user; refusing to replace it",
            path.display()
        )),
    }
}

/// Starts the thread of an accepted socket; `None` (and the count given back) if it cannot.
fn accept(
    stream: tokio::net::UnixStream,
    process: &Arc<Process>,
    conns: &Arc<Conns>,
) -> Option<std::thread::JoinHandle<()>> {
    let give_back = || {
        conns.count.fetch_sub(1, Ordering::SeqCst);
    };
    let Ok(stream) = stream.into_std().and_then(|s| {
        s.set_nonblocking(false)?;
        Ok(s)
    }) else {
        give_back();
        return None;
    };
    let spawned = std::thread::Builder::new().name("socket".into()).spawn({
        let process = Arc::clone(process);
        let conns = Arc::clone(conns);
        move || {
            serve_one(stream, &process, &conns);
            conns.count.fetch_sub(1, Ordering::SeqCst);
        }
    });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            log!(Error, "cannot start a connection's thread: {e}");
            give_back();
            None
        }
    }
}

/// One socket: the peer check, the hello, then the MCP connection until the socket ends.
fn serve_one(stream: UnixStream, process: &Arc<Process>, conns: &Conns) {
    let me = rustix::process::geteuid().as_raw();
    match rustix::net::sockopt::socket_peercred(&stream) {
        Ok(cred) if cred.uid.as_raw() == me => {}
        Ok(cred) => {
            log!(
                Warn,
                "refused a connection of uid {} (this server is uid {me})",
                cred.uid.as_raw()
            );
            return;
        }
        Err(e) => {
            log!(Warn, "refused a connection whose peer is unknown: {e}");
            return;
        }
    }
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let Ok(closer) = stream.try_clone() else {
        return;
    };
    let _ = stream.set_read_timeout(Some(HELLO_TIMEOUT));
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let principal = match client_hello(&mut reader) {
        Ok(Hello::Connect(p)) => p,
        Ok(Hello::Stop) => {
            let mut w = &write_half;
            let _ = writeln!(w, "{}", hello::server(None));
            conns.stop.notify_one();
            return;
        }
        Err(refusal) => {
            log!(Warn, "refused a connection: {refusal}");
            let mut w = &write_half;
            let _ = writeln!(w, "{}", hello::server(Some(&refusal)));
            return;
        }
    };
    let _ = reader.get_ref().set_read_timeout(None);
    let key = {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
    // Registered before the hello is answered, so a stop that begins after it ends this
    // connection too; once the stop began, the hello is not answered (the client retries).
    {
        let mut open = conns.open.lock().unwrap_or_else(PoisonError::into_inner);
        if conns.stopping.load(Ordering::SeqCst) {
            return;
        }
        open.push((key, closer));
    }
    let forget = || {
        let mut open = conns.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = open.iter().position(|(k, _)| *k == key) {
            let (_, s) = open.swap_remove(i);
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    };
    {
        let mut w = &write_half;
        if writeln!(w, "{}", hello::server(None)).is_err() {
            forget();
            return;
        }
    }
    let mut conn = match Connection::attach(process, &principal, Box::new(write_half)) {
        Ok(c) => c,
        Err(e) => {
            log!(Error, "cannot serve a connection: {e}");
            forget();
            return;
        }
    };
    log!(Info, "connection {key} opened (principal {principal:?})");
    let read = conn.read_from(reader);
    if let Err(e) = read {
        log!(Debug, "connection {key}: {e}");
    }
    conn.close();
    forget();
    log!(Info, "connection {key} closed");
}

/// What a client's hello asks for.
#[derive(Debug, PartialEq, Eq)]
enum Hello {
    /// A connection acting as this principal.
    Connect(String),
    /// That the server stop.
    Stop,
}

/// Reads and checks the client's hello; what it asks, or why it is refused.
fn client_hello(r: &mut impl BufRead) -> Result<Hello, String> {
    let v = read_hello(r).map_err(|e| format!("no valid hello: {e}"))?;
    let Some(version) = hello::version(&v) else {
        return Err("the peer is not a taskstream connect of this relay protocol".into());
    };
    if v.get("stop") == Some(&Value::Bool(true)) {
        return Ok(Hello::Stop);
    }
    if version != VERSION {
        let shown: String = version.chars().take(40).collect();
        return Err(format!(
            "version mismatch: the client is taskstream {shown}, this server is taskstream \
             {VERSION}"
        ));
    }
    match v.get("principal").and_then(Value::as_str) {
        Some(p) if !p.is_empty() && p.len() <= 256 && !p.chars().any(char::is_control) => {
            Ok(Hello::Connect(p.to_owned()))
        }
        _ => Err("the hello names no valid principal".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hello_lines_round_trip_and_mismatches_are_refused() {
        let line = hello::client("alice");
        let mut r = std::io::Cursor::new(format!("{line}\n").into_bytes());
        assert_eq!(client_hello(&mut r), Ok(Hello::Connect("alice".to_owned())));
        let stop = json!({"taskstream-relay": RELAY_PROTOCOL, "version": "0.0.0-other",
                          "stop": true});
        let mut r = std::io::Cursor::new(format!("{stop}\n").into_bytes());
        assert_eq!(
            client_hello(&mut r),
            Ok(Hello::Stop),
            "a stop whatever the version"
        );
        let other = json!({"taskstream-relay": RELAY_PROTOCOL, "version": "0.0.0-other",
                           "principal": "alice"});
        let mut r = std::io::Cursor::new(format!("{other}\n").into_bytes());
        let refused = client_hello(&mut r).unwrap_err();
        assert!(refused.contains("version mismatch"), "{refused}");
        let mut r = std::io::Cursor::new(b"{\"jsonrpc\":\"2.0\"}\n".to_vec());
        assert!(client_hello(&mut r).is_err());
        let mut r = std::io::Cursor::new(vec![b'x'; MAX_HELLO_BYTES + 10]);
        assert!(client_hello(&mut r).is_err());
        let server: Value = serde_json::from_str(&hello::server(None)).unwrap();
        assert_eq!(hello::version(&server), Some(VERSION));
    }
}
