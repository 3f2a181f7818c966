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
            eprintln!("taskstream-conformance: {message}\n\n{USAGE}");
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

fn parse(args: &[String]) -> Result<Request, String> {
    let mut config = Config::new(Vec::new());
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            config.command = words.cloned().collect();
            break;
        }
        if word == "-h" || word == "--help" {
            return Ok(Request::Help);
        }
        if !word.starts_with('-') {
            config.command = std::iter::once(word).chain(words).cloned().collect();
            break;
        }
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (word.as_str(), None),
        };
        if flag == "--verbose" {
            config.verbose = true;
            continue;
        }
        if flag == "--long-lived" {
            config.long_lived = true;
            continue;
        }
        let value = match inline {
            Some(value) => value,
            None => words
                .next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))?,
        };
        match flag {
            "--era" => {
                config.eras = match value.as_str() {
                    "modern" => vec![Era::Modern],
                    "legacy" => vec![Era::Legacy],
                    "both" => Era::BOTH.to_vec(),
                    other => {
                        return Err(format!(
                            "--era must be modern, legacy or both, not {other:?}"
                        ))
                    }
                }
            }
            "--tool" => config.profile.tool = value,
            "--args" => {
                let args: Value = serde_json::from_str(&value)
                    .map_err(|error| format!("--args is not JSON: {error}"))?;
                if !args.is_object() {
                    return Err("--args must be a JSON object".to_owned());
                }
                config.profile.args = Some(args);
            }
            "--interval-ms" => config.interval_ms = number(flag, &value)?,
            "--small-retention-cmd" => {
                let command = split_command(&value)?;
                if command.is_empty() {
                    return Err("--small-retention-cmd is empty".to_owned());
                }
                config.small_retention_command = Some(command);
            }
            "--aged-retention-cmd" => {
                let command = split_command(&value)?;
                if command.is_empty() {
                    return Err("--aged-retention-cmd is empty".to_owned());
                }
                config.aged_retention_command = Some(command);
            }
            "--url" => config.command = vec![http_url(flag, &value)?],
            "--small-retention-url" => {
                config.small_retention_command = Some(vec![http_url(flag, &value)?]);
            }
            "--aged-retention-url" => {
                config.aged_retention_command = Some(vec![http_url(flag, &value)?]);
            }
            "--aged-wait-ms" => config.aged_wait = Duration::from_millis(positive(flag, &value)?),
            "--timeout-ms" => config.timeout = Duration::from_millis(positive(flag, &value)?),
            "--quiet-ms" => config.quiet = Duration::from_millis(number(flag, &value)?),
            "--stream-probe" => {
                config.stream_probe = usize::try_from(positive(flag, &value)?)
                    .map_err(|_| format!("{flag} is too large"))?;
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if config.command.is_empty() {
        return Err("no server command or --url given".to_owned());
    }
    Ok(Request::Run(Box::new(config)))
}

/// A Streamable HTTP endpoint: `http://host:port/path`.
fn http_url(flag: &str, value: &str) -> Result<String, String> {
    match value.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() && !rest.contains(char::is_whitespace) => {
            Ok(value.to_owned())
        }
        _ => Err(format!(
            "{flag} needs an http:// URL (e.g. http://127.0.0.1:8080/mcp), not {value:?}"
        )),
    }
}

fn number(flag: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{flag} needs a whole number, not {value:?}"))
}

fn positive(flag: &str, value: &str) -> Result<u64, String> {
    match number(flag, value)? {
        0 => Err(format!("{flag} must be above 0")),
        n => Ok(n),
    }
}

/// Splits a command line as a POSIX shell would for words: blanks separate, single quotes keep
/// everything, double quotes keep all but `\"` and `\\`, a backslash outside quotes escapes.
fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unclosed ' in a command".to_owned()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unclosed \" in a command".to_owned()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unclosed \" in a command".to_owned()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
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
        for words in [
            &["--url", "https://x/mcp"][..],
            &["--url", "127.0.0.1:9"],
            &["--url", "http://"],
            &["--small-retention-url", "ftp://x", "srv"],
        ] {
            assert!(parse(&args(words)).is_err(), "{words:?}");
        }
    }

    #[test]
    fn shell_words() {
        assert_eq!(
            split_command(r#"a  "b c" 'd "e"' f\ g "h\"i" '' x"#).ok(),
            Some(args(&["a", "b c", "d \"e\"", "f g", "h\"i", "", "x"]))
        );
        assert_eq!(split_command("  ").ok(), Some(Vec::new()));
    }
}
