//! Isolation: a task belongs to the principal that created it and every other principal sees
//! it exactly as an unknown task, byte for byte and across restarts (SE-01, SE-03); task ids
//! cannot be guessed; the data dir is its owner's only, held by one server at a time, and what
//! retention removes is removed from disk; payloads never reach the logs (SE-08).

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::check::{assert_healthy, assert_intact, start_emit, stream_all, wait_terminal};
use super::client::{modern, Server, DEADLINE};
use super::files::{files_containing, walk};

/// A server on `dir` as `principal` with a completed legacy handshake.
fn legacy_on(dir: &Path, principal: &str, extra: &[&str]) -> Server {
    let mut s = Server::on_dir(dir, principal, extra);
    s.initialize("2025-11-25");
    s
}

/// The raw answer of `method` with `params` sent with id `"probe"`.
fn raw_answer(s: &mut Server, method: &str, params: Value) -> String {
    s.send(&json!({"jsonrpc": "2.0", "id": "probe", "method": method, "params": params}));
    s.response_to(&json!("probe")).raw
}

/// Every way of naming a task, in both eras, for `task`.
fn probes(task: &str) -> Vec<(&'static str, Value, bool)> {
    let t = json!({"taskId": task});
    vec![
        ("tasks/get", t.clone(), false),
        ("tasks/cancel", t.clone(), false),
        ("tasks/result", t.clone(), false),
        ("tasks/stream", t.clone(), false),
        ("tasks/stream", json!({"taskId": task, "after": 0}), false),
        ("tasks/stream", json!({"taskId": task, "after": 3}), false),
        ("tasks/get", modern(t.clone(), true), true),
        ("tasks/cancel", modern(t.clone(), true), true),
        (
            "tasks/update",
            modern(json!({"taskId": task, "inputResponses": {}}), true),
            true,
        ),
        ("tasks/stream", modern(t.clone(), true), true),
        (
            "tasks/stream",
            modern(json!({"taskId": task, "after": 1}), true),
            true,
        ),
    ]
}

/// Checks that bob's answers about `task` are byte-identical to his answers about an id that
/// was never issued, for every Tasks method and `tasks/stream`, in both eras.
fn assert_invisible(dir: &Path, tasks: &[&str]) {
    let never = "5f0e3c2a9b8d7f6e5d4c3b2a19081726";
    // Modern requests (no initialize) first, then legacy ones, each on a fresh server.
    for legacy in [false, true] {
        let mut bob = Server::on_dir(dir, "bob", &[]);
        if legacy {
            bob.initialize("2025-11-25");
        }
        for task in tasks {
            for ((method, params, is_modern), (_, unknown, _)) in
                probes(task).into_iter().zip(probes(never))
            {
                if is_modern == legacy {
                    continue;
                }
                let theirs = raw_answer(&mut bob, method, params.clone());
                let none = raw_answer(&mut bob, method, unknown);
                assert_eq!(theirs, none, "{method} {params}");
                assert!(theirs.contains(r#""reason":"unknown_task""#), "{theirs}");
            }
        }
        if legacy {
            assert_eq!(bob.ok("tasks/list", json!({}))["tasks"], json!([]));
        }
        bob.shutdown();
    }
}

#[test]
fn se03_principal_binding_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut alice = legacy_on(dir.path(), "alice", &[]);
    let done = start_emit(&mut alice, 4, 0, 8);
    wait_terminal(&mut alice, &done.task);
    let running = start_emit(&mut alice, 100_000, 5, 8);
    // Wait until some events of the running task are durable.
    let end = std::time::Instant::now() + DEADLINE;
    while alice.ok("tasks/get", json!({"taskId": running.task}))["_meta"]["dev.taskstream/events"]
        ["nextSeq"]
        .as_u64()
        .unwrap_or(0)
        < 5
    {
        assert!(std::time::Instant::now() < end);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    alice.kill();

    assert_invisible(dir.path(), &[&done.task, &running.task]);

    // Alice, again: both visible; bob's cancel and stream attempts changed nothing; the task
    // that was running at the crash ended failed, its events gap-free.
    let mut alice = legacy_on(dir.path(), "alice", &[]);
    assert_intact(&mut alice, &done);
    let r = alice.ok("tasks/get", json!({"taskId": running.task}));
    assert_eq!(r["status"], json!("failed"), "{r}");
    let (events, _) = stream_all(&mut alice, json!({"taskId": running.task}));
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert!(seqs.len() >= 6, "{}", seqs.len());
    for (i, e) in events.iter().enumerate().skip(1).take(seqs.len() - 2) {
        assert_eq!(e["payload"], json!({"i": i - 1, "data": "xxxxxxxx"}));
    }
    assert_eq!(events[seqs.len() - 1]["payload"]["status"], json!("failed"));
    // Both, and nothing else: two tasks created in the same millisecond may list in either
    // order, so the comparison is of the sets.
    let mut listed: Vec<String> = alice.ok("tasks/list", json!({}))["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["taskId"].as_str().map(str::to_owned))
        .collect();
    listed.sort();
    let mut expected = vec![done.task.clone(), running.task.clone()];
    expected.sort();
    assert_eq!(listed, expected);
}

#[test]
fn task_ids_are_unguessable() {
    const N: usize = 1000;
    let mut s = Server::legacy(&[]);
    let mut ids = HashSet::new();
    let mut ones = [0u32; 128];
    for _ in 0..N {
        let r = s.ok(
            "tools/call",
            json!({"name": "emit", "arguments": {"count": 0}, "task": {}}),
        );
        let id = r["task"]["taskId"].as_str().expect("taskId").to_owned();
        // 32 lowercase hex digits: 128 bits, all of them random.
        assert_eq!(id.len(), 32, "{id}");
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{id}"
        );
        let bits = u128::from_str_radix(&id, 16).expect("hex");
        for (i, n) in ones.iter_mut().enumerate() {
            *n += u32::try_from((bits >> i) & 1).expect("bit");
        }
        assert!(ids.insert(id), "a repeated task id");
    }
    assert_eq!(ids.len(), N);
    // Every one of the 128 bits is a fair coin: set in 500 ± 100 of 1000 ids (6 standard
    // deviations; a counter, a clock or a constant bit fails at once). So ≥ 122 bits vary.
    for (i, n) in ones.iter().enumerate() {
        assert!((400..=600).contains(n), "bit {i} set in {n} of {N} ids");
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
}

#[test]
fn the_data_dir_and_its_files_are_owner_only() {
    let root = tempfile::tempdir().expect("tempdir");
    // Neither the data dir nor its parent exists yet.
    let dir = root.path().join("parent").join("data");
    let mut s = legacy_on(&dir, "local", &[]);
    let e = start_emit(&mut s, 20, 0, 100);
    wait_terminal(&mut s, &e.task);
    assert_eq!(s.shutdown().code(), Some(0));
    let mut all = vec![dir.clone()];
    walk(&dir, &mut all);
    assert!(all.len() > 3, "{all:?}");
    for p in &all {
        let want = if p.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(p), want, "{} is {:o}", p.display(), mode(p));
    }
    assert_eq!(mode(&root.path().join("parent")), 0o700);
    // A restart on the same dir keeps it so.
    let mut s = legacy_on(&dir, "local", &[]);
    assert_intact(&mut s, &e);
    s.shutdown();
    let mut all = vec![dir.clone()];
    walk(&dir, &mut all);
    for p in &all {
        let want = if p.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(p), want, "{} is {:o}", p.display(), mode(p));
    }
}

/// The files the server process has open, other than pipes, sockets and the like.
fn open_files_of(pid: u32) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fds") {
        if let Ok(target) = std::fs::read_link(fd.expect("fd").path()) {
            if target.is_absolute() && !target.starts_with("/dev") {
                out.push(target);
            }
        }
    }
    out
}

/// The scratch directories (of in-memory stores of earlier versions) under `base` named for
/// process `pid`.
fn scratch_dirs_of(base: &Path, pid: u32) -> Vec<PathBuf> {
    let prefix = format!("taskstream-mem-{pid}-");
    std::fs::read_dir(base)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn in_memory_payloads_stay_in_the_process_and_old_scratch_dirs_are_reaped() {
    // `--in-memory` keeps tasks and events in the process's own memory: no file (not even on
    // /dev/shm) holds a payload, so no other local user can read one and nothing outlives a
    // kill. Earlier versions kept sled files in `taskstream-mem-<pid>-*` scratch directories on
    // /dev/shm (else the temp dir); one left by a process that died is reaped at start.
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dead = {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        pid
    };
    let left = base.join(format!("taskstream-mem-{dead}-1"));
    std::fs::create_dir_all(&left).expect("a leftover scratch dir");
    std::fs::write(left.join("db"), b"payloads of a killed server").expect("write");
    let mut s = Server::legacy(&[]);
    let e = start_emit(&mut s, 200, 0, 1000);
    wait_terminal(&mut s, &e.task);
    assert!(!left.exists(), "{} was not reaped", left.display());
    assert_eq!(open_files_of(s.pid()), Vec::<PathBuf>::new(), "files open");
    assert_eq!(scratch_dirs_of(&base, s.pid()), Vec::<PathBuf>::new());
    assert_healthy(&mut s, &[e]);
    let pid = s.pid();
    s.kill();
    assert_eq!(scratch_dirs_of(&base, pid), Vec::<PathBuf>::new());
}

#[test]
fn payloads_never_reach_stderr_at_the_default_level() {
    const MARK: &str = "MARKER-7f3a9c-secret";
    let mut s = Server::legacy(&[]);
    // Event payloads of a trace (its text) and of emit.
    let r = s.ok(
        "tools/call",
        json!({"name": "run_trace", "arguments": {"name": "code-review", "speed": 100000}, "task": {}}),
    );
    let trace = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    wait_terminal(&mut s, &trace);
    let (events, _) = stream_all(&mut s, json!({"taskId": trace}));
    let texts: Vec<String> = events
        .iter()
        .filter_map(|e| {
            e["payload"]["steps"][2]["title"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    let payload_text = texts.first().expect("a plan event").clone();
    assert_eq!(payload_text, "Review the middleware and its wiring");
    let e = start_emit(&mut s, 3, 0, 0);
    wait_terminal(&mut s, &e.task);
    // Client text everywhere a careless server might echo it into a log.
    for line in [
        format!(
            r#"{{"jsonrpc":"2.0","id":"{MARK}","method":"tools/call","params":{{"name":"{MARK}"}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"emit","arguments":{{"{MARK}":1}}}}}}"#
        ),
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"{MARK}","params":{{}}}}"#),
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{{"taskId":"{MARK}"}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tasks/stream","params":{{"taskId":"{MARK}"}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":"x","reason":"{MARK}"}}}}"#
        ),
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"{MARK}":"#),
        format!("{MARK}\u{0}"),
    ] {
        s.send_raw(line.as_bytes());
    }
    assert_eq!(s.ok("ping", json!({})), json!({}));
    let (status, log) = s.shutdown_and_log();
    assert_eq!(status.code(), Some(0));
    assert!(log.contains("created"), "the log is on: {log}");
    assert!(!log.contains(MARK), "{log}");
    assert!(!log.contains(&payload_text), "{log}");
    assert!(!log.contains("\"data\""), "{log}");
}

#[test]
fn a_data_dir_held_by_another_server_is_refused_and_not_corrupted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut first = legacy_on(dir.path(), "local", &[]);
    let done = start_emit(&mut first, 10, 0, 50);
    wait_terminal(&mut first, &done.task);
    let running = start_emit(&mut first, 100, 10, 50);
    // A second server on the same dir stops at once with a clear message.
    let mut second = Server::on_dir(dir.path(), "local", &[]);
    let status = second.wait_exit();
    assert_eq!(status.code(), Some(1));
    // (The stderr reader may lag the exit; wait for the line.)
    second.wait_stderr("in use by another taskstream server");
    let err = second.stderr();
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
    // The first one never noticed.
    assert_healthy(&mut first, &[done.clone(), running.clone()]);
    assert_eq!(first.shutdown().code(), Some(0));
    // And the dir is whole for the next one.
    let mut third = legacy_on(dir.path(), "local", &[]);
    for t in [&done, &running] {
        assert_intact(&mut third, t);
    }
}

#[test]
fn retention_deletes_events_from_the_data_dir() {
    // The events of a task past its terminal retention are gone from every file of the data
    // dir, not just unreachable (SE-08).
    let mark = b"Review the middleware and its wiring";
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = legacy_on(dir.path(), "local", &["--terminal-retention", "1"]);
    let r = s.ok(
        "tools/call",
        json!({"name": "run_trace", "arguments": {"name": "code-review", "speed": 100000}, "task": {}}),
    );
    let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    wait_terminal(&mut s, &task);
    assert!(
        !files_containing(dir.path(), mark).is_empty(),
        "the payload was written"
    );
    // Removed from the server's view…
    let end = std::time::Instant::now() + DEADLINE;
    while s
        .call_line("tasks/get", json!({"taskId": task}))
        .v
        .get("error")
        .is_none()
    {
        assert!(std::time::Instant::now() < end, "not removed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // …and, while the server keeps running, from every file of the data dir: the write-ahead
    // log (a checkpoint deletes its segments) and the index (rebuilt without the task at the
    // next checkpoint, every 5 s).
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let left = files_containing(dir.path(), mark);
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "payload still on disk after {DEADLINE:?}: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The rebuild says what it did, without payloads.
    s.wait_stderr("index rebuilt without 1 removed task(s)");
    // A clean shutdown (a last checkpoint) writes nothing of it back.
    assert_eq!(s.shutdown().code(), Some(0));
    let left = files_containing(dir.path(), mark);
    assert_eq!(left, Vec::<PathBuf>::new(), "payload left on disk");
    let mut s = legacy_on(dir.path(), "local", &[]);
    let e = s.err("tasks/get", json!({"taskId": task}));
    assert_eq!(e["data"]["reason"], json!("unknown_task"));
}
