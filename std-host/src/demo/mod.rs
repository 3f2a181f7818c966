//! `taskstream demo`: the reviewer's walk-through of SEP-2694 on the real server.
//!
//! It starts `taskstream serve --http 127.0.0.1:0` (this same executable) as one long-lived
//! child process on a fresh data dir, connects with [`taskstream_client`] over Streamable HTTP in
//! the modern era, runs a bundled trace as a task and streams it; part way the client's
//! connection is cut (the server and the task go on), the client reconnects and resumes from
//! its persisted cursor while the task still produces, and a second client joins late and
//! replays. Then it kills the server with SIGKILL, restarts it, shows the task's status and
//! retained range without replaying, resumes with `after`, checks the log against what was
//! received, then restarts with a retention of 5 events to show `events_gone` and the recovery
//! SEP-2694 suggests. Each step prints what happens as it
//! happens; the last prints a verdict table of the properties checked, each with its
//! requirement ID. Exit status 0 only if every check held.
//!
//! | module | owns |
//! | --- | --- |
//! | `scenario` | the steps and their checks |
//! | `record` | the event handler: render, record, probe the cursor file (RS-08) |
//! | `view` | rendering the trace vocabulary (`data/README.md`) |
//! | `ui` | the timeline: plain lines, or a live progress line on a terminal |
//! | `report` | the verdict table and the `--json` report |
//!
//! What it deliberately does not do: talk to the server other than through the public client
//! API and the wire. It reads the bundled trace only to size the progress bar, to choose its
//! cut points, and to compare what arrived with what was recorded.

mod record;
mod report;
mod scenario;
mod ui;
mod view;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use taskstream_server::trace;

/// The trace replayed when `--trace` is not given: it has every kind of event the demo
/// renders (growing text, tool calls and results, subtasks, artifacts).
pub(crate) const DEFAULT_TRACE: &str = "agent-delegation";
/// How long one replay of the trace should take by default, in seconds.
const TARGET_REPLAY_SECS: f64 = 10.0;

/// `taskstream demo`'s command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "taskstream demo",
    about = "A walk-through of SEP-2694 resumable task event streams on the real server",
    long_about = "A walk-through of SEP-2694 resumable task event streams on the real server.\n\n\
        It starts one long-lived `taskstream serve --http` on a fresh data dir, runs a bundled \
        trace as a task and streams it; the client loses its connection part way, reconnects \
        and resumes with `after` while the task runs on, and a second client joins late and \
        replays. Then it kills the server with SIGKILL, restarts it, resumes with `after`, shows \
        events_gone under a small retention and prints a verdict. Exit status 0 only if every \
        check held.",
    disable_version_flag = true,
    args_override_self = true
)]
struct Options {
    /// The bundled trace to replay (code-review, build-and-test, agent-delegation)
    #[arg(long, value_name = "NAME", default_value = DEFAULT_TRACE)]
    trace: String,
    /// Replay speed, times real time, in (0, 10000] [default: the trace in about 10 s]
    #[arg(long, value_name = "X", value_parser = speed)]
    speed: Option<f64>,
    /// Use DIR (created if needed) instead of a fresh temporary dir, and keep it
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Keep the temporary dir (it is removed by default)
    #[arg(long)]
    keep: bool,
    /// Print a machine-readable report on stdout (the timeline goes to stderr)
    #[arg(long)]
    json: bool,
}

fn speed(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 10_000.0 => Ok(x),
        _ => Err("expected a number in (0, 10000]".to_owned()),
    }
}

/// A fresh directory under the system temp dir, removed when dropped unless kept.
fn fresh_temp_dir() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("taskstream-demo-")
        .tempdir()
        .map_err(|e| format!("cannot create a temp dir: {e}"))
}

/// Runs `taskstream demo` with the arguments after `demo`; the exit code is 0 only if every
/// check held.
#[must_use]
pub(crate) fn main(args: impl Iterator<Item = OsString>) -> ExitCode {
    use clap::Parser as _;
    let options = match Options::try_parse_from(std::iter::once(OsString::from("demo")).chain(args))
    {
        Ok(o) => o,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("taskstream demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<bool, String> {
    let Some(trace) = trace::find(&options.trace) else {
        let names: Vec<&str> = trace::bundled().iter().map(|t| t.name.as_str()).collect();
        return Err(format!(
            "no bundled trace {:?}; available: {}",
            options.trace,
            names.join(", ")
        ));
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let (root, temporary) = match &options.data_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            (dir.clone(), None)
        }
        None => {
            let dir = fresh_temp_dir()?;
            (dir.path().to_path_buf(), Some(dir))
        }
    };
    let duration_secs = trace.duration_ms as f64 / 1000.0;
    let speed = options.speed.unwrap_or_else(|| {
        // One decimal, so the timeline shows a readable number.
        ((duration_secs / TARGET_REPLAY_SECS).max(1.0) * 10.0).round() / 10.0
    });
    let mut ui = ui::Ui::new(options.json);
    ui.raw_line(&format!(
        "taskstream demo — SEP-2694 resumable task event streams, on the real server ({})",
        if ui.is_tty() {
            "terminal"
        } else {
            "plain output"
        }
    ));
    ui.raw_line(&format!(
        "trace {:?}: {} events in {:.1} s, outcome {}; replayed at ×{speed} (about {:.0} s)",
        trace.name,
        trace.events.len(),
        duration_secs,
        if trace.completed {
            "completed"
        } else {
            "failed"
        },
        duration_secs / speed
    ));
    let mut demo = scenario::Demo::new(
        ui,
        scenario::Setup {
            exe,
            root: root.clone(),
            trace,
            speed,
        },
    );
    demo.run();
    demo.report.fact("trace", json!(trace.name));
    demo.report.fact("speed", json!(speed));
    demo.report
        .fact("dataDir", json!(root.display().to_string()));
    demo.report.print_table(&mut demo.ui);
    let ok = demo.report.ok();
    let keep = temporary.is_none() || options.keep;
    match temporary {
        Some(dir) if !options.keep => {
            if let Err(e) = dir.close() {
                demo.ui
                    .raw_line(&format!("could not remove {}: {e}", root.display()));
            }
        }
        Some(dir) => {
            let _kept = dir.keep();
            demo.ui
                .raw_line(&format!("data dir kept: {}", root.display()));
        }
        None => demo
            .ui
            .raw_line(&format!("data dir kept: {}", root.display())),
    }
    demo.report.fact("dataDirKept", json!(keep));
    if options.json {
        println!("{}", demo.report.to_json());
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Options, clap::Error> {
        use clap::Parser as _;
        Options::try_parse_from(std::iter::once("demo").chain(list.iter().copied()))
    }

    #[test]
    fn options_parse() {
        let o = parse(&["--trace", "code-review", "--speed=5", "--json"]).expect("valid");
        assert_eq!(
            (o.trace.as_str(), o.speed, o.json, o.keep),
            ("code-review", Some(5.0), true, false)
        );
        assert_eq!(parse(&[]).expect("valid").trace, DEFAULT_TRACE);
        for bad in [
            &["--speed", "0"][..],
            &["--speed", "x"],
            &["--speed", "inf"],
        ] {
            let e = parse(bad).expect_err("refused");
            assert!(e.to_string().contains("(0, 10000]"), "{e}");
        }
        assert!(parse(&["--bogus"]).is_err());
        let help = parse(&["--help"]).expect_err("help is not options");
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
