//! The command line: `taskstream-conformance [OPTIONS] [--] CMD [ARGS...]`, also reachable as
//! `taskstream conformance -- CMD [ARGS...]`.

use std::time::Duration;

use serde_json::Value;

use crate::config::{Config, Era};
use crate::report::Report;

/// The help text.
pub const USAGE: &str = "\
Usage: taskstream-conformance [OPTIONS] [--] CMD [ARGS...]
       taskstream-conformance [OPTIONS] --url URL

Checks the stdio MCP server started by CMD, or the MCP Streamable HTTP endpoint at URL,
against SEP-2694 (resumable task event streams), black-box, in the modern (2026-07-28) and
legacy (2025-11-25) eras. Over HTTP every check runs where it applies (the rest are skipped
with the reason), and so does the long-lived group, which only a server that outlives its
connections can pass: a client drops its connection mid-task and resumes on a new one, two
clients read one task at different speeds, a late joiner replays.

Options:
  --url URL                   the server under test is the endpoint URL (http://HOST:PORT/mcp),
                              already running; it is used for every check
  --small-retention-url URL   the small-retention twin as an endpoint (as --small-retention-cmd)
  --aged-retention-url URL    the aged-retention twin as an endpoint (as --aged-retention-cmd)
  --checkpoint-url URL        the checkpoint twin as an endpoint (as --checkpoint-cmd)
  --long-lived                every start of CMD is a new connection to one server that
                              outlives it (a relay such as taskstream connect): runs the
                              long-lived group over stdio too (with --url it always runs)
  --era modern|legacy|both    the era(s) to check, in turn (default: both)
  --tool NAME                 the tool that creates a task (default: emit)
  --args JSON                 its arguments for every task (default: the built-in
                              arguments of emit {count, interval_ms?}, which vary by check)
  --interval-ms N             milliseconds between the events of live emit tasks (default: 100)
  --small-retention-cmd CMD   the same server with a small per-task retention (fewer than 32
                              events), as one shell-quoted string, e.g.
                              \"taskstream serve --in-memory --max-events-per-task 5\";
                              enables the events_gone checks (RS-03b, RT-04, RS-07, EG-01)
  --aged-retention-cmd CMD    the same server dropping events after a short maximum age (a
                              few seconds at most), e.g.
                              \"taskstream serve --in-memory --max-event-age 1\";
                              enables RS-06 and the cursor rules on a terminal task with
                              nothing retained (RS-04, RS-02, RS-03b, RT-04, RS-07, EG-01)
  --checkpoint-cmd CMD        the same server retaining from each task's latest checkpoint, e.g.
                              \"taskstream serve --in-memory --retain-from-checkpoint\";
                              if it advertises experimental[\"dev.taskstream/checkpoints\"],
                              enables taskstream's checkpoint checks (CP-01, CP-03, CP-04)
  --aged-wait-ms N            how long to wait for those events to age out (default: 15000)
  --timeout-ms N              bound on every wait for an answer or an event (default: 5000)
  --quiet-ms N                how long to listen for what must not come (default: 200)
  --stream-probe N            most concurrent streams opened for SE-07 (default: 64)
  --verbose                   print the wire traffic and the server's stderr to stderr
  -h, --help                  print this help

Each MUST check prints `PASS ID check`, `FAIL ID check: what was seen` or `SKIP ID check: why`,
where `check` is its name in the traceability file (`PASS EV-04 sep-2694-event-delivered-in-order`);
SHOULD checks print `PASS ID check (should)` or `WARN ID check: ...`; MAY ones
`INFO ID check: ...`. The last line is `N passed, N failed, N skipped` over the MUST checks
of every era.
Exit status: 0 if no MUST check failed; 1 if one did; 2 on a usage error, or when no era
could be checked, or when the server speaks an era but could not make a task in it.
";

/// What the command line asks for.
#[derive(Debug)]
enum Request {
    Help,
    Run(Box<Config>),
}

/// Runs the suite as a command. `args` are the words after the program (or subcommand) name,
/// e.g. `["--era", "modern", "--", "taskstream", "serve", "--in-memory"]`. Prints the report
/// to stdout, era by era as each finishes, and answers the exit status.
pub fn main_with_args(args: &[String]) -> i32 {
    let config = match parse(args) {
        Ok(Request::Help) => {
            print!("{USAGE}");
            return 0;
        }
        Ok(Request::Run(config)) => config,
        Err(message) => {
            eprintln!("taskstream-conformance: {message}\n\nUsage: taskstream-conformance [OPTIONS] [--] CMD [ARGS...]\n       taskstream-conformance [OPTIONS] --url URL\n(--help for more)");
            return 2;
        }
    };
    let mut report = Report::default();
    for era in &config.eras {
        let era_report = crate::run_era(&config, *era);
        print!("{}", era_report.render());
        report.eras.push(era_report);
    }
    print!("{}", report.render_totals());
    report.exit_code()
}

/// The command line, as clap reads it; [`USAGE`] is its help. Options left out keep the
/// defaults of [`Config::new`], the one place they are written.
#[derive(clap::Parser, Debug)]
#[command(
    name = "taskstream-conformance",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true
)]
struct Cli {
    #[arg(short, long)]
    help: bool,
    #[arg(long, value_parser = http_url)]
    url: Option<String>,
    #[arg(long, value_parser = http_url)]
    small_retention_url: Option<String>,
    #[arg(long, value_parser = http_url)]
    aged_retention_url: Option<String>,
    #[arg(long, value_parser = http_url)]
    checkpoint_url: Option<String>,
    #[arg(long)]
    long_lived: bool,
    #[arg(long, value_parser = ["modern", "legacy", "both"])]
    era: Option<String>,
    #[arg(long)]
    tool: Option<String>,
    #[arg(long, value_parser = json_object)]
    args: Option<Value>,
    #[arg(long)]
    interval_ms: Option<u64>,
    #[arg(long, value_parser = shell_command)]
    small_retention_cmd: Option<Words>,
    #[arg(long, value_parser = shell_command)]
    aged_retention_cmd: Option<Words>,
    #[arg(long, value_parser = shell_command)]
    checkpoint_cmd: Option<Words>,
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    aged_wait_ms: Option<u64>,
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: Option<u64>,
    #[arg(long)]
    quiet_ms: Option<u64>,
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    stream_probe: Option<u64>,
    #[arg(long)]
    verbose: bool,
    /// The server command, after `--` or from the first word that is not an option on.
    #[arg(trailing_var_arg = true)]
    command: Vec<String>,
}

/// A clap error as one message: its first paragraph, without the usage that follows it or the
/// `error: ` prefix (the caller says whose error it is).
pub(crate) fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.trim_end();
    let text = text.split("\n\nUsage:").next().unwrap_or(text);
    text.strip_prefix("error: ").unwrap_or(text).to_owned()
}

/// A command split into words.
#[derive(Clone, Debug)]
struct Words(Vec<String>);

fn parse(args: &[String]) -> Result<Request, String> {
    use clap::Parser as _;
    let argv = std::iter::once("taskstream-conformance").chain(args.iter().map(String::as_str));
    let cli = Cli::try_parse_from(argv).map_err(|e| clap_message(&e))?;
    if cli.help {
        return Ok(Request::Help);
    }
    let mut config = Config::new(cli.command);
    if let Some(url) = cli.url {
        config.command = vec![url];
    }
    config.verbose = cli.verbose;
    config.long_lived = cli.long_lived;
    match cli.era.as_deref() {
        Some("modern") => config.eras = vec![Era::Modern],
        Some("legacy") => config.eras = vec![Era::Legacy],
        _ => {}
    }
    if let Some(tool) = cli.tool {
        config.profile.tool = tool;
    }
    if cli.args.is_some() {
        config.profile.args = cli.args;
    }
    if let Some(n) = cli.interval_ms {
        config.interval_ms = n;
    }
    if let Some(Words(command)) = cli.small_retention_cmd {
        config.small_retention_command = Some(command);
    }
    if let Some(Words(command)) = cli.aged_retention_cmd {
        config.aged_retention_command = Some(command);
    }
    if let Some(Words(command)) = cli.checkpoint_cmd {
        config.checkpoint_command = Some(command);
    }
    if let Some(url) = cli.checkpoint_url {
        config.checkpoint_command = Some(vec![url]);
    }
    if let Some(url) = cli.small_retention_url {
        config.small_retention_command = Some(vec![url]);
    }
    if let Some(url) = cli.aged_retention_url {
        config.aged_retention_command = Some(vec![url]);
    }
    if let Some(ms) = cli.aged_wait_ms {
        config.aged_wait = Duration::from_millis(ms);
    }
    if let Some(ms) = cli.timeout_ms {
        config.timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = cli.quiet_ms {
        config.quiet = Duration::from_millis(ms);
    }
    if let Some(n) = cli.stream_probe {
        config.stream_probe = usize::try_from(n).map_err(|_| "--stream-probe is too large")?;
    }
    if config.command.is_empty() {
        return Err("no server command or --url given".to_owned());
    }
    Ok(Request::Run(Box::new(config)))
}

/// A Streamable HTTP endpoint: `http://host:port/path`.
fn http_url(value: &str) -> Result<String, String> {
    match value.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() && !rest.contains(char::is_whitespace) => {
            Ok(value.to_owned())
        }
        _ => Err("expected an http:// URL (e.g. http://127.0.0.1:8080/mcp)".to_owned()),
    }
}

fn json_object(value: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(value) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err("expected a JSON object".to_owned()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// A command given as one string, split as a POSIX shell splits words (`shlex`).
fn shell_command(line: &str) -> Result<Words, String> {
    match shlex::split(line) {
        Some(words) if !words.is_empty() => Ok(Words(words)),
        Some(_) => Err("the command is empty".to_owned()),
        None => Err("unclosed quote or trailing backslash in the command".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    fn config(words: &[&str]) -> Config {
        match parse(&args(words)) {
            Ok(Request::Run(config)) => *config,
            other => panic!("{words:?} gave {other:?}"),
        }
    }

    #[test]
    fn command_after_double_dash_or_first_word() {
        assert_eq!(config(&["--", "srv", "--x"]).command, ["srv", "--x"]);
        assert_eq!(config(&["srv", "--x"]).command, ["srv", "--x"]);
        assert_eq!(
            config(&["--era=legacy", "--verbose", "srv"]).eras,
            [Era::Legacy]
        );
    }

    #[test]
    fn options() {
        let c = config(&[
            "--era",
            "modern",
            "--tool",
            "run_trace",
            "--args",
            r#"{"name":"x"}"#,
            "--interval-ms",
            "50",
            "--small-retention-cmd",
            "srv --max 'a b'",
            "--aged-retention-cmd",
            "srv --age 1",
            "--aged-wait-ms",
            "3000",
            "--checkpoint-cmd",
            "srv --retain-from-checkpoint",
            "--timeout-ms",
            "900",
            "--quiet-ms",
            "0",
            "--stream-probe",
            "3",
            "--",
            "srv",
        ]);
        assert_eq!(c.eras, [Era::Modern]);
        assert_eq!(c.profile.tool, "run_trace");
        assert_eq!(c.profile.args, Some(serde_json::json!({"name": "x"})));
        assert_eq!(c.interval_ms, 50);
        assert_eq!(
            c.small_retention_command,
            Some(args(&["srv", "--max", "a b"]))
        );
        assert_eq!(c.aged_retention_command, Some(args(&["srv", "--age", "1"])));
        assert_eq!(c.aged_wait, Duration::from_millis(3000));
        assert_eq!(
            c.checkpoint_command,
            Some(args(&["srv", "--retain-from-checkpoint"]))
        );
        assert_eq!(c.timeout, Duration::from_millis(900));
        assert_eq!(c.quiet, Duration::ZERO);
        assert_eq!(c.stream_probe, 3);
    }

    #[test]
    fn errors() {
        for words in [
            &[][..],
            &["--era", "new", "srv"],
            &["--args", "[1]", "srv"],
            &["--args", "{", "srv"],
            &["--timeout-ms", "0", "srv"],
            &["--bogus", "srv"],
            &["--tool"],
            &["--small-retention-cmd", "'", "srv"],
            &["--aged-retention-cmd", "", "srv"],
            &["--aged-wait-ms", "0", "srv"],
            &["--checkpoint-cmd", "", "srv"],
        ] {
            assert!(parse(&args(words)).is_err(), "{words:?}");
        }
        assert!(matches!(parse(&args(&["-h"])), Ok(Request::Help)));
    }

    #[test]
    fn urls_name_http_endpoints() {
        let Ok(Request::Run(c)) = parse(&args(&[
            "--url",
            "http://127.0.0.1:9/mcp",
            "--small-retention-url=http://127.0.0.1:10/mcp",
            "--aged-retention-url",
            "http://[::1]:11/mcp",
            "--checkpoint-url",
            "http://127.0.0.1:12/mcp",
        ])) else {
            panic!("--url did not parse");
        };
        assert_eq!(c.command, args(&["http://127.0.0.1:9/mcp"]));
        assert!(!c.long_lived);
        let Ok(Request::Run(relay)) = parse(&args(&["--long-lived", "--", "relay", "--x"])) else {
            panic!("--long-lived did not parse");
        };
        assert!(relay.long_lived);
        assert_eq!(relay.command, args(&["relay", "--x"]));
        assert_eq!(
            c.small_retention_command,
            Some(args(&["http://127.0.0.1:10/mcp"]))
        );
        assert_eq!(
            c.aged_retention_command,
            Some(args(&["http://[::1]:11/mcp"]))
        );
        assert_eq!(
            c.checkpoint_command,
            Some(args(&["http://127.0.0.1:12/mcp"]))
        );
        for words in [
            &["--url", "https://x/mcp"][..],
            &["--url", "127.0.0.1:9"],
            &["--url", "http://"],
            &["--small-retention-url", "ftp://x", "srv"],
            &["--checkpoint-url", "ftp://x", "srv"],
        ] {
            assert!(parse(&args(words)).is_err(), "{words:?}");
        }
    }

    #[test]
    fn shell_words() {
        assert_eq!(
            shell_command(r#"a  "b c" 'd "e"' f\ g "h\"i" '' x"#)
                .ok()
                .map(|w| w.0),
            Some(args(&["a", "b c", "d \"e\"", "f g", "h\"i", "", "x"]))
        );
        assert!(shell_command("  ").is_err());
        assert!(shell_command("a 'b").is_err());
    }

    #[test]
    fn messages_say_what_is_allowed() {
        let message = |words: &[&str]| match parse(&args(words)) {
            Err(m) => m,
            Ok(r) => panic!("{words:?} gave {r:?}"),
        };
        assert!(message(&["--era", "new", "srv"]).contains("modern"));
        assert!(message(&["--timeout-ms", "0", "srv"]).contains("1.."));
        assert!(message(&["--url", "ftp://x"]).contains("http://"));
        assert!(message(&["--bogus", "srv"]).contains("--bogus"));
    }
}
