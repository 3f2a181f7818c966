//! `taskstream connect`: a stdio MCP server for desktop hosts that relays every message, both
//! ways and unchanged, to the long-lived server of a data dir (`serve --socket`), starting one
//! in the background when none runs.
//!
//! - The socket is trusted only if it is a socket owned by this user with no group or other
//!   permission bits, in a data dir owned by this user that no one else may write.
//! - A socket that refuses connections was left by a server that is gone: a new server is
//!   started, which (holding the data dir's `LOCK`) replaces it. Two `connect`s racing both
//!   start one; the `LOCK` lets one of them serve, the other exits, and both relay to it.
//! - After connecting, one hello line each way compares versions: a mismatch ends `connect`
//!   with a message naming both versions and the server's pid.
//! - While relaying, the ids of requests sent and not yet answered are kept (lines are read
//!   only to learn ids; bytes pass unchanged). If the server goes away before stdin ended,
//!   each of them is answered with an error (a stream in flight ends with it) and `connect`
//!   exits 1, so the host restarts it, which starts a fresh server that recovers the data dir.
//!
//! Its own logs go to stderr; stdout carries only MCP messages.
//!
//! Why one file past ~600 lines: `taskstream connect` is one program, a relay whose parts
//! (finding or starting the background server, the hello, the two pumps, the restart on a
//! lost server) share its stop flag and its error paths.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::config::{self, ConfigError, ServeArgs, ServeConfig};
use crate::socket::{self, hello, LOG_FILE, VERSION};

/// The usage text of `taskstream connect`.
pub const CONNECT_HELP: &str = "\
taskstream connect: a stdio MCP server for desktop hosts. It relays every message to the
long-lived server of the data dir (on the Unix socket taskstream.sock inside it), starting one
in the background when none runs; tasks outlive this process, and a new connect resumes them.

USAGE:
    taskstream connect [--data-dir DIR] [serve options]

The serve options (see `taskstream serve --help`) apply to the background server when this
connect starts it; --principal (or TASKSTREAM_PRINCIPAL) applies to this connection always.
--idle-exit SECS: the background server exits after SECS seconds with no connection and no
running task [default: 300]. Its log is server.log in the data dir.
--stop: stop the data dir's background server now (tasks still running then end as at any
stop: `failed` at the next start) and wait until it is gone; SIGTERM to its pid (in its log)
does the same.
";

/// How long `connect` waits for a background server to accept.
const START_WAIT: Duration = Duration::from_secs(60);
/// A rotated log keeps at most this much before it is moved to `server.log.1`.
const MAX_LOG_BYTES: u64 = 4 * 1024 * 1024;
/// The largest line the relay reads for its ids (longer lines pass, unread).
const MAX_TRACKED_LINE: usize = 1 << 20;

macro_rules! say {
    ($($arg:tt)*) => { eprintln!("taskstream connect: {}", format_args!($($arg)*)) };
}

/// The command line of `taskstream connect`: the serve options, read as the background server
/// will read them (with `--socket`), and `--stop`. [`CONNECT_HELP`] is its help.
#[derive(clap::Parser, Debug)]
#[command(
    name = "taskstream connect",
    disable_version_flag = true,
    args_override_self = true
)]
struct ConnectCli {
    #[command(flatten)]
    serve: ServeArgs,
    /// Stop the data dir's background server and wait until it is gone
    #[arg(long)]
    stop: bool,
}

/// What the command line asks for: the configuration and whether to stop, or `None` for the
/// help.
///
/// # Errors
/// [`ConfigError`] as for `serve`.
fn parse(args: &[OsString]) -> Result<Option<(ServeConfig, bool)>, ConfigError> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let argv = std::iter::once(OsString::from("taskstream connect"))
        .chain(args.iter().cloned())
        .chain([OsString::from("--socket")]);
    let parsed = ConnectCli::command()
        .try_get_matches_from(argv)
        .and_then(|m| ConnectCli::from_arg_matches(&m).map(|cli| (m, cli)));
    match parsed {
        Ok((matches, cli)) => {
            config::check_requirements(&matches)?;
            let config = cli.serve.resolve(|k| std::env::var_os(k))?;
            Ok(Some((config, cli.stop)))
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Ok(None),
        Err(e) => Err(config::usage(&e)),
    }
}

/// `taskstream connect [serve options]`.
pub fn main(args: impl Iterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.collect();
    // Before clap, which would report them as conflicting with the `--socket` it adds.
    if args
        .iter()
        .any(|a| a == "--in-memory" || a == "--http" || a.to_string_lossy().starts_with("--http="))
    {
        say!("connect relays to the server of a data dir: --in-memory and --http are options of serve");
        return ExitCode::from(2);
    }
    let (config, stop_asked) = match parse(&args) {
        Ok(None) => {
            print!("{CONNECT_HELP}");
            return ExitCode::SUCCESS;
        }
        Ok(Some(parsed)) => parsed,
        Err(e) => {
            say!("{e}\n\n{CONNECT_HELP}");
            return ExitCode::from(2);
        }
    };
    if config.data_dir.is_none() {
        say!("connect needs a data dir\n\n{CONNECT_HELP}");
        return ExitCode::from(2);
    }
    let Some(dir) = config
        .data_dir
        .as_deref()
        .and_then(|d| std::path::absolute(d).ok())
    else {
        say!("the data dir has no absolute path");
        return ExitCode::from(2);
    };
    if stop_asked {
        return stop(&dir);
    }
    let mut server_args = vec![
        OsString::from("serve"),
        "--socket".into(),
        "--detach".into(),
        "--data-dir".into(),
        dir.clone().into(),
    ];
    server_args.extend(without_data_dir(&args));
    match attach(&dir, &config.principal, &server_args) {
        Ok(stream) => relay(stream, &dir),
        Err(e) => {
            say!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `connect --stop`: asks the data dir's background server to stop (as SIGTERM would) and
/// waits until it is gone.
fn stop(dir: &Path) -> ExitCode {
    let path = socket::socket_path(dir);
    if let Err(e) = check_socket(dir, &path) {
        say!("{e}");
        return ExitCode::FAILURE;
    }
    let stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            say!("no background server runs for {}", dir.display());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            say!("connecting to {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let mut w = &stream;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let answer = writeln!(w, "{}", hello::stop())
        .and_then(|()| socket::read_hello(&mut BufReader::with_capacity(1, &stream)));
    let pid = match answer {
        Ok(v) => v.get("pid").and_then(Value::as_u64).unwrap_or(0),
        Err(_) => {
            say!(
                "no background server runs for {} (it was stopping)",
                dir.display()
            );
            return ExitCode::SUCCESS;
        }
    };
    // Gone: no such process, or one that exited and awaits its parent (a zombie).
    let gone = || {
        let exists = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
            st.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        });
        !exists || zombie
    };
    let deadline = Instant::now() + START_WAIT;
    while !gone() {
        if Instant::now() >= deadline {
            say!("the background server (pid {pid}) is still stopping");
            return ExitCode::FAILURE;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    say!(
        "stopped the background server of {} (pid {pid})",
        dir.display()
    );
    ExitCode::SUCCESS
}

/// `args` without `--data-dir DIR` / `--data-dir=DIR`.
fn without_data_dir(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if a == "--data-dir" {
            skip = true;
        } else if !a.to_string_lossy().starts_with("--data-dir=") {
            out.push(a.clone());
        }
    }
    out
}

/// Connects to the data dir's server (starting one if needed) and exchanges hellos.
fn attach(dir: &Path, principal: &str, server_args: &[OsString]) -> Result<UnixStream, String> {
    let path = socket::socket_path(dir);
    if path.as_os_str().len() > socket::MAX_SOCKET_PATH {
        return Err(format!(
            "the socket path {} is longer than a Unix socket address holds ({} bytes); use a \
             shorter --data-dir",
            path.display(),
            socket::MAX_SOCKET_PATH
        ));
    }
    let deadline = Instant::now() + START_WAIT;
    let mut child: Option<Child> = None;
    let mut next_start = Instant::now();
    let mut backoff = Duration::from_millis(50);
    let mut told = false;
    loop {
        check_socket(dir, &path)?;
        match UnixStream::connect(&path) {
            Ok(stream) => match handshake(stream, principal, dir) {
                Ok(s) => {
                    if let Some(c) = child.take() {
                        reap(c);
                    }
                    return Ok(s);
                }
                Err(Handshake::Refused(m)) => return Err(m),
                // The server is stopping: start or wait for the next one.
                Err(Handshake::Gone) => {}
            },
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => return Err(format!("connecting to {}: {e}", path.display())),
        }
        if Instant::now() >= deadline {
            let log = std::fs::read_to_string(dir.join(LOG_FILE)).unwrap_or_default();
            let last = log.lines().last().unwrap_or("(empty)");
            return Err(format!(
                "no background server accepted on {} within {} s; the last line of its log \
                 ({}): {last}",
                path.display(),
                START_WAIT.as_secs(),
                dir.join(LOG_FILE).display()
            ));
        }
        let exited = match child.as_mut() {
            None => true,
            Some(c) => !matches!(c.try_wait(), Ok(None)),
        };
        if exited && Instant::now() >= next_start {
            // A server that exited at once found the LOCK held (another one is starting or
            // stopping): try again, less often.
            if child.take().is_some() {
                next_start = Instant::now() + backoff;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
            let c = start_server(dir, server_args)?;
            if !told {
                say!(
                    "started a background server (pid {}); its log is {}",
                    c.id(),
                    dir.join(LOG_FILE).display()
                );
                told = true;
            }
            child = Some(c);
        }
        // A retry interval while the server starts (not a wait for a condition in a test).
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Refuses a socket (or data dir) that another user could have put there or could use.
fn check_socket(dir: &Path, path: &Path) -> Result<(), String> {
    let me = rustix::process::geteuid().as_raw();
    match std::fs::metadata(dir) {
        Ok(m) if m.uid() != me || m.mode() & 0o022 != 0 => {
            return Err(format!(
                "refusing the data dir {}: it is not owned by this user or others may write it",
                dir.display()
            ));
        }
        _ => {}
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_socket() => {
            Err(format!("refusing {}: it is not a socket", path.display()))
        }
        Ok(m) if m.uid() != me => Err(format!(
            "refusing {}: it is owned by uid {}, not by this user",
            path.display(),
            m.uid()
        )),
        Ok(m) if m.mode() & 0o077 != 0 => Err(format!(
            "refusing {}: its mode {:o} lets others use it (expected 600)",
            path.display(),
            m.mode() & 0o777
        )),
        _ => Ok(()),
    }
}

/// Starts `taskstream serve --socket --detach ...` with no terminal and its output in the log.
fn start_server(dir: &Path, server_args: &[OsString]) -> Result<Child, String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let log_path = dir.join(LOG_FILE);
    if std::fs::metadata(&log_path).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
        let _ = std::fs::rename(&log_path, dir.join(format!("{LOG_FILE}.1")));
    }
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|e| format!("opening {}: {e}", log_path.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log_path.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    Command::new(exe)
        .args(server_args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .current_dir("/")
        .spawn()
        .map_err(|e| format!("starting the background server: {e}"))
}

/// Waits for the background server in a thread of its own, so it leaves no zombie while this
/// process lives (after, init reaps it).
fn reap(mut child: Child) {
    let _ = std::thread::Builder::new()
        .name("reap".into())
        .spawn(move || {
            let _ = child.wait();
        });
}

enum Handshake {
    /// The server refused this client or is not one this version can speak to.
    Refused(String),
    /// The socket closed during the hello (a server that is stopping).
    Gone,
}

fn handshake(stream: UnixStream, principal: &str, dir: &Path) -> Result<UnixStream, Handshake> {
    let mut w = &stream;
    if writeln!(w, "{}", hello::client(principal)).is_err() {
        return Err(Handshake::Gone);
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(clone) = stream.try_clone() else {
        return Err(Handshake::Gone);
    };
    // Unbuffered beyond the hello: read byte by byte until its newline.
    let mut r = BufReader::with_capacity(1, clone);
    let v = match socket::read_hello(&mut r) {
        Ok(v) => v,
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            return Err(Handshake::Refused(format!(
                "{} is not a taskstream server's socket (its hello is not JSON)",
                socket::socket_path(dir).display()
            )));
        }
        Err(_) => return Err(Handshake::Gone),
    };
    let pid = v.get("pid").and_then(Value::as_u64).unwrap_or(0);
    match hello::version(&v) {
        None => Err(Handshake::Refused(format!(
            "{} is not a taskstream server's socket",
            socket::socket_path(dir).display()
        ))),
        Some(theirs) if theirs != VERSION => {
            let theirs: String = theirs.chars().take(40).collect();
            Err(Handshake::Refused(format!(
                "version mismatch: the background server of {} (pid {pid}) is taskstream \
                 {theirs}, this connect is taskstream {VERSION}; stop it (`taskstream connect \
                 --stop --data-dir {}`, or kill {pid}; its running tasks end as at any stop) \
                 and connect again",
                dir.display(),
                dir.display()
            )))
        }
        Some(_) => match v.get("error").and_then(Value::as_str) {
            Some(e) => Err(Handshake::Refused(format!(
                "the background server (pid {pid}) refused this connection: {e}"
            ))),
            None => {
                let _ = stream.set_read_timeout(None);
                Ok(stream)
            }
        },
    }
}

/// Request ids sent and not yet answered, as their JSON text.
#[derive(Default)]
struct UnansweredIds(Mutex<HashSet<String>>);

impl UnansweredIds {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A line the client sent.
    fn sent(&self, line: &[u8]) {
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let Some(method) = m.get("method").and_then(Value::as_str) else {
            return;
        };
        if let Some(id) = m.get("id") {
            self.set().insert(id.to_string());
        } else if method == "notifications/cancelled" {
            // A cancelled request is never answered (DX-04): not by this relay either.
            if let Some(id) = m.get("params").and_then(|p| p.get("requestId")) {
                self.set().remove(&id.to_string());
            }
        }
    }

    /// A line the server sent.
    fn answered(&self, line: &[u8]) {
        // Only a line with an `"id"` member can answer a request: event notifications (the
        // bulk of the traffic) skip the parse.
        if !line.windows(4).any(|w| w == b"\"id\"") {
            return;
        }
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        if m.contains_key("method") {
            return;
        }
        if let Some(id) = m.get("id") {
            self.set().remove(&id.to_string());
        }
    }
}

/// Splits a byte stream into lines for [`UnansweredIds`]; over-long lines are skipped.
struct Lines {
    buf: Vec<u8>,
    skipping: bool,
}

impl Lines {
    fn new() -> Self {
        Lines {
            buf: Vec::new(),
            skipping: false,
        }
    }

    fn feed(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(&[u8])) {
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            let (head, rest) = chunk.split_at(i);
            if !self.skipping && self.buf.len() + head.len() <= MAX_TRACKED_LINE {
                if self.buf.is_empty() {
                    on_line(head);
                } else {
                    self.buf.extend_from_slice(head);
                    on_line(&self.buf);
                }
            }
            self.buf.clear();
            self.skipping = false;
            chunk = rest.get(1..).unwrap_or_default();
        }
        if !self.skipping {
            if self.buf.len() + chunk.len() > MAX_TRACKED_LINE {
                self.buf.clear();
                self.skipping = true;
            } else {
                self.buf.extend_from_slice(chunk);
            }
        }
    }
}

/// Relays stdin to the socket and the socket to stdout until one side ends.
fn relay(stream: UnixStream, dir: &Path) -> ExitCode {
    let pending = Arc::new(UnansweredIds::default());
    let stdin_done = Arc::new(AtomicBool::new(false));
    let Ok(mut to_server) = stream.try_clone() else {
        say!("cannot use the socket");
        return ExitCode::FAILURE;
    };
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn({
            let pending = Arc::clone(&pending);
            let stdin_done = Arc::clone(&stdin_done);
            move || {
                let mut stdin = io::stdin().lock();
                let mut lines = Lines::new();
                let mut chunk = vec![0u8; 64 * 1024];
                loop {
                    let n = match stdin.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let data = chunk.get(..n).unwrap_or_default();
                    // Ids are recorded before the bytes leave, so an answer never comes first.
                    lines.feed(data, |l| pending.sent(l));
                    if to_server.write_all(data).is_err() {
                        return;
                    }
                }
                stdin_done.store(true, Ordering::SeqCst);
                let _ = to_server.shutdown(std::net::Shutdown::Write);
            }
        })
        .map_or_else(|e| say!("cannot start the relay: {e}"), drop);
    let mut from_server = stream;
    let mut stdout = io::stdout().lock();
    let mut lines = Lines::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let ended = loop {
        let n = match from_server.read(&mut chunk) {
            Ok(0) => break None,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Some(e),
        };
        let data = chunk.get(..n).unwrap_or_default();
        if stdout
            .write_all(data)
            .and_then(|()| stdout.flush())
            .is_err()
        {
            // The host is gone; the server ends this connection when the socket closes.
            return ExitCode::SUCCESS;
        }
        lines.feed(data, |l| pending.answered(l));
    };
    if stdin_done.load(Ordering::SeqCst) && ended.is_none() {
        return ExitCode::SUCCESS;
    }
    match ended {
        Some(e) => say!("the background server's socket failed: {e}"),
        None => say!(
            "the background server closed the connection (stopped, or killed); its log is {}",
            dir.join(LOG_FILE).display()
        ),
    }
    let ids: Vec<String> = pending.set().drain().collect();
    for id in ids {
        let Ok(id) = serde_json::from_str::<Value>(&id) else {
            continue;
        };
        let e = json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32603,
            "message": "The taskstream background server stopped; restart this MCP server to \
                        reconnect (running tasks are recovered)",
        }});
        let _ = writeln!(stdout, "{e}");
    }
    let _ = stdout.flush();
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_ids_follow_requests_answers_and_cancellations() {
        let p = UnansweredIds::default();
        let mut lines = Lines::new();
        let sent = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tasks/stream\"}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/stream\"}\n";
        // Split anywhere: the ids are the same.
        for piece in sent.chunks(7) {
            lines.feed(piece, |l| p.sent(l));
        }
        assert_eq!(p.set().len(), 3);
        lines.feed(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}\n",
            |l| p.sent(l),
        );
        let mut back = Lines::new();
        back.feed(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/event\",\"params\":{\"id\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
            |l| p.answered(l),
        );
        let left: Vec<String> = p.set().iter().cloned().collect();
        assert_eq!(left, vec!["\"s\"".to_owned()]);
    }

    #[test]
    fn over_long_lines_are_skipped_whole() {
        let mut lines = Lines::new();
        let mut seen = Vec::new();
        let long = vec![b'x'; MAX_TRACKED_LINE + 1];
        lines.feed(&long, |l| seen.push(l.len()));
        lines.feed(b"yy\nzz\n", |l| seen.push(l.len()));
        assert_eq!(seen, vec![2]);
    }

    #[test]
    fn data_dir_arguments_are_replaced() {
        let args: Vec<OsString> = ["--data-dir", "a", "--principal", "p", "--data-dir=b"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            without_data_dir(&args),
            vec![OsString::from("--principal"), "p".into()]
        );
    }

    #[test]
    fn the_command_line_is_the_serve_options_with_socket_and_stop() {
        let words = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        let Ok(Some((config, stop))) = parse(&words(&["--stop", "--data-dir", "/d"])) else {
            panic!("--stop refused")
        };
        assert!(stop);
        assert_eq!(config.data_dir.as_deref(), Some(Path::new("/d")));
        let Ok(Some((config, stop))) = parse(&words(&[
            "--data-dir=/d",
            "--idle-exit",
            "5",
            "--principal",
            "p",
        ])) else {
            panic!("serve options refused")
        };
        assert!(!stop);
        assert_eq!(config.socket.map(|s| s.idle_exit_secs), Some(5));
        assert!(matches!(parse(&words(&["--help"])), Ok(None)));
        assert!(parse(&words(&["--data-dir", "/d", "--max-streams", "0"])).is_err());
        assert!(parse(&words(&["--frobnicate"])).is_err());
    }
}
