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
//!               [--retain-from-checkpoint] [--list-faults] [--list-client-faults]
//! ```

mod fault;
mod proxy;
mod server;
mod task;

pub use proxy::KillOnDisconnect;

use std::ffi::OsString;
use std::io::{self, BufRead};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::builder::RangedU64ValueParser;
use fault::{Faults, CLIENT_FAULTS, FAULTS};
use server::{FaultyServer, Options};

/// The faulty server's usage text.
pub const USAGE: &str = "\
Usage: faulty-server [--fault NAME]... [--max-events N] [--max-age-ms N] [--max-streams N]
                     [--retain-from-checkpoint] [--list-faults] [--list-client-faults]

An in-memory MCP server on stdin/stdout, in both eras, with one tool,
emit {count, interval_ms?, payload_bytes?, fail_at?, checkpoint_every?}, that runs as a task. Without --fault it
keeps SEP-2694; each --fault NAME (repeatable, or comma-separated) breaks it in one way.
  --fault NAME          a server fault (--list-faults: what the conformance suite must catch)
                        or a client fault (--list-client-faults: what a client must survive)
  --max-events N        events retained per task, 1..=1000000000 (default 10000)
  --max-age-ms N        drops events older than N milliseconds, 1 or more (default: kept)
  --max-streams N       concurrent streams per connection, 1..=1000000 (default 8)
  --retain-from-checkpoint
                        keeps each task's events from its latest checkpoint on, and
                        advertises experimental[\"dev.taskstream/checkpoints\"]
";

/// Runs the faulty server on stdin/stdout with the command-line `args` (without the program
/// name) until stdin closes; `name` is how messages call it. Answers the exit status: 0, or 2
/// on a usage error.
pub fn main_with_args<I, T>(name: &str, args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let opts = match parse(name, args) {
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
    let mut server = FaultyServer::new(opts, io::stdout().lock(), seed);
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

/// The command line, as clap reads it; [`USAGE`] is its help, and [`Options`]'s defaults are
/// written here only.
#[derive(clap::Parser, Debug)]
#[command(
    name = "faulty-server",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Cli {
    #[arg(short, long)]
    help: bool,
    /// Repeatable, or comma-separated.
    #[arg(long, value_delimiter = ',')]
    fault: Vec<String>,
    #[arg(long, default_value_t = 10_000,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=1_000_000_000))]
    max_events: usize,
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_age_ms: Option<u64>,
    #[arg(long, default_value_t = 8,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    max_streams: usize,
    #[arg(long)]
    retain_from_checkpoint: bool,
    #[arg(long)]
    list_faults: bool,
    #[arg(long)]
    list_client_faults: bool,
}

/// The options `args` ask for, or `None` when they asked for a listing or the help, which is
/// then printed.
///
/// # Errors
/// clap's message for a bad argument (naming the allowed range), or an unknown fault's.
fn parse<I, T>(name: &str, args: I) -> Result<Option<Options>, String>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    use clap::Parser as _;
    let argv = std::iter::once(OsString::from(name)).chain(args.into_iter().map(Into::into));
    let cli = Cli::try_parse_from(argv).map_err(|e| crate::cli::clap_message(&e))?;
    if cli.help {
        print!("{}", USAGE.replace("faulty-server", name));
        return Ok(None);
    }
    if cli.list_faults {
        for (name, _, what) in FAULTS {
            println!("{name:<26} {what}");
        }
        return Ok(None);
    }
    if cli.list_client_faults {
        for (name, _, rules, what) in CLIENT_FAULTS {
            println!("{name:<20} {rules:<13} {what}");
        }
        return Ok(None);
    }
    let mut faults = Faults::default();
    for fault in &cli.fault {
        faults.add(fault.trim())?;
    }
    Ok(Some(Options {
        faults,
        max_events: cli.max_events,
        max_age: cli.max_age_ms.map(Duration::from_millis),
        max_streams: cli.max_streams,
        retain_from_checkpoint: cli.retain_from_checkpoint,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(words: &[&str]) -> Result<Option<Options>, String> {
        parse("faulty-server", words)
    }

    #[test]
    fn defaults_ranges_and_faults() {
        let Ok(Some(o)) = parsed(&[]) else {
            panic!("no options")
        };
        assert_eq!((o.max_events, o.max_age, o.max_streams), (10_000, None, 8));
        let Ok(Some(o)) = parsed(&[
            "--max-events",
            "5",
            "--max-age-ms=200",
            "--max-streams",
            "2",
        ]) else {
            panic!("no options")
        };
        assert_eq!(o.max_events, 5);
        assert_eq!(o.max_age, Some(Duration::from_millis(200)));
        assert_eq!(o.max_streams, 2);
        assert!(!o.retain_from_checkpoint);
        let Ok(Some(o)) = parsed(&["--retain-from-checkpoint"]) else {
            panic!("no options")
        };
        assert!(o.retain_from_checkpoint);
        let Err(e) = parsed(&["--max-events", "0"]) else {
            panic!("0 events accepted")
        };
        assert!(e.contains("1..=1000000000"), "{e}");
        let Err(e) = parsed(&["--max-streams", "many"]) else {
            panic!("a word accepted")
        };
        assert!(e.contains("--max-streams"), "{e}");
        let Err(e) = parsed(&["--fault", "no-such-fault"]) else {
            panic!("an unknown fault accepted")
        };
        assert!(e.contains("unknown fault"), "{e}");
        assert!(parsed(&["--frobnicate"]).is_err());
    }
}
