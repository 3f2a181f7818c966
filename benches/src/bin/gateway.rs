//! The overhead of `taskstream gateway`, side by side with calling its inner server directly in
//! the same run. The inner server is `taskstream serve --in-memory --durability none`, whose
//! plain `emit {count: N}` with a `progressToken` sends N `notifications/progress` as fast as it
//! can: a fast inner server.
//!
//! `gateway [--bin PATH] [--events N] [--requests M] [--runs R]` (defaults: the release binary
//! next to this one, 200000, 2000, 5). Prints, per run and as medians:
//! - a plain request (`tools/call emit {count: 0}`), round trip, direct and through the gateway;
//! - a forwarded notification (a plain `emit {count: N}` with a progress token: the client gets
//!   N progress notifications), per notification, direct and through the gateway;
//! - events recorded: the same call as a task of the gateway (each progress becomes a durable
//!   `dev.taskstream.progress` event), events/s until the task is completed, in memory and on a
//!   data dir (`--durability group`), and the same events then replayed to a client by
//!   `tasks/stream`;
//! - for reference, `taskstream serve`'s own `emit {count: N}` as a task on a data dir.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

struct Peer {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    next: u64,
}

impl Peer {
    fn start(bin: &str, args: &[String]) -> Peer {
        let mut child = Command::new(bin)
            .args(args)
            .env("TASKSTREAM_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stdin = BufWriter::new(child.stdin.take().expect("stdin"));
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        let mut p = Peer {
            child,
            stdin,
            stdout,
            line: String::new(),
            next: 1,
        };
        p.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}),
        );
        p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        p
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").expect("write");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Reads lines until the answer to `id`; how many other lines came first.
    fn until_answer(&mut self, id: u64) -> (Value, u64) {
        let needle = format!("\"id\":{id},");
        let mut others = 0;
        loop {
            self.line.clear();
            let n = self.stdout.read_line(&mut self.line).expect("read");
            assert!(n > 0, "the server's output ended");
            if self.line.contains(&needle) && !self.line.contains("\"method\"") {
                let v: Value = serde_json::from_str(&self.line).expect("json");
                return (v, others);
            }
            others += 1;
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.until_answer(id).0
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn serve_args() -> Vec<String> {
    ["serve", "--in-memory", "--durability", "none"]
        .map(String::from)
        .to_vec()
}

fn gateway_args(bin: &str, store: &[&str]) -> Vec<String> {
    let mut a = vec!["gateway".to_owned()];
    a.extend(store.iter().map(|s| (*s).to_owned()));
    a.extend(["--max-events-per-task".into(), "1000000".into()]);
    a.push("--".into());
    a.push(bin.to_owned());
    a.extend(serve_args());
    a
}

/// Median round trip of `requests` sequential plain calls, in µs.
fn plain_requests(p: &mut Peer, requests: u64) -> f64 {
    let mut times = Vec::new();
    for _ in 0..requests {
        let t = Instant::now();
        let r = p.call(
            "tools/call",
            json!({"name": "emit", "arguments": {"count": 0}}),
        );
        assert!(r.get("result").is_some(), "{r}");
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    median(times)
}

/// A plain call that sends `events` progress notifications: ns per notification.
fn notifications(p: &mut Peer, events: u64) -> f64 {
    let t = Instant::now();
    let id = p.request(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": events}, "_meta": {"progressToken": 1}}),
    );
    let (r, others) = p.until_answer(id);
    let took = t.elapsed();
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(others, events, "every progress notification arrived");
    took.as_secs_f64() * 1e9 / events as f64
}

/// The call as a task of the gateway: events/s recorded until completed, and events/s of a
/// `tasks/stream` replay of them.
fn task(p: &mut Peer, events: u64) -> (f64, f64) {
    let t = Instant::now();
    let r = p.call(
        "tools/call",
        json!({"name": "emit", "arguments": {"count": events}, "task": {}}),
    );
    let task = r["result"]["task"]["taskId"]
        .as_str()
        .expect("task")
        .to_owned();
    let done = p.call("tasks/result", json!({"taskId": task}));
    let took = t.elapsed();
    assert_eq!(done["result"]["isError"], false, "{done}");
    let t = Instant::now();
    let id = p.request("tasks/stream", json!({"taskId": task}));
    let (_, streamed) = p.until_answer(id);
    let replay = t.elapsed();
    assert_eq!(streamed, events + 2, "every event replayed");
    (
        events as f64 / took.as_secs_f64(),
        streamed as f64 / replay.as_secs_f64(),
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut bin = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("taskstream")))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "taskstream".into());
    let (mut events, mut requests, mut runs) = (200_000u64, 2000u64, 5usize);
    while let Some(a) = args.next() {
        let mut value = || args.next().expect("a value");
        match a.as_str() {
            "--bin" => bin = value(),
            "--events" => events = value().parse().expect("a number"),
            "--requests" => requests = value().parse().expect("a number"),
            "--runs" => runs = value().parse().expect("a number"),
            other => panic!("unknown argument {other}"),
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows: [Vec<f64>; 10] = Default::default();
    for run in 0..runs {
        let mut direct = Peer::start(&bin, &serve_args());
        let mut gw = Peer::start(
            &bin,
            &gateway_args(&bin, &["--in-memory", "--durability", "none"]),
        );
        let data = dir.path().join(format!("run{run}"));
        let data = data.display().to_string();
        let mut gw_disk = Peer::start(&bin, &gateway_args(&bin, &["--data-dir", &data]));
        let own = dir.path().join(format!("serve{run}")).display().to_string();
        let mut direct_disk = Peer::start(
            &bin,
            &[
                "serve".into(),
                "--data-dir".into(),
                own,
                "--max-events-per-task".into(),
                "1000000".into(),
            ],
        );
        let measured = [
            plain_requests(&mut direct, requests),
            plain_requests(&mut gw, requests),
            notifications(&mut direct, events),
            notifications(&mut gw, events),
        ];
        let (mem_rec, mem_replay) = task(&mut gw, events);
        let (disk_rec, disk_replay) = task(&mut gw_disk, events);
        let (own_rec, own_replay) = task(&mut direct_disk, events);
        let all = [
            measured[0],
            measured[1],
            measured[2],
            measured[3],
            mem_rec,
            mem_replay,
            disk_rec,
            disk_replay,
            own_rec,
            own_replay,
        ];
        for (row, v) in rows.iter_mut().zip(all) {
            row.push(v);
        }
        println!(
            "run {run}: plain request {:.1} µs direct / {:.1} µs gateway; notification {:.0} ns direct / {:.0} ns gateway; \
             task: {:.0} events/s recorded in memory ({:.0}/s replayed), {:.0}/s on a data dir ({:.0}/s replayed); \
             serve's own emit on a data dir {:.0}/s ({:.0}/s replayed)",
            all[0], all[1], all[2], all[3], all[4], all[5], all[6], all[7], all[8], all[9]
        );
    }
    let m: Vec<f64> = rows.into_iter().map(median).collect();
    println!("medians of {runs} runs ({events} events per call, {requests} plain requests):");
    println!(
        "  plain request round trip:     direct {:.1} µs, through the gateway {:.1} µs (+{:.1} µs)",
        m[0],
        m[1],
        m[1] - m[0]
    );
    println!(
        "  forwarded notification:       direct {:.0} ns, through the gateway {:.0} ns (+{:.0} ns each)",
        m[2], m[3], m[3] - m[2]
    );
    println!(
        "  recorded as task events:      {:.0} events/s in memory, {:.0} events/s on a data dir (group commit)",
        m[4], m[6]
    );
    println!(
        "  replayed by tasks/stream:     {:.0} events/s in memory, {:.0} events/s on a data dir",
        m[5], m[7]
    );
    println!(
        "  serve's own emit as a task:   {:.0} events/s recorded on a data dir (group commit), {:.0} events/s replayed",
        m[8], m[9]
    );
}
