//! Checkpoints (docs/interface.md "Checkpoints", issue target): one task of `--events` events of
//! 300 B (default 1,000,000) on a data dir, group commit, with a checkpoint every `--every`
//! (default 1,000) whose state is bounded (a build's counters and its last 100 log lines).
//!
//! ```sh
//! cargo run --release -p taskstream-benches --bin checkpoints -- [--events N] [--every K] [--rounds R]
//! ```
//!
//! Each round runs "today" (no checkpoints, the default retention) and "checkpoints"
//! (`retain_from_checkpoint`, the same events plus a checkpoint every K), alternating, and
//! prints per configuration the median append rate (events per second, durable at the end),
//! then for the checkpoints run: the events retained at the end, the data dir's size at the
//! end, after the store's own checkpoint and after an index rebuild (what the background
//! reclaim does, the rebuild once its rate limit allows), and the time
//! from `tasks/stream` (no `after`) to the first event over stdio on a restarted
//! `taskstream serve --retain-from-checkpoint`, with that event's type. `--events 20000
//! --rounds 1` is the smoke run of scripts/test.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::json;
use taskstream_benches::stats::median;
use taskstream_benches::stdio::StdioServer;
use taskstream_benches::store::{complete, create_task, now, open, task_id};
use taskstream_benches::{scratch_dir, taskstream_bin, TICK};
use taskstream_core::{RetentionPolicy, CHECKPOINT_EVENT_TYPE};
use taskstream_store::Durability;

/// The size of each event's payload.
const EVENT_BYTES: usize = 300;
/// Log lines a checkpoint's state keeps.
const LAST_LINES: usize = 100;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            total += if meta.is_dir() {
                dir_bytes(&e.path())
            } else {
                meta.len()
            };
        }
    }
    total
}

/// One event's payload, exactly [`EVENT_BYTES`] long: `{"i":N,"line":"…"}`.
fn line_payload(i: u64) -> String {
    let head = format!(r#"{{"i":{i},"line":""#);
    let fill = EVENT_BYTES - head.len() - 2;
    format!("{head}{}\"}}", "x".repeat(fill))
}

struct Run {
    rate: f64,
    retained: u64,
    bytes_end: u64,
    bytes_checkpointed: u64,
    bytes_reclaimed: u64,
    first_event_ms: f64,
    first_type: String,
}

fn run(events: u64, every: Option<u64>) -> Run {
    let scratch = scratch_dir();
    let dir = scratch.path().join("data");
    let retention = RetentionPolicy {
        retain_from_checkpoint: every.is_some() && !std::env::args().any(|a| a == "--keep-all"),
        ..RetentionPolicy::DEFAULT
    };
    let store = open(Some(&dir), Durability::Group, retention);
    let id = task_id(1);
    create_task(&store, &id);
    let mut last: VecDeque<String> = VecDeque::with_capacity(LAST_LINES);
    let mut bytes = 0u64;
    let started = Instant::now();
    let mut seq = 0;
    for i in 0..events {
        let payload = line_payload(i);
        bytes += payload.len() as u64;
        seq = store
            .emit(&id, TICK, payload.as_bytes(), now())
            .expect("emit")
            .get();
        if let Some(k) = every {
            if last.len() == LAST_LINES {
                last.pop_front();
            }
            last.push_back(format!("line {i}"));
            if (i + 1) % k == 0 {
                let state = json!({"events": i + 1, "bytes": bytes, "last": last});
                let checkpoint = json!({"coversThrough": seq, "state": state}).to_string();
                seq = store
                    .emit(&id, CHECKPOINT_EVENT_TYPE, checkpoint.as_bytes(), now())
                    .expect("checkpoint")
                    .get();
            }
        }
    }
    store
        .wait_durable(&id, taskstream_core::Seq::new(seq).expect("seq"))
        .expect("durable");
    let secs = started.elapsed().as_secs_f64();
    complete(&store, &id);
    let view = store.task(&id).expect("the task");
    let retained = view.retained.next().get() - view.retained.earliest().get();
    let bytes_end = dir_bytes(&dir);
    store.checkpoint().expect("checkpoint");
    let bytes_checkpointed = dir_bytes(&dir);
    // The index rebuild the periodic checkpoint runs once its rate limit allows.
    store.rebuild_index().expect("rebuild");
    let bytes_reclaimed = dir_bytes(&dir);
    drop(store);
    // A late joiner over stdio on the restarted server.
    let dir_arg = dir.to_str().expect("utf-8 path");
    let mut server = StdioServer::spawn(Command::new(taskstream_bin()).args([
        "serve",
        "--data-dir",
        dir_arg,
        "--durability",
        "none",
        "--retain-from-checkpoint",
    ]))
    .expect("serve");
    server.initialize("2025-11-25").expect("initialize");
    let asked = Instant::now();
    let stream = server.open_stream(&id, None).expect("tasks/stream");
    let first = loop {
        let line = server
            .lines
            .next_line()
            .expect("read")
            .expect("an event before the end")
            .to_vec();
        let v: serde_json::Value = serde_json::from_slice(&line).expect("json");
        if v["method"] == "notifications/tasks/event" {
            break v;
        }
    };
    let first_event_ms = asked.elapsed().as_secs_f64() * 1000.0;
    let _ = server.cancel_and_settle(stream);
    let _ = server.close();
    Run {
        rate: (events + every.map_or(0, |k| events / k)) as f64 / secs,
        retained,
        bytes_end,
        bytes_checkpointed,
        bytes_reclaimed,
        first_event_ms,
        first_type: first["params"]["type"].as_str().unwrap_or("").to_owned(),
    }
}

impl Run {
    /// One round's line: its rate, what it retained and the data dir's size at each stage.
    fn report(&self, round: u64, label: &str) {
        println!(
            "round {round}: {label} {:>10.0} events/s; retained {}, data dir {:.1} MiB (after its checkpoint {:.1} MiB, after the index rebuild {:.1} MiB); late joiner's first event {:.2} ms ({})",
            self.rate,
            self.retained,
            self.bytes_end as f64 / 1048576.0,
            self.bytes_checkpointed as f64 / 1048576.0,
            self.bytes_reclaimed as f64 / 1048576.0,
            self.first_event_ms,
            self.first_type
        );
    }
}

fn main() {
    let events = arg("--events", 1_000_000);
    let every = arg("--every", 1_000).max(1);
    let rounds = arg("--rounds", 3).max(1);
    let mut today = Vec::new();
    let mut with = Vec::new();
    for r in 0..rounds {
        let a = run(events, None);
        a.report(r, "today      ");
        let b = run(events, Some(every));
        b.report(r, "checkpoints");
        today.push(a);
        with.push(b);
    }
    let med = |runs: &[Run], f: fn(&Run) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let (ra, rb) = (med(&today, |r| r.rate), med(&with, |r| r.rate));
    println!(
        "medians of {rounds}: {events} events of {EVENT_BYTES} B, a checkpoint every {every}\n  \
         append rate: today {ra:.0}/s, with checkpoints {rb:.0}/s ({:+.1} %)\n  \
         retained at the end: {:.0} (today {:.0})\n  \
         data dir at the end: {:.1} MiB, after the store's checkpoint {:.1} MiB, after the index rebuild {:.1} MiB (today {:.1} / {:.1} / {:.1} MiB)\n  \
         late joiner's first event: {:.2} ms (today {:.2} ms)",
        (rb / ra - 1.0) * 100.0,
        med(&with, |r| r.retained as f64),
        med(&today, |r| r.retained as f64),
        med(&with, |r| r.bytes_end as f64) / 1048576.0,
        med(&with, |r| r.bytes_checkpointed as f64) / 1048576.0,
        med(&with, |r| r.bytes_reclaimed as f64) / 1048576.0,
        med(&today, |r| r.bytes_end as f64) / 1048576.0,
        med(&today, |r| r.bytes_checkpointed as f64) / 1048576.0,
        med(&today, |r| r.bytes_reclaimed as f64) / 1048576.0,
        med(&with, |r| r.first_event_ms),
        med(&today, |r| r.first_event_ms),
    );
    // The smoke run in scripts/test fails here if the rule broke.
    let b = &with[0];
    assert_eq!(
        b.first_type, CHECKPOINT_EVENT_TYPE,
        "a late joiner starts at a checkpoint"
    );
    assert!(
        b.retained <= every + 2,
        "retained {} events, more than one checkpoint's span",
        b.retained
    );
}
