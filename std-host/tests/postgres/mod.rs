//! The PostgreSQL store (`serve --store postgres://…`, docs/interface.md "A shared store for
//! several replicas") against a real PostgreSQL that each test starts itself
//! (`scripts/postgres`): several `taskstream serve` replicas on one database, a replica killed
//! with SIGKILL mid-task, racing writers, the database restarted under load, principal
//! isolation across replicas, and the faults an operator meets (a wrong URL, a database down
//! at start, a newer schema, a user without rights, connections dropped mid-append).
//!
//! Run with `TASKSTREAM_PG_TESTS=1` (scripts/test sets it); without it every test says SKIP.

#[allow(dead_code)]
use crate::server::client;
mod cluster;
#[allow(dead_code)]
use crate::http::client as http_client;
mod store;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use client::{seqs, Server};
use cluster::Cluster;

/// The lease timeout the replica tests run with.
const LEASE_SECS: u64 = 2;

/// A replica on `url` with a completed legacy handshake (2025-11-25); `extra` flags added.
fn replica(url: &str, extra: &[&str]) -> Server {
    let lease = LEASE_SECS.to_string();
    let mut args = vec!["--store", url, "--lease-timeout", &lease];
    args.extend_from_slice(extra);
    let mut s = Server::spawn(&args);
    s.initialize("2025-11-25");
    s
}

/// Starts an `emit` task; returns its id.
fn start(s: &mut Server, args: Value) -> String {
    let r = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": args, "task": {}}),
    );
    r["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {r}"))
        .to_owned()
}

/// Streams `task` from the start to its end; returns the events (params) and the response.
fn replay(s: &mut Server, task: &str) -> (Vec<Value>, Value) {
    let id = s.request("tasks/stream", json!({"taskId": task}));
    s.collect_stream(id, task)
}

/// The next `n` events of `task` on `s` (notifications' params).
fn next_events(s: &mut Server, task: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|_| {
            s.recv("an event", |v| {
                v["method"] == "notifications/tasks/event" && v["params"]["taskId"] == task
            })["params"]
                .clone()
        })
        .collect()
}

/// Seqs 0, 1, 2, … with no gap (EV-02, EV-03).
#[track_caller]
fn assert_dense(events: &[Value]) {
    let s = seqs(events);
    let want: Vec<u64> = (0..s.len() as u64).collect();
    assert_eq!(s, want, "seqs are dense from 0");
}

/// Every event `seen` (from any client) is in `all`, the same at the same seq.
#[track_caller]
fn assert_contains(all: &[Value], seen: &[Value]) {
    for e in seen {
        let seq = e["seq"].as_u64().expect("seq");
        let same = all.iter().find(|x| x["seq"].as_u64() == Some(seq));
        assert_eq!(same, Some(e), "event {seq} is still there, unchanged");
    }
}

fn status_of(e: &Value) -> Option<&str> {
    (e["type"] == "dev.taskstream.task.status")
        .then(|| e["payload"]["status"].as_str())
        .flatten()
}

#[test]
fn a_task_created_on_one_replica_streams_on_another_and_ends_failed_when_its_replica_is_killed() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("replicas");
    let mut a = replica(&url, &[]);
    let mut b = replica(&url, &[]);
    let mut c = replica(&url, &[]);
    let task = start(&mut a, json!({"count": 100000, "interval_ms": 10}));

    // B streams the task A runs, live: the same seqs and payloads A appended.
    let stream = b.request("tasks/stream", json!({"taskId": task}));
    let seen_live = next_events(&mut b, &task, 25);
    assert_dense(&seen_live);

    // C waits for the task's result (legacy tasks/result), which no task thread of C's will
    // announce: C learns of the end from the database.
    let waiting = c.request("tasks/result", json!({"taskId": task}));

    a.kill();
    let killed = Instant::now();
    // B's stream goes on to the terminal status event another replica wrote once A's lease
    // expired, then completes.
    let (rest, end) = b.collect_stream(stream, &task);
    let ended_after = killed.elapsed();
    assert!(end.get("error").is_none(), "the stream completes: {end}");
    let mut on_b = seen_live.clone();
    on_b.extend(rest);
    assert_dense(&on_b);
    let last = on_b.last().expect("events");
    assert_eq!(status_of(last), Some("failed"), "{last}");
    assert_eq!(
        last["payload"]["message"],
        taskstream_store::pg::LEASE_FAILURE_MESSAGE
    );
    // Within the lease timeout (plus what the notification takes to arrive).
    assert!(
        ended_after < Duration::from_secs(LEASE_SECS) + Duration::from_millis(1500),
        "ended {ended_after:?} after the kill"
    );

    // C's waiting tasks/result is answered (a failed task's answer is its error).
    let answer = c.response(waiting);
    assert!(answer.get("error").is_some(), "{answer}");
    // C sees it failed, and every event any client received is still there, unchanged.
    let t = c.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(t["status"], "failed", "{t}");
    let (all, end) = replay(&mut c, &task);
    assert!(end.get("error").is_none(), "{end}");
    assert_dense(&all);
    assert_eq!(all, on_b, "C replays exactly what B received");
    assert_eq!(all.iter().filter(|e| status_of(e).is_some()).count(), 2);
}

/// Three replicas under load (tasks appending as fast as they can, in batches), one killed
/// with SIGKILL mid-batch, then the database restarted once: every event a client received is
/// still there with the same seq and payload, no seq names two events, and the dead replica's
/// tasks end `failed` within the lease timeout.
#[test]
fn a_replica_killed_mid_batch_and_a_database_restart_lose_no_received_event() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("fleet");
    // Nothing is dropped by the count limit: every event stays to be checked.
    let keep = ["--max-events-per-task", "100000000"];
    let mut a = replica(&url, &keep);
    let mut b = replica(&url, &keep);
    let mut c = replica(&url, &keep);
    // A runs tasks that never end by themselves, two of them flat out (batches of many
    // events); B and C run bounded ones.
    let doomed: Vec<String> = [1, 0, 0]
        .iter()
        .map(|ms| start(&mut a, json!({"count": 1_000_000, "interval_ms": ms})))
        .collect();
    let survivors: Vec<String> = (0..2)
        .map(|_| start(&mut b, json!({"count": 3000, "interval_ms": 1})))
        .chain((0..2).map(|_| start(&mut c, json!({"count": 3000, "interval_ms": 1}))))
        .collect();

    // B follows one of A's tasks, C one of B's, live.
    let on_b = b.request("tasks/stream", json!({"taskId": doomed[0]}));
    let mut seen_doomed = next_events(&mut b, &doomed[0], 200);
    let on_c = c.request("tasks/stream", json!({"taskId": survivors[0]}));
    let mut seen_survivor = next_events(&mut c, &survivors[0], 20);

    // A dies with batches in flight.
    a.kill();
    let killed = Instant::now();
    let (rest, end) = b.collect_stream(on_b, &doomed[0]);
    let ended_after = killed.elapsed();
    assert!(end.get("error").is_none(), "the stream completes: {end}");
    seen_doomed.extend(rest);
    assert_dense(&seen_doomed);
    let last = seen_doomed.last().expect("events");
    assert_eq!(status_of(last), Some("failed"), "{last}");
    assert!(
        ended_after < Duration::from_secs(LEASE_SECS) + Duration::from_millis(1500),
        "ended {ended_after:?} after the kill"
    );

    // The database restarts once while B's and C's tasks run.
    pg.restart();
    let (rest, _) = c.collect_stream(on_c, &survivors[0]);
    seen_survivor.extend(rest);

    for t in &doomed {
        let got = c.ok("tasks/get", json!({"taskId": t}));
        assert_eq!(got["status"], "failed", "{got}");
        assert_eq!(
            got["statusMessage"],
            taskstream_store::pg::LEASE_FAILURE_MESSAGE,
            "{got}"
        );
    }
    let (all, end) = replay(&mut c, &doomed[0]);
    assert!(end.get("error").is_none(), "{end}");
    assert_eq!(all, seen_doomed, "C replays exactly what B received");
    for t in &survivors {
        let (all, end) = replay(&mut b, t);
        assert!(end.get("error").is_none(), "{end}");
        assert_dense(&all);
        assert!(
            matches!(
                status_of(all.last().expect("events")),
                Some("completed" | "failed")
            ),
            "{t} ends"
        );
        if t == &survivors[0] {
            assert_contains(&all, &seen_survivor);
        }
    }
    // No seq was taken twice: each task's rows are runs that start at 0, each where the last
    // ended, the last ending at the task's next seq: exactly its dense log.
    let rows = pg.psql(
        "fleet",
        "SELECT bool_and(first_seq = coalesce(prev, 0)) AND bool_and(end_seq <= next_seq) \
         AND count(*) FILTER (WHERE end_seq = next_seq) = (SELECT count(*) FROM taskstream_tasks) \
         FROM (SELECT c.first_seq, c.end_seq, t.next_seq, lag(c.end_seq) OVER \
         (PARTITION BY c.task_id ORDER BY c.first_seq) AS prev \
         FROM taskstream_chunks c JOIN taskstream_tasks t USING (task_id)) x",
    );
    assert_eq!(rows.trim(), "t", "{rows}");
}

#[test]
fn a_task_cancelled_through_another_replica_stops_and_its_log_is_frozen() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("cancel");
    let mut a = replica(&url, &[]);
    let mut b = replica(&url, &[]);
    let task = start(&mut a, json!({"count": 100000, "interval_ms": 5}));
    let stream = a.request("tasks/stream", json!({"taskId": task}));
    let early = next_events(&mut a, &task, 10);
    let r = b.call("tasks/cancel", json!({"taskId": task}));
    assert_eq!(r["result"]["status"], "cancelled", "{r}");
    // A's stream ends with the cancellation B wrote; A's task thread is refused its next
    // append (it no longer may write: the task ended), so nothing follows it.
    let (rest, end) = a.collect_stream(stream, &task);
    assert!(end.get("error").is_none(), "{end}");
    let mut on_a = early;
    on_a.extend(rest);
    assert_dense(&on_a);
    assert_eq!(status_of(on_a.last().expect("events")), Some("cancelled"));
    // A later task on A still runs to its end: A's task threads are not stuck.
    let done = start(&mut a, json!({"count": 3}));
    let (events, _) = replay(&mut b, &done);
    assert_eq!(status_of(events.last().expect("events")), Some("completed"));
    // The cancelled task's log did not grow past its terminal event.
    let (again, _) = replay(&mut b, &task);
    assert_eq!(again, on_a);
}

#[test]
fn principals_are_isolated_across_replicas() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("principals");
    let mut alice = replica(&url, &["--principal", "alice"]);
    let mut bob = replica(&url, &["--principal", "bob"]);
    let mut alice2 = replica(&url, &["--principal", "alice"]);
    let task = start(&mut alice, json!({"count": 2}));
    // SE-01 / SE-03: another principal cannot see, stream or cancel it, on any replica.
    assert_eq!(bob.error_code("tasks/get", json!({"taskId": task})), -32602);
    assert_eq!(
        bob.error_code("tasks/stream", json!({"taskId": task})),
        -32602
    );
    assert_eq!(
        bob.error_code("tasks/cancel", json!({"taskId": task})),
        -32602
    );
    let listed = bob.ok("tasks/list", json!({}));
    assert!(
        !listed.to_string().contains(&task),
        "bob's list shows alice's task: {listed}"
    );
    // The same principal through another replica sees it all.
    let (events, end) = replay(&mut alice2, &task);
    assert!(end.get("error").is_none(), "{end}");
    assert_dense(&events);
    let listed = alice2.ok("tasks/list", json!({}));
    assert!(listed.to_string().contains(&task), "{listed}");
}

#[test]
fn the_database_restarted_under_load_costs_errors_never_wrong_data() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("restart");
    let mut a = replica(&url, &["--lease-timeout", "30"]);
    let mut b = replica(&url, &["--lease-timeout", "30"]);
    let tasks: Vec<String> = (0..3)
        .map(|_| start(&mut a, json!({"count": 400, "interval_ms": 10})))
        .collect();
    let stream = b.request("tasks/stream", json!({"taskId": tasks[0]}));
    let mut seen = next_events(&mut b, &tasks[0], 20);

    pg.restart();

    // B's stream goes on after the restart (the replicas reconnect) to the task's end: it
    // either completed or failed, having been refused an event while the database was away.
    let (rest, end) = b.collect_stream(stream, &tasks[0]);
    seen.extend(rest);
    if end.get("error").is_none() {
        assert_dense(&seen);
        assert!(status_of(seen.last().expect("events")).is_some());
    }
    for t in &tasks {
        // Every task reaches its end (none is left `working`), with a gap-free log, through
        // either replica.
        let (all, end) = replay(&mut b, t);
        assert!(end.get("error").is_none(), "{end}");
        assert_dense(&all);
        let last = all.last().expect("events");
        assert!(
            matches!(status_of(last), Some("completed" | "failed")),
            "{last}"
        );
        let got = a.ok("tasks/get", json!({"taskId": t}));
        assert!(
            got["status"] == "completed" || got["status"] == "failed",
            "{got}"
        );
        if t == &tasks[0] {
            assert_contains(&all, &seen);
        }
    }
    // Both replicas serve on: a new task on B completes and streams on A.
    let fresh = start(&mut b, json!({"count": 5}));
    let (events, _) = replay(&mut a, &fresh);
    assert_dense(&events);
    assert_eq!(status_of(events.last().expect("events")), Some("completed"));
}

#[test]
fn connections_dropped_mid_append_cost_errors_never_wrong_data() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("dropped");
    let mut a = replica(&url, &["--lease-timeout", "30"]);
    let mut b = replica(&url, &["--lease-timeout", "30"]);
    let task = start(&mut a, json!({"count": 300, "interval_ms": 5}));
    let stream = b.request("tasks/stream", json!({"taskId": task}));
    let mut seen = next_events(&mut b, &task, 10);
    // Every connection of every replica is cut, some of them mid-append.
    let cut = pg.psql(
        "postgres",
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = 'taskstream'",
    );
    assert!(cut.trim().parse::<u32>().expect("count") > 0, "{cut}");
    let (rest, end) = b.collect_stream(stream, &task);
    seen.extend(rest);
    let (all, _) = replay(&mut b, &task);
    assert_dense(&all);
    assert_contains(&all, &seen);
    if end.get("error").is_none() {
        assert_eq!(seen, all);
    }
    assert!(matches!(
        status_of(all.last().expect("events")),
        Some("completed" | "failed")
    ));
}

/// Waits for `serve` to exit and returns its stderr.
fn refused_start(args: &[&str]) -> String {
    let mut s = Server::spawn(args);
    let status = s.wait_exit();
    assert!(!status.success(), "serve {args:?} should fail");
    s.wait_stderr("cannot open the store")
}

#[test]
fn bad_urls_a_database_down_a_newer_schema_and_a_user_without_rights_are_named() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    // Not a URL the client library reads.
    let err = refused_start(&["--store", "postgres://u@127.0.0.1:notaport/db"]);
    assert!(err.contains("not a PostgreSQL URL"), "{err}");
    // No such database.
    let err = refused_start(&["--store", &format!("{}/nosuchdb", pg.base)]);
    assert!(
        err.contains("cannot connect") && err.contains("nosuchdb"),
        "{err}"
    );
    // A newer schema is refused, and left as it is.
    let url = pg.db("newer");
    {
        let mut first = replica(&url, &[]);
        first.ok("ping", json!({}));
    }
    pg.psql("newer", "UPDATE taskstream_schema SET version = 99");
    let err = refused_start(&["--store", &url]);
    assert!(err.contains("version 99, newer"), "{err}");
    assert_eq!(
        pg.psql("newer", "SELECT version FROM taskstream_schema")
            .trim(),
        "99"
    );
    // A user that may not create the tables.
    pg.db("locked");
    pg.psql("postgres", "CREATE ROLE reader LOGIN");
    pg.psql("locked", "REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    let base = pg.base.replace("taskstream@", "reader@");
    let err = refused_start(&["--store", &format!("{base}/locked")]);
    assert!(err.contains("lacks the rights"), "{err}");
    // The database down at start.
    let url = pg.db("down");
    pg.kill();
    let err = refused_start(&["--store", &url]);
    assert!(
        err.contains("cannot connect to the database at 127.0.0.1:"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_stream_on_one_replica_follows_a_task_running_on_another() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("http");
    let store = ["--store", url.as_str(), "--lease-timeout", "2"];
    let a = http_client::Server::start_on(&store, &[]);
    let b = http_client::Server::start_on(&store, &[]);
    // Created through A (a legacy session), streamed as SSE from B while it runs: B's waiting
    // stream is woken by the database's notification, not by any task thread of B's.
    let on_a = http_client::Session::open(&a.url, None).await;
    let task = on_a.emit(30, 20).await;
    let on_b = http_client::Session::open(&b.url, None).await;
    let opened = Instant::now();
    let mut sse = on_b.stream(7, &task, None).await;
    assert_eq!(sse.status, 200);
    let (seqs, end) = sse.rest().await;
    // The task takes about 0.6 s; a stream that only looked again at its keep-alive (10 s)
    // would take longer than this.
    assert!(
        opened.elapsed() < Duration::from_secs(5),
        "the stream followed the task live ({:?})",
        opened.elapsed()
    );
    assert_eq!(end, json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
    let want: Vec<u64> = (0..=31).collect();
    assert_eq!(seqs, want, "every event, gap-free, to the terminal one");
    assert_eq!(on_b.status(&task).await, "completed");
}

/// `/readyz` of a replica follows its database: 200, then 503 once the replica cannot renew its
/// heartbeat (the database stopped), then 200 again when the database is back; `/healthz`
/// stays 200 throughout.
#[test]
fn readiness_follows_the_database() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("ready");
    let lease = LEASE_SECS.to_string();
    let server = http_client::Server::start_on(&["--store", &url], &["--lease-timeout", &lease]);
    let base = format!("http://127.0.0.1:{}", server.port);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let status = |path: &str| {
        rt.block_on(async {
            reqwest::get(format!("{base}{path}"))
                .await
                .expect("probe")
                .status()
                .as_u16()
        })
    };
    let wait_for = |want: u16| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = status("/readyz");
            if got == want {
                return;
            }
            assert!(Instant::now() < deadline, "/readyz {got}, wanted {want}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for(200);
    pg.kill();
    wait_for(503);
    assert_eq!(status("/healthz"), 200);
    pg.resume();
    wait_for(200);
}

/// One sample of `/metrics` at `base` (`name` with its labels as written), or `None`.
async fn sample(base: &str, name: &str) -> Option<f64> {
    crate::http::ops::scrape(base).await.get(name).copied()
}

/// `taskstream_leases_held` counts the running tasks a replica writes (1 on the replica running
/// one, 0 on the other, 0 once it ended), and the batch commit histograms count every event
/// the replica committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_replicas_leases_and_batch_commits() {
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("leases");
    let store = ["--store", url.as_str(), "--lease-timeout", "2"];
    let a = http_client::Server::start_on(&store, &[]);
    let b = http_client::Server::start_on(&store, &[]);
    let (base_a, base_b) = (
        format!("http://127.0.0.1:{}", a.port),
        format!("http://127.0.0.1:{}", b.port),
    );
    assert_eq!(sample(&base_a, "taskstream_leases_held").await, Some(0.0));
    crate::http::ops::assert_documented(&base_a).await;
    // The pool's gauges are exposed (their counting: `store::the_pool_counts_…`).
    assert_eq!(
        sample(&base_b, "taskstream_postgres_pool_waiting").await,
        Some(0.0)
    );
    assert!(sample(&base_b, "taskstream_postgres_pool_waits_total")
        .await
        .is_some());
    let on_a = http_client::Session::open(&a.url, None).await;
    // Long enough to be scraped while it runs; cancelled below.
    let task = on_a.emit(100_000, 20).await;
    assert_eq!(sample(&base_a, "taskstream_leases_held").await, Some(1.0));
    assert_eq!(sample(&base_b, "taskstream_leases_held").await, Some(0.0));
    let appended = "taskstream_events_appended_total{store=\"postgres\"}";
    let deadline = Instant::now() + Duration::from_secs(20);
    // `working` and two emitted events at least.
    while sample(&base_a, appended).await.unwrap_or(0.0) < 3.0 {
        assert!(Instant::now() < deadline, "no events emitted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = on_a.call(9, "tasks/cancel", json!({"taskId": task})).await;
    assert!(cancelled.get("result").is_some(), "{cancelled}");
    http_client::wait_status(&on_a, &task, "cancelled").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while sample(&base_a, "taskstream_leases_held").await != Some(0.0) {
        assert!(Instant::now() < deadline, "the lease was still held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every emitted event went through one of A's writers' batches (`working` and `cancelled`
    // are written with the task's row, outside them).
    let events = sample(&base_a, appended).await.expect("events appended");
    let batched = sample(&base_a, "taskstream_postgres_commit_batch_events_sum")
        .await
        .expect("batch events");
    let batches = sample(&base_a, "taskstream_postgres_commit_batch_events_count")
        .await
        .expect("batches");
    assert!(
        batched >= events - 2.0,
        "{events} events, {batched} in batches"
    );
    assert!(batches >= 1.0);
    assert_eq!(
        sample(&base_a, "taskstream_postgres_commit_seconds_count").await,
        Some(batches)
    );
    assert_eq!(
        sample(&base_b, "taskstream_postgres_commit_batch_events_count").await,
        Some(0.0)
    );
}

#[test]
fn retention_from_checkpoint_on_postgresql_across_replicas_and_a_restart() {
    // CP-03, CP-04, CP-05 on the shared store: the replica that wrote the task, another one,
    // and a replica started afterwards all answer from the latest checkpoint.
    use crate::server::checkpoints::{check_retained_from_checkpoint, run_task};
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("checkpoints");
    let mut a = replica(&url, &["--retain-from-checkpoint"]);
    let mut b = replica(&url, &["--retain-from-checkpoint"]);
    let task = run_task(&mut a);
    check_retained_from_checkpoint(&mut a, &task);
    check_retained_from_checkpoint(&mut b, &task);
    assert!(a.shutdown().success());
    assert!(b.shutdown().success());
    let mut c = replica(&url, &["--retain-from-checkpoint"]);
    check_retained_from_checkpoint(&mut c, &task);
    // The events before the checkpoint are gone from what is retained (the floor is at it),
    // and their rows from the table, not only hidden.
    let floor = pg.psql(
        "checkpoints",
        &format!("SELECT floor FROM taskstream_tasks WHERE task_id = '{task}'"),
    );
    assert_eq!(floor.trim(), "22", "the task's floor");
    assert_eq!(chunks_below_floor(&pg, "checkpoints", &task), "0");
}

/// How many of a task's chunk rows lie wholly below its floor (reclaimed rows: none; only the
/// chunk the floor falls inside may hold events below it, which no read hands out).
fn chunks_below_floor(pg: &Cluster, db: &str, task: &str) -> String {
    let n = pg.psql(
        db,
        &format!(
            "SELECT count(*) FROM taskstream_chunks c JOIN taskstream_tasks t USING (task_id) \
             WHERE task_id = '{task}' AND c.end_seq <= t.floor"
        ),
    );
    n.trim().to_owned()
}

#[test]
fn checkpoint_drops_are_reclaimed_batch_by_batch_on_postgresql() {
    // What the data dir's --max-store-bytes budget counts, PostgreSQL holds as rows (the
    // budget is the database's own there): a task of 3,000 ticks with a checkpoint after every
    // 100th, appended in many group-commit batches, leaves only the rows from its latest
    // checkpoint on, and tasks/get's earliest seq is that checkpoint's (CP-03, CP-04).
    use crate::server::checkpoints::{rebuild, replay, CHECKPOINT};
    if !cluster::enabled() {
        return;
    }
    let pg = Cluster::start();
    let url = pg.db("checkpoint_rows");
    let mut s = replica(&url, &["--retain-from-checkpoint"]);
    let r = s.ok(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": 3000, "checkpoint_every": 100},
               "task": {}}),
    );
    let task = r["task"]["taskId"].as_str().expect("taskId").to_owned();
    s.call("tasks/result", json!({"taskId": task}));
    let events = replay(&mut s, &task);
    assert_eq!(events[0]["type"], CHECKPOINT, "CP-03: {}", events[0]);
    assert_eq!(rebuild(&events), 3000, "CP-05");
    let earliest = events[0]["seq"].as_u64().expect("seq");
    let last = *seqs(&events).last().expect("events");
    let g = s.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(
        g["_meta"]["dev.taskstream/events"]["earliestSeq"], earliest,
        "CP-04: {g}"
    );
    // Only the retained rows are left in the table: the floor is at the checkpoint, the rows
    // run to the terminal status event, and none lies wholly below the floor.
    let rows = pg.psql(
        "checkpoint_rows",
        &format!(
            "SELECT t.floor, max(c.end_seq) - 1 FROM taskstream_tasks t \
             JOIN taskstream_chunks c USING (task_id) WHERE task_id = '{task}' GROUP BY t.floor"
        ),
    );
    assert_eq!(
        rows.trim(),
        format!("{earliest}|{last}"),
        "rows left of the task"
    );
    assert_eq!(chunks_below_floor(&pg, "checkpoint_rows", &task), "0");
    assert!(last - earliest < 102, "retained {earliest}..={last}");
    assert!(s.shutdown().success());
}
