//! `taskstream`: the binary. Arguments and wiring only; each subcommand is one match arm.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use taskstream::config::{self, ServeCommand, ServeConfig};
use taskstream::store::{Store, StoreConfig};

const HELP: &str = "\
taskstream: an MCP server with Tasks and SEP-2694 resumable task event streams

USAGE:
    taskstream <COMMAND> [OPTIONS]

COMMANDS:
    serve        run the MCP server on stdin/stdout (see `taskstream serve --help`)
    demo         the reviewer's walk-through: stream, crash, resume, events_gone
                 (see `taskstream demo --help`)
    conformance  check any stdio MCP server command against SEP-2694:
                 `taskstream conformance [OPTIONS] -- CMD [ARGS...]`
    conformance-server
                 the conformance suite's reference server, for testing clients: correct,
                 or broken on purpose with `--fault NAME` (`--list-client-faults`)
    help         print this help

OPTIONS:
    -h, --help      print this help
    -V, --version   print the version
";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let command = args.next();
    match command.as_ref().and_then(|c| c.to_str()) {
        Some("serve") => serve(args),
        Some("demo") => taskstream::demo::main(args),
        Some("conformance") => conformance(args),
        Some("conformance-server") => conformance_server(args),
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

/// `taskstream conformance [OPTIONS] -- CMD [ARGS...]`: the black-box suite of
/// `taskstream-conformance`, against any stdio server command.
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
        Ok(ServeCommand::Run(c)) => c,
        Err(e) => {
            eprintln!("taskstream serve: {e}\n\n{}", config::SERVE_HELP);
            return ExitCode::from(2);
        }
    };
    let store = match open_store(&config) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("taskstream serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stdout = Box::new(std::io::stdout());
    match taskstream::server::serve(config, store, std::io::stdin().lock(), stdout) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taskstream serve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn open_store(config: &ServeConfig) -> Result<Store, String> {
    // The store creates a missing data dir itself, owner-only (0700); creating it here first
    // would leave it with the umask's mode.
    Store::open(
        StoreConfig {
            data_dir: config.data_dir.clone(),
            durability: config.durability,
            retention: config.retention,
            max_store_bytes: config.max_store_bytes,
        },
        taskstream::clock::now(),
    )
    .map_err(|e| format!("cannot open the store: {e}"))
}
