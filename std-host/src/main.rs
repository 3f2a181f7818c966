//! `taskstream`: the binary. Arguments and wiring only; each subcommand is one match arm.

use std::ffi::OsString;
use std::process::ExitCode;

use taskstream::config::{self, ServeCommand, ServeConfig};
use taskstream::store::{Store, StoreConfig};

const HELP: &str = "\
taskstream: an MCP server with Tasks and SEP-2694 resumable task event streams

USAGE:
    taskstream <COMMAND> [OPTIONS]

COMMANDS:
    serve        run the MCP server on stdin/stdout, or Streamable HTTP with --http
                 (see `taskstream serve --help`)
    connect      a stdio MCP server for desktop hosts that relays to the data dir's
                 long-lived background server, starting one if none runs: tasks outlive
                 the host's restarts (see `taskstream connect --help`)
    gateway      taskstream in front of any stdio MCP server: each of its tools becomes a
                 durable task with a resumable event stream:
                 `taskstream gateway [serve options] -- CMD [ARGS...]`
                 (see `taskstream gateway --help`)
    demo         the reviewer's walk-through: stream, crash, resume, events_gone
                 (see `taskstream demo --help`)
    conformance  check any stdio MCP server command, or Streamable HTTP endpoint, against
                 SEP-2694: `taskstream conformance [OPTIONS] -- CMD [ARGS...]` or
                 `taskstream conformance [OPTIONS] --url http://HOST:PORT/mcp`
    conformance-server
                 the conformance suite's reference server, for testing clients: correct,
                 or broken on purpose with `--fault NAME` (`--list-client-faults`)
    repair       open a damaged data dir, keeping every valid record, and report what was
                 lost: `taskstream repair --data-dir DIR [serve options]`
    help         print this help

OPTIONS:
    -h, --help      print this help
    -V, --version   print the version
    --log-format F  with any command: stderr logs as `text` (default) or `json`, one object
                    a line [default: $TASKSTREAM_LOG_FORMAT, else text]; the level is
                    $TASKSTREAM_LOG (error, warn, info, debug, trace, off) [default: info]
";

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match taskstream::log::take_format(&mut args) {
        Ok(format) => taskstream::log::init(format),
        Err(e) => {
            eprintln!("taskstream: {e}");
            return ExitCode::from(2);
        }
    }
    let mut args = args.into_iter();
    let command = args.next();
    match command.as_ref().and_then(|c| c.to_str()) {
        Some("serve") => serve(args),
        Some("connect") => taskstream::connect::main(args),
        Some("gateway") => taskstream::gateway::main(args),
        Some("demo") => taskstream::demo::main(args),
        Some("conformance") => conformance(args),
        Some("conformance-server") => conformance_server(args),
        Some("repair") => repair(args),
        None | Some("help" | "-h" | "--help") => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some("-V" | "--version") => {
            println!("taskstream {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(_) => {
            let shown = command.unwrap_or_default();
            eprintln!("taskstream: unknown command {shown:?}\n\n{HELP}");
            ExitCode::from(2)
        }
    }
}

/// `taskstream conformance [OPTIONS] -- CMD [ARGS...]` (or `--url URL`): the black-box suite
/// of `taskstream-conformance`, against any stdio server command or Streamable HTTP endpoint.
fn conformance(args: impl Iterator<Item = OsString>) -> ExitCode {
    let mut words = Vec::new();
    for arg in args {
        match arg.into_string() {
            Ok(word) => words.push(word),
            Err(bad) => {
                eprintln!("taskstream conformance: argument {bad:?} is not UTF-8");
                return ExitCode::from(2);
            }
        }
    }
    let status = taskstream_conformance::main_with_args(&words);
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}

/// `taskstream conformance-server [--fault NAME]...`: the suite's in-memory reference server on
/// stdio, for client authors' tests (`taskstream_conformance::faulty`).
fn conformance_server(args: impl Iterator<Item = OsString>) -> ExitCode {
    let mut words = Vec::new();
    for arg in args {
        match arg.into_string() {
            Ok(word) => words.push(word),
            Err(bad) => {
                eprintln!("taskstream conformance-server: argument {bad:?} is not UTF-8");
                return ExitCode::from(2);
            }
        }
    }
    let status =
        taskstream_conformance::faulty::main_with_args("taskstream conformance-server", &words);
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}

fn serve(args: impl Iterator<Item = OsString>) -> ExitCode {
    let config = match config::parse_serve(args, |k| std::env::var_os(k)) {
        Ok(ServeCommand::Help) => {
            print!("{}", config::SERVE_HELP);
            return ExitCode::SUCCESS;
        }
        Ok(ServeCommand::Run(c)) => *c,
        Err(e) => {
            eprintln!("taskstream serve: {e}\n\n{}", config::SERVE_HELP);
            return ExitCode::from(2);
        }
    };
    let builder = taskstream::ServerBuilder::new("taskstream", env!("CARGO_PKG_VERSION"))
        .builtin_tools()
        .config(config);
    match builder.serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taskstream serve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn store_config(config: &ServeConfig) -> StoreConfig {
    StoreConfig {
        data_dir: config.data_dir.clone(),
        durability: config.durability,
        retention: config.retention,
        max_store_bytes: config.max_store_bytes,
    }
}

/// `taskstream repair [serve options]`: opens the data dir going past damage (see
/// `Store::repair`), reports what it found, checkpoints and exits.
fn repair(args: impl Iterator<Item = OsString>) -> ExitCode {
    let config = match config::parse_serve(args, |k| std::env::var_os(k)) {
        Ok(ServeCommand::Run(c)) if c.data_dir.is_some() => c,
        Ok(ServeCommand::Run(_) | ServeCommand::Help) => {
            eprintln!("usage: taskstream repair --data-dir DIR [serve options]");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("taskstream repair: {e}");
            return ExitCode::from(2);
        }
    };
    let store = match Store::repair(store_config(&config), taskstream::clock::now()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("taskstream repair: cannot open the store: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = store.recovery();
    for w in &report.warnings {
        println!("warning: {w}");
    }
    if report.repairs.is_empty() {
        println!("nothing was damaged");
    }
    for r in &report.repairs {
        println!("repaired: {r}");
    }
    for id in &report.lost_tasks {
        println!("lost task: {id}");
    }
    for id in &report.failed_tasks {
        println!("ended failed: {id}");
    }
    let checkpointed = store.checkpoint();
    drop(store);
    match checkpointed {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taskstream repair: {e}");
            ExitCode::FAILURE
        }
    }
}
