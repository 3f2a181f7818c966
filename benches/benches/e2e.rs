//! End to end through the real binary: `taskstream serve --in-memory --durability none` as a
//! child process, read by the raw-bytes client of `taskstream_benches::stdio` (lines split with
//! `memchr`, events recognised by their first bytes, no JSON parsing of events).
//!
//! - `e2e_stdio_N/replay_finished`: `tasks/stream {after: 0}` on a finished `emit` task of N
//!   events (N + 2 with its status events; N = `$TASKSTREAM_BENCH_EVENTS`, 100k by default):
//!   from sending the request to the last event. Throughput = events received.
//! - `e2e_stdio_N/live_emit`: `tools/call emit {count: N}` as a task, then `tasks/stream` on it
//!   while it runs: from sending the call to the last event (a fresh server each time).
//! - `e2e_first_event_N/replay_finished`: as the first, to the first event (then the stream is
//!   cancelled and the pipe drained, untimed).
//!
//! The binary is `$TASKSTREAM_BIN`, else the same profile's `taskstream`, rebuilt first.

use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use taskstream_benches::scale::Scale;
use taskstream_benches::stdio::StdioServer;
use taskstream_benches::{emit_data_len, taskstream_bin, PAYLOAD_BYTES};

/// A server started with `extra` flags besides `serve --in-memory --durability none`.
fn server(extra: &[&str]) -> StdioServer {
    let mut cmd = Command::new(taskstream_bin());
    cmd.args(["serve", "--in-memory", "--durability", "none"])
        .args(extra);
    let mut s = StdioServer::spawn(&mut cmd).expect("spawn taskstream serve");
    s.initialize("2025-11-25").expect("initialize");
    s
}

fn e2e(c: &mut Criterion) {
    let n = Scale::current().replay_events() as u64;
    let data = emit_data_len(PAYLOAD_BYTES);
    let max_events = (n + 10).to_string();

    // A finished task of n events to replay.
    let mut replay = server(&["--max-events-per-task", &max_events]);
    let task = replay.emit_task(n, data).expect("emit");
    let status = replay.wait_terminal(&task).expect("wait");
    assert_eq!(status, "completed");
    let expected = n + 1; // after 0: seqs 1 ..= n + 1

    let mut group = c.benchmark_group(format!("e2e_stdio_{n}"));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Scale::current().measurement_time(Duration::from_secs(8)));
    group.throughput(Throughput::Elements(expected));
    group.bench_function("replay_finished", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let id = replay.open_stream(&task, Some(0)).expect("stream");
                let got = replay.events(start, expected).expect("events");
                assert_eq!((got.events, got.out_of_order), (expected, 0));
                total += got.last;
                replay.response(id).expect("the stream's result");
            }
            total
        })
    });

    // Live: a fresh server per iteration (started untimed), so no earlier task's cleanup
    // (terminal retention removing tens of thousands of events) runs during the measurement.
    group.throughput(Throughput::Elements(n + 2));
    group.bench_function("live_emit", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut live = server(&["--max-events-per-task", &max_events]);
                let start = Instant::now();
                let task = live.emit_task(n, data).expect("emit");
                let id = live.open_stream(&task, None).expect("stream");
                let got = live.events(start, n + 2).expect("events");
                assert_eq!((got.events, got.out_of_order), (n + 2, 0));
                total += got.last;
                live.response(id).expect("the stream's result");
                let status = live.close().expect("close");
                assert!(status.success(), "taskstream serve exited with {status}");
            }
            total
        })
    });
    group.finish();

    let mut group = c.benchmark_group(format!("e2e_first_event_{n}"));
    group.measurement_time(Scale::current().measurement_time(Duration::from_secs(5)));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("replay_finished", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let id = replay.open_stream(&task, Some(0)).expect("stream");
                let got = replay.events(start, 1).expect("events");
                assert_eq!(got.events, 1);
                total += got.first;
                replay.cancel_and_settle(id).expect("cancel");
            }
            total
        })
    });
    group.finish();
    let status = replay.close().expect("close");
    assert!(status.success(), "taskstream serve exited with {status}");
}

criterion_group!(benches, e2e);
criterion_main!(benches);
