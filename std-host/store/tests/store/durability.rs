//! The durability promise, tested with real processes: the test binary re-invokes itself as a
//! child (selected by `TASKSTREAM_STORE_CHILD`) that appends and reports, and the parent kills it,
//! tears its log, or counts its device flushes.
//!
//! - `acknowledged_events_survive_sigkill`: SIGKILL at seeded random moments, checkpoints and
//!   index rebuilds included, and every fourth kill aimed inside a rebuild (the child frozen
//!   until one is under way; seed printed; set `TASKSTREAM_CRASH_SEED` to replay), then every
//!   acknowledged event is there with the same seq and content, seqs are gap-free, tasks that
//!   were running end `failed`, and one index directory is left.
//! - `a_torn_log_tail_at_every_offset_recovers_to_the_previous_event`.
//! - `fdatasync_calls_follow_the_durability_mode`: counts real syscalls with `strace`; ignored
//!   by default (`needs strace`), run by `scripts/test` with `--ignored`, and failing where
//!   `strace` is missing or may not trace. The append rates are measured by the benches
//!   (`benches/src/bin/store_append_rates.rs`), not here.

// Helpers outside `#[test]` functions unwrap as the tests do (clippy.toml allows it in tests).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use taskstream_core::{record, Millis, RetentionPolicy, Seq};
use taskstream_store::{
    Durability, Store, StoreConfig, StoredEvent, TaskRecord, TaskStatus, STATUS_EVENT_TYPE,
};

const CHILD_ENV: &str = "TASKSTREAM_STORE_CHILD";
const TICK: &str = "dev.taskstream.tick";
const NOW: Millis = Millis(1_000_000);

// ---------------------------------------------------------------------------------------------
// Shared helpers

use crate::files;
use crate::rng;
use files::copy_dir;

use rng::Rng;

fn mode_name(mode: Durability) -> &'static str {
    match mode {
        Durability::Event => "event",
        Durability::Group => "group",
        Durability::None => "none",
        other => panic!("no name for durability {other:?}"),
    }
}

fn parse_mode(s: &str) -> Durability {
    match s {
        "event" => Durability::Event,
        "group" => Durability::Group,
        _ => Durability::None,
    }
}

fn open(dir: &Path, mode: Durability) -> Store {
    Store::open(
        StoreConfig {
            data_dir: Some(dir.to_owned()),
            durability: mode,
            retention: RetentionPolicy::DEFAULT,
            max_store_bytes: taskstream_store::DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: taskstream_store::DEFAULT_INDEX_CACHE_BYTES,
        },
        NOW,
    )
    .unwrap()
}

fn record(id: &str) -> TaskRecord {
    TaskRecord {
        task_id: id.to_owned(),
        principal: "local".to_owned(),
        tool: "emit".to_owned(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: NOW,
        last_updated_at: NOW,
        ttl_ms: None,
        poll_interval_ms: 100,
        result: None,
        error: None,
    }
}

fn payload(task: &str, i: u64) -> Vec<u8> {
    format!(r#"{{"i":{i},"task":"{task}","data":"{}"}}"#, "x".repeat(40)).into_bytes()
}

fn all_events(store: &Store, task: &str) -> Vec<StoredEvent> {
    let mut out = Vec::new();
    let mut from = Seq::ZERO;
    loop {
        let before = out.len();
        store.read_from(task, from, 256, &mut out);
        if out.len() == before {
            return out;
        }
        from = out.last().unwrap().seq.next().unwrap();
    }
}

/// The full name of this module's test `test`, as `--exact` wants it: its module path
/// without the crate's own first segment.
fn test_name(test: &str) -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::{test}")
}

/// Starts this test binary as a child running test `test` in child mode `spec`.
fn spawn_child(test: &str, spec: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            test_name(test).as_str(),
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, spec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The child's mode, if this process is a child.
fn child_spec() -> Option<Vec<String>> {
    std::env::var(CHILD_ENV)
        .ok()
        .map(|s| s.split(';').map(str::to_owned).collect())
}

/// Reads the child's stdout, sending every complete line (a line cut by the kill is dropped).
fn read_lines(out: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(out);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line.last() == Some(&b'\n') => {
                    let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                    if tx.send(text).is_err() {
                        return;
                    }
                }
                Ok(_) => return,
            }
        }
    });
    rx
}

// ---------------------------------------------------------------------------------------------
// SIGKILL at random moments

/// What a child reported before it died.
#[derive(Default)]
struct Acks {
    /// task → (seq → event index) of acknowledged appends.
    events: BTreeMap<String, BTreeMap<u64, u64>>,
    /// task → seq of its acknowledged terminal status event.
    finished: BTreeMap<String, u64>,
}

impl Acks {
    fn take(&mut self, line: &str) -> bool {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["ack", task, seq, i] => {
                self.events
                    .entry((*task).to_owned())
                    .or_default()
                    .insert(seq.parse().unwrap(), i.parse().unwrap());
                true
            }
            ["created", task] => {
                self.events.entry((*task).to_owned()).or_default();
                false
            }
            ["fin", task, seq] => {
                self.finished
                    .insert((*task).to_owned(), seq.parse().unwrap());
                false
            }
            _ => false,
        }
    }
}

/// The child: appends from several threads (plus checkpoints, index rebuilds and sweeps) until
/// killed.
fn crash_child(dir: &Path, mode: Durability, run: &str, seed: u64) -> ! {
    let store = Arc::new(open(dir, mode));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let store = Arc::clone(&store);
            let run = run.to_owned();
            std::thread::spawn(move || {
                let mut rng = Rng(seed ^ (t + 1).wrapping_mul(0x1234_5678_9ABC));
                for k in 0..1_000u64 {
                    let id = format!("{run}-{t}-{k}");
                    store.create_task(record(&id), NOW).unwrap();
                    println!("created {id}");
                    let n = 1 + rng.below(20);
                    // In group mode half the threads pipeline (`emit`): the event is
                    // acknowledged only once seen (below) or waited for, so kills land
                    // between an append's return and its flush.
                    let pipelined = mode == Durability::Group && t % 2 == 0;
                    for i in 0..n {
                        if pipelined {
                            let seq = store.emit(&id, TICK, &payload(&id, i), NOW).unwrap();
                            if rng.below(8) == 0 {
                                store.wait_durable(&id, seq).unwrap();
                                println!("ack {id} {seq} {i}");
                            }
                        } else {
                            let seq = store.append(&id, TICK, &payload(&id, i), NOW).unwrap();
                            println!("ack {id} {seq} {i}");
                        }
                    }
                    if rng.below(3) > 0 {
                        let seq = store
                            .finish(&id, TaskStatus::Completed, None, None, None, NOW)
                            .unwrap();
                        println!("fin {id} {seq}");
                    }
                }
            })
        })
        .collect();
    // What a client would receive: every visible event, read as delivery reads it, is
    // acknowledged (its payload checked first).
    let observer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let mut cursors: BTreeMap<String, u64> = BTreeMap::new();
            let mut epoch = store.changes().epoch();
            loop {
                for view in store.tasks() {
                    let id = view.record.task_id.clone();
                    let from = cursors.entry(id.clone()).or_insert(0);
                    let mut out = Vec::new();
                    store.read_from(&id, Seq::new(*from).unwrap(), 256, &mut out);
                    for e in out {
                        *from = e.seq.get() + 1;
                        if e.event_type == TICK {
                            let i = e.seq.get() - 1;
                            assert_eq!(e.payload, payload(&id, i), "{id} seq {}", e.seq);
                            println!("ack {id} {} {i}", e.seq);
                        }
                    }
                }
                epoch = store.changes().wait_past(epoch, Duration::from_millis(50));
            }
        })
    };
    let maintenance = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            // Every third round rebuilds the index, so that kills also land in rebuilds.
            for round in 0u64.. {
                std::thread::sleep(Duration::from_millis(7));
                if round % 3 == 0 {
                    store.rebuild_index().unwrap();
                } else {
                    store.checkpoint().unwrap();
                }
                store.sweep(NOW);
            }
        })
    };
    for t in threads {
        t.join().unwrap();
    }
    drop(maintenance);
    drop(observer);
    std::process::exit(0);
}

/// Checks everything the children acknowledged against the reopened store.
fn verify(store: &Store, acks: &Acks) {
    for (task, events) in &acks.events {
        let view = store
            .task(task)
            .unwrap_or_else(|| panic!("task {task} lost"));
        let got = all_events(store, task);
        let seqs: Vec<u64> = got.iter().map(|e| e.seq.get()).collect();
        let expected: Vec<u64> = (0..view.retained.next().get()).collect();
        assert_eq!(seqs, expected, "{task}: seqs are gap-free from 0");
        // Every event recovered, acknowledged or not, is the one appended at its seq.
        for e in got.iter().filter(|e| e.event_type == TICK) {
            assert_eq!(
                e.payload,
                payload(task, e.seq.get() - 1),
                "{task} seq {}",
                e.seq
            );
        }
        for (&seq, &i) in events {
            let e = &got[usize::try_from(seq).unwrap()];
            assert_eq!(e.event_type, TICK, "{task} seq {seq}");
            assert_eq!(e.payload, payload(task, i), "{task} seq {seq}");
        }
        // Every task ends with a terminal status event, consistent with its status.
        assert!(view.record.status.is_terminal(), "{task} still running");
        let last = got.last().unwrap();
        assert_eq!(last.event_type, STATUS_EVENT_TYPE);
        let status: serde_json::Value = serde_json::from_slice(&last.payload).unwrap();
        assert_eq!(status["status"], view.record.status.as_str(), "{task}");
        if let Some(&seq) = acks.finished.get(task) {
            assert_eq!(view.record.status, TaskStatus::Completed, "{task}");
            assert_eq!(last.seq.get(), seq, "{task}");
        }
    }
}

#[test]
fn acknowledged_events_survive_sigkill() {
    if let Some(spec) = child_spec() {
        let [dir, mode, run, seed] = spec.as_slice() else {
            panic!("bad child spec {spec:?}");
        };
        crash_child(Path::new(dir), parse_mode(mode), run, seed.parse().unwrap());
    }
    let seed = std::env::var("TASKSTREAM_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    println!("crash test seed: {seed} (TASKSTREAM_CRASH_SEED={seed} to replay)");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut acks = Acks::default();
    let mut interrupted_rebuilds = 0;
    let modes = [Durability::Group, Durability::Event, Durability::None];
    let started = Instant::now();
    for iteration in 0..24 {
        let mode = modes[iteration % modes.len()];
        let child_seed = rng.next();
        let spec = format!(
            "{};{};r{iteration};{child_seed}",
            dir.path().display(),
            mode_name(mode)
        );
        let mut child = spawn_child("acknowledged_events_survive_sigkill", &spec);
        let lines = read_lines(child.stdout.take().unwrap());
        let target = 1 + rng.below(300);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut acked = 0;
        while acked < target {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => acked += u64::from(acks.take(&line)),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("iteration {iteration}: no progress from the child (seed {seed})")
                }
            }
        }
        // Every fourth kill is aimed inside an index rebuild: the child is frozen until one
        // is seen under way. The others land wherever a random pause leaves them.
        let aimed = iteration % 4 == 3;
        if aimed {
            kill_inside_a_rebuild(&mut child, dir.path(), seed);
        } else {
            std::thread::sleep(Duration::from_micros(rng.below(3_000)));
            child.kill().unwrap();
        }
        child.wait().unwrap();
        // Everything printed before the kill is acknowledged.
        for line in lines.iter() {
            acks.take(&line);
        }
        let store = open(dir.path(), mode);
        verify(&store, &acks);
        let stale = store.recovery().stale_index_dirs;
        assert!(
            !aimed || stale > 0,
            "iteration {iteration}: the kill inside a rebuild left no second index directory \
             (seed {seed})"
        );
        interrupted_rebuilds += stale;
        // Whatever rebuild the kill interrupted, one index directory is left.
        assert_eq!(
            index_dirs(dir.path()),
            1,
            "iteration {iteration} (seed {seed})"
        );
        // Only this child's tasks can have been running.
        let this_run = format!("r{iteration}-");
        for id in &store.recovery().failed_tasks {
            assert!(id.starts_with(&this_run), "{id} failed again");
        }
        drop(store);
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "crash test too slow (seed {seed})"
        );
    }
    let total: usize = acks.events.values().map(BTreeMap::len).sum();
    println!(
        "crash test: 24 kills ({interrupted_rebuilds} inside an index rebuild), {} tasks, \
         {total} acknowledged events verified",
        acks.events.len()
    );
    assert!(total >= 24);
    assert!(
        interrupted_rebuilds >= 6,
        "aimed kills missed (seed {seed})"
    );
}

/// The index directories (`index`, `index.<n>`) of a data dir: two while a rebuild is under
/// way, from the new one's creation until the old one is deleted.
fn index_dirs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("index"))
        })
        .count()
}

/// Freezes `child` (SIGSTOP, then waits until every thread of it is stopped) and looks at its
/// data dir: with a rebuild under way, kills it there; otherwise lets it run on and looks
/// again. A frozen process cannot finish its rebuild between the look and the kill.
fn kill_inside_a_rebuild(child: &mut std::process::Child, dir: &Path, seed: u64) {
    use rustix::process::{kill_process, Pid, Signal};
    let pid = Pid::from_child(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "no index rebuild seen under way within 60 s (seed {seed})"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child ended before a kill inside a rebuild (seed {seed})"
        );
        kill_process(pid, Signal::STOP).unwrap();
        wait_all_threads_stopped(child.id(), deadline);
        if index_dirs(dir) > 1 {
            child.kill().unwrap();
            return;
        }
        kill_process(pid, Signal::CONT).unwrap();
        std::thread::yield_now();
    }
}

/// Waits until every thread of process `pid` is in the stopped state (`T` in its
/// `/proc/<pid>/task/<tid>/stat`); a thread inside a system call stops when it returns.
fn wait_all_threads_stopped(pid: u32, deadline: Instant) {
    let stopped = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(Result::ok)
            .all(|t| {
                std::fs::read_to_string(t.path().join("stat")).map_or(true, |stat| {
                    // The state follows the command name, which is in parentheses.
                    stat.rsplit_once(") ")
                        .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
                })
            })
    };
    while !stopped() {
        assert!(Instant::now() < deadline, "the child did not stop");
        std::thread::yield_now();
    }
}

// ---------------------------------------------------------------------------------------------
// A torn log tail, at the store level

/// The non-empty log segments of a data dir.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::metadata(p).unwrap().len() > 0)
        .collect();
    out.sort();
    out
}

#[test]
fn a_torn_log_tail_at_every_offset_recovers_to_the_previous_event() {
    if let Some(spec) = child_spec() {
        // Appends, then exits without closing the store: sled is not flushed, the log has it all.
        let store = open(Path::new(&spec[0]), Durability::Event);
        store.create_task(record("t"), NOW).unwrap();
        for i in 0..3 {
            store.append("t", TICK, &payload("t", i), NOW).unwrap();
        }
        std::process::exit(0);
    }
    let scratch = tempfile::tempdir().unwrap();
    let pristine = scratch.path().join("pristine");
    let mut child = spawn_child(
        "a_torn_log_tail_at_every_offset_recovers_to_the_previous_event",
        &pristine.display().to_string(),
    );
    assert!(child.wait().unwrap().success());
    let segs = segments(&pristine);
    assert_eq!(segs.len(), 1, "{segs:?}");
    let bytes = std::fs::read(&segs[0]).unwrap();
    let mut starts = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        starts.push(at);
        at += record::decode(&bytes[at..]).unwrap().1;
    }
    assert_eq!(starts.len(), 4, "creation and three events");
    let last = starts[3];
    for cut in last..=bytes.len() {
        let dir = scratch.path().join(format!("cut-{cut}"));
        copy_dir(&pristine, &dir);
        let seg = dir.join("wal").join(segs[0].file_name().unwrap());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(cut as u64)
            .unwrap();
        // A torn write is one no fdatasync covered: the log's synced-through mark (written
        // after each sync, never synced itself) may not have survived either. Without it, the
        // whole last segment counts as possibly unsynced; with a mark past the cut, the cut
        // would be synced log lost: damage, refused (tested in the store's own tests).
        std::fs::remove_file(dir.join("wal.synced")).unwrap();
        let store = open(&dir, Durability::Event);
        let complete = cut == bytes.len();
        let events = all_events(&store, "t");
        let ticks = if complete { 3 } else { 2 };
        assert_eq!(events.len(), ticks + 2, "cut at {cut}");
        for (i, e) in events[1..=ticks].iter().enumerate() {
            assert_eq!(e.payload, payload("t", i as u64), "cut at {cut}");
        }
        // The task was running: it ends failed, right after the last surviving event.
        let view = store.task("t").unwrap();
        assert_eq!(view.record.status, TaskStatus::Failed, "cut at {cut}");
        assert_eq!(view.retained.next().get(), ticks as u64 + 2, "cut at {cut}");
        let torn = store.recovery().torn_tail.is_some();
        assert_eq!(torn, cut != last && !complete, "cut at {cut}");
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // A flipped bit in the last record: in log the synced-through mark covers, damage to an
    // acknowledged event, refused naming the segment; past the mark (here: none survived), a
    // torn tail like the cuts above.
    let dir = scratch.path().join("flipped");
    copy_dir(&pristine, &dir);
    let seg = dir.join("wal").join(segs[0].file_name().unwrap());
    let file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    let mut byte = [bytes[last + 12]];
    byte[0] ^= 0x10;
    file.write_all_at(&byte, (last + 12) as u64).unwrap();
    let refused = Store::open(
        StoreConfig {
            data_dir: Some(dir.clone()),
            durability: Durability::Event,
            retention: RetentionPolicy::DEFAULT,
            max_store_bytes: taskstream_store::DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: taskstream_store::DEFAULT_INDEX_CACHE_BYTES,
        },
        NOW,
    )
    .err()
    .expect("damage to synced log is refused")
    .to_string();
    assert!(refused.contains("damaged"), "{refused}");
    assert!(refused.contains(&seg.display().to_string()), "{refused}");
    std::fs::remove_file(dir.join("wal.synced")).unwrap();
    let store = open(&dir, Durability::Event);
    assert_eq!(all_events(&store, "t").len(), 4);
    assert!(store.recovery().torn_tail.is_some());
}

// ---------------------------------------------------------------------------------------------
// Device flushes, counted by strace

/// The child of the flush count: `threads` threads append `per_thread`
/// events each, one task per thread; prints `appends <n> secs <s> syncs <n>`.
fn measure_child(dir: &Path, mode: Durability, threads: u64, per_thread: u64) -> ! {
    let store = Arc::new(open(dir, mode));
    for t in 0..threads {
        store.create_task(record(&format!("m{t}")), NOW).unwrap();
    }
    let before = store.stats().wal;
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let id = format!("m{t}");
                for i in 0..per_thread {
                    store.append(&id, TICK, &payload(&id, i), NOW).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let syncs = store.stats().wal.syncs - before.syncs;
    println!("appends {} secs {secs} syncs {syncs}", threads * per_thread);
    std::io::stdout().flush().unwrap();
    drop(store);
    std::process::exit(0);
}

struct Measured {
    appends: u64,
    syncs: u64,
    fdatasyncs: Option<u64>,
}

/// Runs the measure child (under `strace -c` when `strace` is given) and parses its report.
fn run_measure(
    dir: &Path,
    mode: Durability,
    threads: u64,
    per_thread: u64,
    strace: bool,
) -> Measured {
    let spec = format!(
        "{};{};{threads};{per_thread}",
        dir.display(),
        mode_name(mode)
    );
    let exe = std::env::current_exe().unwrap();
    let summary = dir.with_extension("strace");
    let mut cmd = if strace {
        let mut c = Command::new("strace");
        c.args(["-f", "-c", "-e", "trace=fdatasync,fsync", "-o"])
            .arg(&summary)
            .arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd
        .args([
            test_name("fdatasync_calls_follow_the_durability_mode").as_str(),
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, spec)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "measure child failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // libtest may print the test's name on the same line.
    let line = stdout
        .lines()
        .find_map(|l| l.find("appends ").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no report in {stdout:?}"));
    let f: Vec<&str> = line.split(' ').collect();
    let fdatasyncs = strace.then(|| {
        let text = std::fs::read_to_string(&summary).unwrap();
        text.lines()
            .find(|l| l.trim_end().ends_with(" fdatasync"))
            .and_then(|l| l.split_whitespace().nth(3))
            .map_or(0, |n| n.parse().unwrap())
    });
    Measured {
        appends: f[1].parse().unwrap(),
        syncs: f[5].parse().unwrap(),
        fdatasyncs,
    }
}

/// In a child process started by [`run_measure`]: runs the measurement it names, then exits.
fn measure_if_child() {
    if let Some(spec) = child_spec() {
        let [dir, mode, threads, per_thread] = spec.as_slice() else {
            panic!("bad child spec {spec:?}");
        };
        measure_child(
            Path::new(dir),
            parse_mode(mode),
            threads.parse().unwrap(),
            per_thread.parse().unwrap(),
        );
    }
}

#[test]
#[ignore = "needs strace (scripts/test installs it and runs this with --ignored)"]
fn fdatasync_calls_follow_the_durability_mode() {
    measure_if_child();
    // strace must be installed and allowed to trace (ptrace may be forbidden in a container).
    let can_trace = Command::new("strace")
        .args(["-f", "-c", "-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        can_trace,
        "strace is missing or may not trace (ptrace forbidden?): this test needs it"
    );
    let scratch = tempfile::tempdir().unwrap();
    for (mode, threads, per_thread) in [
        (Durability::Event, 1, 200),
        (Durability::Group, 8, 50),
        (Durability::None, 1, 200),
    ] {
        let dir = scratch.path().join(mode_name(mode));
        let m = run_measure(&dir, mode, threads, per_thread, true);
        let fdatasyncs = m.fdatasyncs.unwrap();
        println!(
            "{}: {} appends, {} log flushes counted by the store, {fdatasyncs} fdatasync calls \
             in the process",
            mode_name(mode),
            m.appends,
            m.syncs
        );
        match mode {
            // Each append flushed, plus the creation events and checkpoints around them.
            Durability::Event => {
                assert_eq!(m.syncs, m.appends);
                assert!(fdatasyncs >= m.appends, "{fdatasyncs}");
            }
            Durability::Group => {
                assert!(m.syncs >= 1 && m.syncs <= m.appends, "{}", m.syncs);
                assert!(fdatasyncs >= m.syncs, "{fdatasyncs}");
            }
            Durability::None => {
                assert_eq!(m.syncs, 0);
                assert_eq!(fdatasyncs, 0);
            }
            other => panic!("no flush count expected for durability {other:?}"),
        }
    }
}
