//! `taskstream demo`: the reviewer's walk-through of SEP-2694 on the real server.
//!
//! It starts `taskstream serve --http 127.0.0.1:0` (this same executable) as one long-lived
//! child process on a fresh data dir, connects with [`crate::client`] over Streamable HTTP in
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

use crate::workloads::trace;

/// The trace replayed when `--trace` is not given: it has every kind of event the demo
/// renders (growing text, tool calls and results, subtasks, artifacts).
pub const DEFAULT_TRACE: &str = "agent-delegation";
/// How long one replay of the trace should take by default, in seconds.
const TARGET_REPLAY_SECS: f64 = 10.0;

const HELP: &str = "\
taskstream demo: a walk-through of SEP-2694 resumable task event streams on the real server

USAGE:
    taskstream demo [OPTIONS]

It starts one long-lived `taskstream serve --http` on a fresh data dir, runs a bundled trace
as a task and streams it; the client loses its connection part way, reconnects and resumes
with `after` while the task runs on, and a second client joins late and replays. Then it kills
the server with SIGKILL, restarts it, resumes with `after`, shows events_gone under a small
retention and prints a verdict. Exit status 0 only if every check held.

OPTIONS:
    --trace NAME      the bundled trace to replay [default: agent-delegation]
                      (code-review, build-and-test, agent-delegation)
    --speed X         replay speed, times real time [default: the trace in about 10 s]
    --data-dir DIR    use DIR (created if needed) instead of a fresh temporary dir, and keep it
    --keep            keep the temporary dir (it is removed by default)
    --json            print a machine-readable report on stdout (the timeline goes to stderr)
    -h, --help        print this help
";

struct Options {
    trace: String,
    speed: Option<f64>,
    data_dir: Option<PathBuf>,
    keep: bool,
    json: bool,
}

fn parse(args: impl Iterator<Item = OsString>) -> Result<Option<Options>, String> {
    let mut options = Options {
        trace: DEFAULT_TRACE.to_owned(),
        speed: None,
        data_dir: None,
        keep: false,
        json: false,
    };
    let mut args = args.map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--trace" => options.trace = value("--trace")?,
            "--speed" => {
                let v = value("--speed")?;
                let speed: f64 = v
                    .parse()
                    .map_err(|_| format!("--speed {v:?} is not a number"))?;
                if !(speed.is_finite() && speed > 0.0 && speed <= 10_000.0) {
                    return Err(format!("--speed {v} must be in (0, 10000]"));
                }
                options.speed = Some(speed);
            }
            "--data-dir" => options.data_dir = Some(PathBuf::from(value("--data-dir")?)),
            "--keep" => options.keep = true,
            "--json" => options.json = true,
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(Some(options))
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
pub fn main(args: impl Iterator<Item = OsString>) -> ExitCode {
    let options = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("taskstream demo: {e}\n\n{HELP}");
            return ExitCode::from(2);
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

    fn args(list: &[&str]) -> impl Iterator<Item = OsString> {
        list.iter()
            .map(OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn options_parse() {
        let o = parse(args(&["--trace", "code-review", "--speed=5", "--json"]))
            .expect("valid")
            .expect("not help");
        assert_eq!(
            (o.trace.as_str(), o.speed, o.json, o.keep),
            ("code-review", Some(5.0), true, false)
        );
        assert!(parse(args(&["--speed", "0"])).is_err());
        assert!(parse(args(&["--speed", "x"])).is_err());
        assert!(parse(args(&["--bogus"])).is_err());
        assert!(parse(args(&["--help"])).expect("valid").is_none());
    }
}
