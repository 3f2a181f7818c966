//! A black-box conformance suite for SEP-2694, "Resumable Task Event Streams", over any stdio
//! MCP server or MCP Streamable HTTP endpoint.
//!
//! The suite starts the server command (or, for a command of one word `http://HOST:PORT/PATH`,
//! connects to that endpoint, `--url`), speaks newline-delimited JSON-RPC to it in the modern
//! (2026-07-28) and the legacy (2025-11-25) era, and reports one verdict per requirement ID of
//! the SEP's checklist that can be observed on the wire (the `CHECKS` table; the traceability
//! file `sep-2694.yaml` beside this crate maps every requirement, testable or not). It needs
//! from the server only a tool that runs as a task, `emit` by default, and, for the
//! `events_gone` checks, a second command that starts the server with a small retention, and
//! for RS-06, a third that starts it with a short maximum event age.
//!
//! It carries its own wire client on `serde_json` and shares no code with any implementation,
//! so that a bug cannot pass by agreeing with itself.
//!
//! ```no_run
//! use taskstream_conformance::{run, Config};
//!
//! let mut config = Config::new(vec!["taskstream".into(), "serve".into(), "--in-memory".into()]);
//! config.small_retention_command = Some(
//!     ["taskstream", "serve", "--in-memory", "--max-events-per-task", "5"]
//!         .map(String::from)
//!         .to_vec(),
//! );
//! config.aged_retention_command = Some(
//!     ["taskstream", "serve", "--in-memory", "--max-event-age", "1"]
//!         .map(String::from)
//!         .to_vec(),
//! );
//! let report = run(&config);
//! print!("{}", report.render());
//! std::process::exit(report.exit_code());
//! ```
//!
//! # Layout
//!
//! | module | owns |
//! | --- | --- |
//! | `cli` | the command line, [`main_with_args`] |
//! | `config` | [`Config`], [`Era`], [`TaskProfile`] |
//! | `wire` | the server process; its stdout as lines read with deadlines |
//! | `http` | the suite's own Streamable HTTP client: a server reached by URL, read the same way |
//! | `session` | one JSON-RPC connection in one era: requests, streams, routing of events |
//! | `event` | the task event envelope and the rules one event can break alone |
//! | `scenarios` | the checks, grouped by the situation they need |
//! | `evidence` | merging what scenarios saw into one verdict per ID |
//! | `catalog` | the [`CHECKS`] table |
//! | `report` | [`Report`]: outcomes, counts, printed form, exit status |
//! | [`faulty`] | the faulty server: correct, or broken one rule at a time (`--fault NAME`) |
//!
//! Waits are bounded: every one ends at a deadline (`--timeout-ms`, or `--aged-wait-ms` for the
//! events of the aged-retention server to age out), and the suite sleeps only while listening:
//! for messages that must not come (`--quiet-ms`), or between two polls of a condition.

mod catalog;
mod cli;
mod config;
mod event;
mod evidence;
pub mod faulty;
mod http;
mod report;
mod scenarios;
mod session;
mod wire;

pub use catalog::{check, Check, Level, CHECKS};
pub use cli::{main_with_args, USAGE};
pub use config::{Config, Era, TaskProfile};
pub use report::{CheckResult, Counts, EraReport, Outcome, Report};

/// Runs every check of every era in `config.eras`. The eras run side by side, each on server
/// processes of its own; the report keeps the order of `config.eras`.
pub fn run(config: &Config) -> Report {
    let eras = std::thread::scope(|scope| {
        let runs: Vec<_> = config
            .eras
            .iter()
            .map(|era| scope.spawn(move || run_era(config, *era)))
            .collect();
        runs.into_iter()
            .map(|run| {
                run.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    Report { eras }
}

/// Runs every check of one era.
pub fn run_era(config: &Config, era: Era) -> EraReport {
    scenarios::run_era(config, era)
}
