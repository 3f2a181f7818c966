//! `taskstream`: the binary. Arguments and wiring only; each subcommand is one match arm.

mod demo;

use std::ffi::OsString;
use std::process::ExitCode;

use taskstream_server::config::{self, ServeCommand, ServeConfig};
use taskstream_server::store::{Store, StoreConfig};

/// The command line: a subcommand and its words, which the subcommand parses itself (each
/// with its own `--help`). `--log-format` was taken out before (`log::take_format`), so it
/// may stand anywhere before `--`.
#[derive(clap::Parser, Debug)]
#[command(
    name = "taskstream",
    version,
    about = "An MCP server with Tasks and SEP-2694 resumable task event streams",
    after_help = "Logs: with any command, --log-format text|json (default: \
                  $TASKSTREAM_LOG_FORMAT, else text) writes stderr logs as text or as one JSON \
                  object a line; what is logged is $TASKSTREAM_LOG (error, warn, info, debug, \
                  trace, off, or RUST_LOG-style directives such as taskstream=debug; default \
                  info). Traces: with any command, --otlp-endpoint URL (default: the standard \
                  $OTEL_EXPORTER_OTLP_ENDPOINT; none: off) exports OpenTelemetry spans of \
                  requests, appends, streams and replays over OTLP/HTTP to URL/v1/traces."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Subcommand>,
}

/// The words after a subcommand, handed to it unparsed.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
struct Words {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

#[derive(clap::Subcommand, Debug)]
enum Subcommand {
    /// Run the MCP server on stdin/stdout, or Streamable HTTP with --http, or the data dir's
    /// socket with --socket (`taskstream serve --help`)
    Serve(Words),
    /// A stdio MCP server for desktop hosts that relays to the data dir's long-lived
    /// background server, starting one if none runs: tasks outlive the host's restarts
    Connect(Words),
    /// taskstream in front of any stdio MCP server: each of its tools becomes a durable task
    /// with a resumable event stream (`taskstream gateway [serve options] -- CMD [ARGS...]`)
    Gateway(Words),
    /// The reviewer's walk-through: stream, disconnect, resume, crash, events_gone
    Demo(Words),
    /// Check any stdio MCP server command (`-- CMD [ARGS...]`), or Streamable HTTP endpoint
    /// (`--url http://HOST:PORT/mcp`), against SEP-2694
    Conformance(Words),
    /// The conformance suite's reference server, for testing clients: correct, or broken on
    /// purpose with `--fault NAME` (`--list-client-faults`)
    ConformanceServer(Words),
    /// Open a damaged data dir, keeping every valid record, and report what was lost
    /// (`taskstream repair --data-dir DIR [serve options]`)
    Repair(Words),
}

fn main() -> ExitCode {
    use clap::Parser as _;
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let format = taskstream_server::log::take_format(&mut args);
    let otlp = taskstream_server::otel::take_endpoint(&mut args);
    match (format, otlp) {
        (Ok(format), Ok(otlp)) => taskstream_server::log::init_traced(format, otlp.as_ref()),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("taskstream: {e}");
            return ExitCode::from(2);
        }
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let Some(command) = cli.command else {
        use clap::CommandFactory as _;
        print!("{}", Cli::command().render_help());
        return ExitCode::SUCCESS;
    };
    let code = match command {
        Subcommand::Serve(w) => serve(w.args.into_iter()),
        Subcommand::Connect(w) => taskstream_server::connect::main(w.args.into_iter()),
        Subcommand::Gateway(w) => taskstream_gateway::main(w.args.into_iter()),
        Subcommand::Demo(w) => demo::main(w.args.into_iter()),
        Subcommand::Conformance(w) => conformance(w.args.into_iter()),
        Subcommand::ConformanceServer(w) => conformance_server(w.args.into_iter()),
        Subcommand::Repair(w) => repair(w.args.into_iter()),
    };
    // The spans still buffered, exported before the process exits (after a SIGTERM's drain).
    taskstream_server::otel::shutdown();
    code
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
    let status =
        taskstream_conformance::faulty::main_with_args("taskstream conformance-server", args);
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}

fn serve(args: impl Iterator<Item = OsString>) -> ExitCode {
    let config = match config::parse_serve(args, |k| std::env::var_os(k)) {
        Ok(ServeCommand::Help) => {
            print!("{}", config::serve_help());
            return ExitCode::SUCCESS;
        }
        Ok(ServeCommand::Run(c)) => *c,
        Ok(other) => {
            eprintln!("taskstream serve: {other:?} is not a command this binary knows");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("taskstream serve: {e}");
            return ExitCode::from(2);
        }
    };
    let builder = taskstream_server::ServerBuilder::new("taskstream", env!("CARGO_PKG_VERSION"))
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
        index_cache_bytes: config.index_cache_bytes,
    }
}

/// `taskstream repair [serve options]`: opens the data dir going past damage (see
/// `Store::repair`), reports what it found, checkpoints and exits.
fn repair(args: impl Iterator<Item = OsString>) -> ExitCode {
    let config = match config::parse_serve(args, |k| std::env::var_os(k)) {
        Ok(ServeCommand::Run(c)) if c.data_dir.is_some() => c,
        Ok(_) => {
            eprintln!("usage: taskstream repair --data-dir DIR [serve options]");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("taskstream repair: {e}");
            return ExitCode::from(2);
        }
    };
    let store = match Store::repair(store_config(&config), taskstream_server::clock::now()) {
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
