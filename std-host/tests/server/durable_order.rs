//! Nothing is delivered before it is durable, seen from outside: the real server runs under
//! `strace`, which records every `write` and `fdatasync` of every thread in the order the
//! kernel ran them; a task emits as fast as it can while a client streams it live. For each
//! event the client is sent (a write to stdout), the log segment write holding it must have
//! completed before an `fdatasync` of that segment that completed before the send began. In
//! `event` mode there is also at least one `fdatasync` per event. Ignored by default (`needs
//! strace`): `scripts/test` installs `strace` and runs it with `--ignored`; where `strace` is
//! missing or may not trace it fails.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use super::client::{bin, Server};

const EVENTS: u64 = 3000;

fn can_trace() -> bool {
    Command::new("strace")
        .args(["-f", "-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Every `index` of an `emit` payload (`{"i":index,…}`) in a line of strace output, where
/// quotes are escaped as `\"`.
fn indexes(text: &str) -> Vec<u64> {
    const MARK: &str = r#"\"i\":"#;
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        rest = &rest[at + MARK.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(i) = digits.parse() {
            out.push(i);
        }
    }
    out
}

/// A syscall of the trace, put together from its line or its `unfinished` / `resumed` pair.
struct Call {
    name: String,
    /// The file descriptor's path as `strace -y` prints it (`<…>`), or "" if none.
    path: String,
    /// The line of the call's entry (holds the written bytes).
    entry: String,
}

/// What the trace shows: events written to each segment, made durable, and sent.
#[derive(Default)]
struct Replay {
    written: HashMap<String, BTreeSet<u64>>,
    durable: BTreeSet<u64>,
    delivered: BTreeSet<u64>,
    early: Vec<u64>,
    fdatasyncs: u64,
    /// Per thread: a syscall entered and not yet returned, with the written set of its segment
    /// as it was at entry (for an `fdatasync`).
    open: HashMap<String, (Call, BTreeSet<u64>)>,
}

fn call_of(body: &str) -> Option<Call> {
    let paren = body.find('(')?;
    let name = body[..paren].to_owned();
    let args = &body[paren + 1..];
    let path = match (args.find('<'), args.find('>')) {
        (Some(a), Some(b)) if a < b => args[a + 1..b].to_owned(),
        _ => String::new(),
    };
    Some(Call {
        name,
        path,
        entry: body.to_owned(),
    })
}

impl Replay {
    fn line(&mut self, line: &str) {
        let Some((pid, body)) = line.split_once(char::is_whitespace) else {
            return;
        };
        let body = body.trim_start();
        if body.starts_with("<...") {
            if let Some((call, snapshot)) = self.open.remove(pid) {
                self.finish(&call, snapshot, body);
            }
            return;
        }
        let Some(call) = call_of(body) else { return };
        // Entry: a send is judged by what was durable when it began.
        if call.name.starts_with("write") && call.entry.contains("(1<") {
            for i in indexes(&call.entry) {
                if !self.durable.contains(&i) {
                    self.early.push(i);
                }
                self.delivered.insert(i);
            }
        }
        let snapshot = if call.name == "fdatasync" {
            self.written.get(&call.path).cloned().unwrap_or_default()
        } else {
            BTreeSet::new()
        };
        if body.ends_with("<unfinished ...>") {
            self.open.insert(pid.to_owned(), (call, snapshot));
        } else {
            let result = body.rsplit_once(" = ").map_or("", |(_, r)| r).to_owned();
            self.finish(&call, snapshot, &format!(" = {result}"));
        }
    }

    fn finish(&mut self, call: &Call, snapshot: BTreeSet<u64>, tail: &str) {
        let ok = tail
            .rsplit_once(" = ")
            .is_some_and(|(_, r)| !r.starts_with('-'));
        if !ok {
            return;
        }
        if call.path.ends_with(".wal") {
            // The log writes its segments with `pwrite64` at their end.
            if call.name.starts_with("write") || call.name.starts_with("pwrite") {
                self.written
                    .entry(call.path.clone())
                    .or_default()
                    .extend(indexes(&call.entry));
            } else if call.name == "fdatasync" {
                self.fdatasyncs += 1;
                self.durable.extend(snapshot);
            }
        }
    }
}

/// Runs `serve --data-dir … --durability MODE` under strace while one task emits `EVENTS`
/// events and a client streams them live; returns the trace replayed.
fn traced_run(dir: &Path, mode: &str) -> Replay {
    let trace = dir.join(format!("{mode}.strace"));
    let data = dir.join(mode);
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-y", "-qq", "-s", "8388608"])
        .args(["-e", "trace=write,writev,pwrite64,fdatasync"])
        .arg("-o")
        .arg(&trace)
        .arg(bin())
        .args(["serve", "--durability", mode, "--data-dir"])
        .arg(&data)
        .env_remove("TASKSTREAM_PRINCIPAL");
    let mut s = Server::spawn_from(cmd);
    s.initialize("2025-11-25");
    let created = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": EVENTS, "payload_bytes": 40},
               "task": {"ttl": 600_000}}),
    );
    let task = created["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{mode}: no task in {created}"))
        .to_owned();
    // The events themselves are judged from the trace; the stream's end is what is awaited.
    let end = s.call("tasks/stream", json!({"taskId": task}));
    assert!(end.get("result").is_some(), "{mode}: stream ended {end}");
    let status = s.shutdown();
    assert!(
        status.success(),
        "{mode}: server under strace exited {status}"
    );
    let text = std::fs::read_to_string(&trace).expect("trace");
    let mut replay = Replay::default();
    for line in text.lines() {
        replay.line(line);
    }
    replay
}

#[test]
#[ignore = "needs strace (scripts/test installs it and runs this with --ignored)"]
fn no_event_is_sent_before_an_fdatasync_covers_it() {
    assert!(
        can_trace(),
        "strace is missing or may not trace (ptrace forbidden?): this test needs it"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in ["group", "event"] {
        let r = traced_run(dir.path(), mode);
        println!(
            "{mode}: {} events sent, {} fdatasync calls on the log, {} sent early",
            r.delivered.len(),
            r.fdatasyncs,
            r.early.len()
        );
        assert_eq!(
            r.delivered,
            (0..EVENTS).collect::<BTreeSet<_>>(),
            "{mode}: every event seen in a send to the client"
        );
        assert!(
            r.early.is_empty(),
            "{mode}: sent before an fdatasync covered them: {:?}",
            &r.early[..r.early.len().min(20)]
        );
        if mode == "event" {
            assert!(
                r.fdatasyncs >= EVENTS,
                "event mode: {} fdatasyncs for {EVENTS} events",
                r.fdatasyncs
            );
        } else {
            assert!(
                r.fdatasyncs >= 1 && r.fdatasyncs < EVENTS,
                "group mode: {} fdatasyncs for {EVENTS} events (flushes shared)",
                r.fdatasyncs
            );
        }
    }
}
