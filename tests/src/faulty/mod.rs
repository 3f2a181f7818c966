//! The faulty server: a small in-memory MCP server on stdio that implements just what the
//! conformance suite uses, in both eras (`server/discover`, `initialize`, `tools/list`,
//! `tools/call` of `emit` as a task, `tasks/get`, `tasks/cancel`, `tasks/stream` with replay,
//! live delivery, cancellation and `events_gone`), correctly, unless told with `--fault NAME`
//! to break one rule. The suite's own tests run the suite against it, once per fault (the
//! `faulty-server` binary); client authors run it as `taskstream conformance-server`, whose
//! client faults put a client's resume logic to the test.
//!
//! ```text
//! faulty-server [--fault NAME]... [--max-events N] [--max-age-ms N] [--max-streams N]
//!               [--list-faults] [--list-client-faults]
//! ```

mod fault;
mod proxy;
mod server;
mod task;

pub use proxy::KillOnDisconnect;

use std::io::{self, BufRead};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fault::{Faults, CLIENT_FAULTS, FAULTS};
use server::{Options, Server};

/// The faulty server's usage text.
pub const USAGE: &str = "\
Usage: faulty-server [--fault NAME]... [--max-events N] [--max-age-ms N] [--max-streams N]
                     [--list-faults] [--list-client-faults]

An in-memory MCP server on stdin/stdout, in both eras, with one tool,
emit {count, interval_ms?, payload_bytes?, fail_at?}, that runs as a task. Without --fault it
keeps SEP-2694; each --fault NAME (repeatable, or comma-separated) breaks it in one way.
  --fault NAME          a server fault (--list-faults: what the conformance suite must catch)
                        or a client fault (--list-client-faults: what a client must survive)
  --max-events N        events retained per task (default 10000)
  --max-age-ms N        drops events older than N milliseconds (default: kept)
  --max-streams N       concurrent streams per connection (default 8)
";

/// Runs the faulty server on stdin/stdout with the command-line `args` (without the program
/// name) until stdin closes; `name` is how messages call it. Answers the exit status: 0, or 2
/// on a usage error.
pub fn main_with_args(name: &str, args: &[String]) -> i32 {
    let opts = match parse(name, args.iter().cloned()) {
        Ok(Some(opts)) => opts,
        Ok(None) => return 0,
        Err(message) => {
            eprintln!(
                "{name}: {message}\n\n{}",
                USAGE.replace("faulty-server", name)
            );
            return 2;
        }
    };
    let (tx, rx) = mpsc::channel::<String>();
    thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            let Ok(line) = line else {
                break;
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
        ^ u64::from(std::process::id());
    let mut server = Server::new(opts, io::stdout().lock(), seed);
    loop {
        let line = match server.next_due() {
            Some(due) => rx.recv_timeout(due.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match line {
            Ok(line) => server.handle_line(&line),
            Err(RecvTimeoutError::Timeout) => {}
            // stdin closed: exit, as MCP servers on stdio should.
            Err(RecvTimeoutError::Disconnected) => return 0,
        }
        server.fire_timers(Instant::now());
    }
}

fn parse(name: &str, mut args: impl Iterator<Item = String>) -> Result<Option<Options>, String> {
    let mut opts = Options {
        faults: Faults::default(),
        max_events: 10_000,
        max_age: None,
        max_streams: 8,
    };
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--fault" => {
                for name in value("--fault")?.split(',') {
                    opts.faults.add(name.trim())?;
                }
            }
            "--max-events" => {
                opts.max_events = value("--max-events")?
                    .parse()
                    .map_err(|_| "--max-events needs a number")?;
            }
            "--max-age-ms" => {
                let ms: u64 = value("--max-age-ms")?
                    .parse()
                    .map_err(|_| "--max-age-ms needs a number")?;
                opts.max_age = Some(Duration::from_millis(ms));
            }
            "--max-streams" => {
                opts.max_streams = value("--max-streams")?
                    .parse()
                    .map_err(|_| "--max-streams needs a number")?;
            }
            "--list-faults" => {
                for (name, _, what) in FAULTS {
                    println!("{name:<26} {what}");
                }
                return Ok(None);
            }
            "--list-client-faults" => {
                for (name, _, rules, what) in CLIENT_FAULTS {
                    println!("{name:<20} {rules:<13} {what}");
                }
                return Ok(None);
            }
            "-h" | "--help" => {
                print!("{}", USAGE.replace("faulty-server", name));
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(opts))
}
