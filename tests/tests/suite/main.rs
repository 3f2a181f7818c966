//! The suite's own tests, in one binary: the suite run against `faulty-server` (every check can
//! fail, and fails only for its own rule), the command line, the traceability file, and the
//! requirement file (every cited ID defined, every cited file present).
#![allow(clippy::unwrap_used)]

mod cli;
mod faults;
mod requirements;
mod traceability;

use std::time::Duration;

use taskstream_conformance::Config;

/// The deliberately breakable server built with this package.
pub(crate) const FAULTY_SERVER: &str = env!("CARGO_BIN_EXE_faulty-server");

/// The command of `faulty-server` with `fault` (if any) and extra arguments.
pub(crate) fn server(fault: Option<&str>, extra: &[&str]) -> Vec<String> {
    let mut command = vec![FAULTY_SERVER.to_owned()];
    if let Some(fault) = fault {
        command.extend(["--fault".to_owned(), fault.to_owned()]);
    }
    command.extend(extra.iter().map(|arg| (*arg).to_owned()));
    command
}

/// How long the aged-retention twin keeps an event, in milliseconds.
pub(crate) const MAX_AGE_MS: &str = "200";

/// A run against `faulty-server` with `fault`, its small-retention twin keeping
/// `small_retention` events per task, its aged-retention twin dropping events after
/// [`MAX_AGE_MS`], and bounds tight enough for a local server. The live tasks keep the default
/// 100 ms between events: a late join must find its task still running even on a busy machine.
pub(crate) fn config(fault: Option<&str>, small_retention: &str) -> Config {
    let mut config = Config::new(server(fault, &[]));
    config.small_retention_command = Some(server(fault, &["--max-events", small_retention]));
    config.aged_retention_command = Some(server(fault, &["--max-age-ms", MAX_AGE_MS]));
    config.checkpoint_command = Some(server(fault, &["--retain-from-checkpoint"]));
    config.timeout = Duration::from_secs(2);
    config.quiet = Duration::from_millis(100);
    config.stream_probe = 12;
    config
}
