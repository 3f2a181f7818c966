//! The demo's steps (3, 5, 6 and 7 in their own files). Each step prints what it does as it happens and records checks that
//! compare what the server did with what SEP-2694 and docs/interface.md promise; a check passes only
//! if the comparison holds, so a server that broke the rule would make it fail.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::demo::record::{Recorder, Seen};
use crate::demo::report::{Report, StepTime};
use crate::demo::ui::{fit, Ui};
use crate::demo::view::TraceView;
use taskstream_client::{
    Client, ClientError, ClientOptions, EraChoice, FileCursorStore, FollowEnd, FollowError,
    GonePolicy, ResumableStream, StreamOptions, TaskInfo, TaskStatus,
};
use taskstream_server::trace::Trace;

/// The event type of status events (docs/interface.md).
const STATUS_TYPE: &str = "dev.taskstream.task.status";
/// The retention of the last server (step 6).
const SMALL_RETENTION: u64 = 5;

pub(super) type Res<T> = Result<T, String>;

mod checkpoint;
mod reconnect;
mod restart;
mod retention;
mod server;

use server::ServerProc;

/// What the demo was asked to do.
pub(crate) struct Setup {
    pub(crate) exe: PathBuf,
    pub(crate) root: PathBuf,
    pub(crate) trace: &'static Trace,
    pub(crate) speed: f64,
}

/// The state that flows from step to step.
pub(crate) struct Demo {
    pub(crate) ui: Ui,
    pub(crate) report: Report,
    setup: Setup,
    server_dir: PathBuf,
    cursor_dir: PathBuf,
    servers: usize,
    /// The running server, if any.
    server: Option<ServerProc>,
    /// The connection handed from step to step.
    client: Option<Client>,
    /// The total number of events of one replay (trace events + 2 status events).
    total: u64,
    // Task A: streamed, cut, server killed, resumed.
    task_a: String,
    seen_a: Vec<Seen>,
    view_a: TraceView,
    /// Where client #1 loses its connection.
    lost_a: u64,
    /// Where the reconnected client stops following (then the kill).
    cut_a: u64,
    last_a: u64,
    probes: u64,
    probe_failures: Vec<String>,
    related_checked: u64,
    events_received: u64,
}

fn stream_options(policy: GonePolicy) -> StreamOptions {
    StreamOptions {
        idle_timeout: Duration::from_secs(15),
        gone_policy: policy,
        ..StreamOptions::default()
    }
}

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// The seq of the first trace event at or after `fraction` of the trace's duration (a trace
/// event at index i has seq i + 1), kept inside 5..=total-10.
fn seq_at(trace: &Trace, fraction: f64) -> u64 {
    let at = (trace.duration_ms as f64 * fraction) as u64;
    let index = trace
        .events
        .iter()
        .position(|e| e.t_ms >= at)
        .unwrap_or(trace.events.len());
    let total = trace.events.len() as u64 + 2;
    (index as u64 + 1).clamp(5, total.saturating_sub(10).max(5))
}

impl Demo {
    pub(crate) fn new(ui: Ui, setup: Setup) -> Demo {
        let server_dir = setup.root.join("server");
        let cursor_dir = setup.root.join("cursors");
        let total = setup.trace.events.len() as u64 + 2;
        Demo {
            ui,
            report: Report::default(),
            server_dir,
            cursor_dir,
            servers: 0,
            server: None,
            client: None,
            total,
            task_a: String::new(),
            seen_a: Vec::new(),
            view_a: TraceView::default(),
            lost_a: seq_at(setup.trace, 0.2),
            cut_a: seq_at(setup.trace, 0.5),
            last_a: 0,
            probes: 0,
            probe_failures: Vec::new(),
            related_checked: 0,
            events_received: 0,
            setup,
        }
    }

    /// Runs every step, stopping at the first that cannot go on; then the verdict step.
    pub(crate) fn run(&mut self) {
        type StepFn = fn(&mut Demo) -> Res<()>;
        let steps: [(&str, StepFn); 7] = [
            (
                "start one long-lived HTTP server and connect (modern era)",
                Demo::step_start,
            ),
            (
                "run the trace as a task; the client loses its connection",
                Demo::step_stream,
            ),
            (
                "reconnect and resume while the task runs; a late joiner",
                Demo::step_reconnect,
            ),
            ("stop following, then kill -9 the server", Demo::step_kill),
            (
                "restart, status without replay, resume with after",
                Demo::step_resume,
            ),
            ("small retention: events_gone and recovery", Demo::step_gone),
            (
                "checkpoints: a late joiner starts from the state",
                Demo::step_checkpoint,
            ),
        ];
        for (i, (title, f)) in steps.iter().enumerate() {
            let n = i + 1;
            self.ui.step(n, title);
            let started = Instant::now();
            let result = f(self);
            self.ui.end_live();
            let error = result.err();
            if let Some(e) = &error {
                self.ui.outcome(false, &format!("step {n} stopped: {e}"));
            }
            self.report.steps.push(StepTime {
                n,
                title: (*title).to_owned(),
                ms: started.elapsed().as_millis(),
                error: error.clone(),
            });
            if error.is_some() {
                break;
            }
        }
        self.client = None;
        if let Some(server) = self.server.take() {
            let _ = server.stop();
        }
        self.ui.step(steps.len() + 1, "verdict");
        self.report
            .fact("eventsReceived", json!(self.events_received));
    }

    /// The client of steps 1 to 3, taken out so that a step can borrow the rest of `self`.
    fn take_client(&mut self) -> Res<Client> {
        self.client
            .take()
            .ok_or_else(|| "no connection from the previous step".to_owned())
    }

    /// Starts a server on the demo's data dir (stopping the previous one with SIGTERM) and
    /// connects a client to it.
    fn spawn(&mut self, extra: &[&str]) -> Res<Client> {
        if let Some(old) = self.server.take() {
            old.stop()?;
        }
        self.servers += 1;
        let log_path = self.setup.root.join(format!("server-{}.log", self.servers));
        let server = ServerProc::start(&self.setup.exe, &self.server_dir, extra, &log_path)?;
        self.ui.line(&format!(
            "server #{} pid {} : taskstream serve --http 127.0.0.1:0 --data-dir {}{}{}",
            self.servers,
            server.pid(),
            self.server_dir.display(),
            if extra.is_empty() { "" } else { " " },
            extra.join(" ")
        ));
        self.ui.line(&format!(
            "            listening on {}; stderr → {}",
            server.url,
            log_path.display()
        ));
        self.server = Some(server);
        self.connect("client connects")
    }

    /// A new client connection to the running server.
    fn connect(&mut self, label: &str) -> Res<Client> {
        let url = self
            .server
            .as_ref()
            .map(|s| s.url.clone())
            .ok_or_else(|| "no server is running".to_owned())?;
        let options = ClientOptions {
            era: EraChoice::Modern,
            ..ClientOptions::default()
        };
        let client = Client::connect_http(&url, None, options).map_err(err("connecting"))?;
        self.ui.line(&format!(
            "{label}: a new HTTP connection to {url} (2026-07-28: each request a stateless POST)"
        ));
        Ok(client)
    }

    fn show_task(&mut self, label: &str, task: &TaskInfo) {
        let range = task.events.map_or_else(
            || "no dev.taskstream/events range".to_owned(),
            |r| {
                format!(
                    "earliestSeq {}, latestSeq {}, nextSeq {}",
                    opt(r.earliest_seq),
                    opt(r.latest_seq),
                    r.next_seq
                )
            },
        );
        let message = task
            .status_message
            .as_deref()
            .map(|m| format!(" (\"{}\")", fit(m, 50)))
            .unwrap_or_default();
        self.ui.line(&format!(
            "{label}: status {}{message}; {range}",
            task.status
        ));
    }

    // ---- step 1 --------------------------------------------------------------------------

    fn step_start(&mut self) -> Res<()> {
        std::fs::create_dir_all(&self.server_dir).map_err(err("creating the data dir"))?;
        self.ui.line(&format!(
            "data dir {} (server log in server/, client cursors in cursors/)",
            self.setup.root.display()
        ));
        let client = self.spawn(&[])?;
        let info = client.server_info().clone();
        self.ui.line(&format!(
            "server/discover: protocol {}, event streams advertised: {}",
            info.protocol_version, info.event_streams
        ));
        self.report.check(
            &mut self.ui,
            1,
            "TS-02",
            "server advertises task event streams",
            info.event_streams,
            format!(
                "capabilities.extensions: {}",
                fit(
                    &info
                        .capabilities
                        .get("extensions")
                        .map(Value::to_string)
                        .unwrap_or_default(),
                    80
                )
            ),
        );
        let tools = client.list_tools().map_err(err("tools/list"))?;
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        self.ui.line(&format!("tools/list: {}", names.join(", ")));
        if !names.contains(&"run_trace") {
            return Err("the server offers no run_trace tool".into());
        }
        self.client = Some(client);
        Ok(())
    }

    // ---- step 2 --------------------------------------------------------------------------

    fn step_stream(&mut self) -> Res<()> {
        let client = self.take_client()?;
        self.stream_a(&client)
    }

    fn stream_a(&mut self, client: &Client) -> Res<()> {
        let trace = self.setup.trace;
        let task = client
            .start_task(
                "run_trace",
                json!({"name": trace.name, "speed": self.setup.speed}),
            )
            .map_err(err("tools/call run_trace"))?;
        self.task_a.clone_from(&task.task_id);
        self.report.fact("taskA", json!(task.task_id));
        self.ui.line(&format!(
            "tools/call run_trace {{name: {:?}, speed: {}}} → task {} ({})",
            trace.name, self.setup.speed, task.task_id, task.status
        ));
        self.ui.line(&format!(
            "tasks/stream {{taskId}} — rendering events; the connection will be lost after seq {}",
            self.lost_a
        ));
        let store = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let probe = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let mut stream = ResumableStream::new(
            task.task_id.clone(),
            store,
            stream_options(GonePolicy::Fail),
        )
        .map_err(err("cursor store"))?;
        let lost_at = self.lost_a;
        let mut severed = false;
        let end = {
            let mut rec = Recorder {
                ui: &mut self.ui,
                view: &mut self.view_a,
                seen: &mut self.seen_a,
                probe: &probe,
                probe_expect: None,
                probes: &mut self.probes,
                probe_failures: &mut self.probe_failures,
                total: Some(self.total),
                stop_after: None,
                quartile: 0,
            };
            stream.follow(client, |e| {
                let flow = rec.on_event(e)?;
                if e.seq >= lost_at && !severed {
                    // The network goes away under the open stream: no cancellation is sent,
                    // the response is simply cut. The handler finished this event, so its
                    // cursor is committed; whatever was in flight behind it is lost.
                    client.sever().map_err(|e| format!("sever: {e}"))?;
                    severed = true;
                }
                Ok::<_, String>(flow)
            })
        };
        self.count(stream.stats());
        self.ui.end_live();
        match end {
            Err(FollowError::Client(ClientError::Closed { reason })) if severed => {
                self.ui.line(&format!("connection lost: {reason}"));
            }
            Ok(FollowEnd::Completed(_)) => {
                return Err("the stream ended before the connection was lost".into());
            }
            other => return Err(format!("streaming task A: {other:?}")),
        }
        let cursor = stream.cursor();
        // Events already read when the connection went may have been processed after the
        // one that cut it: the last processed one is where the resume must start.
        self.lost_a = cursor.unwrap_or(self.lost_a);
        self.ui.line(&format!(
            "handler processed seq 0..={}; cursor committed to {} after each event",
            cursor.map_or_else(|| "-".into(), |c| c.to_string()),
            probe
                .path_of(&task.task_id)
                .ok()
                .and_then(|p| p
                    .file_name()
                    .map(|n| format!("cursors/{}", n.to_string_lossy())))
                .unwrap_or_default()
        ));
        Ok(())
    }

    fn count(&mut self, stats: &taskstream_client::FollowStats) {
        self.related_checked += stats.related_task_checked;
        self.events_received += stats.processed + stats.duplicates;
    }

    // ---- step 3 --------------------------------------------------------------------------

    fn step_kill(&mut self) -> Res<()> {
        let client = self.take_client()?;
        self.kill_a(&client)
    }

    fn kill_a(&mut self, client: &Client) -> Res<()> {
        let task_id = self.task_a.clone();
        self.ui.line(&format!(
            "the client stopped following after seq {}: it closed its response, which cancels that stream only; the task runs on",
            self.cut_a
        ));
        // The task keeps running on the server while no one listens; wait (bounded) until it
        // has logged a few more events, so the crash cuts through a live replay.
        let deadline = Instant::now() + Duration::from_secs(5);
        let task = loop {
            let task = client.task_info(&task_id).map_err(err("tasks/get"))?;
            let latest = task.events.and_then(|r| r.latest_seq).unwrap_or(0);
            if latest >= self.cut_a + 5 || Instant::now() >= deadline || task.status.is_terminal() {
                break task;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.show_task("tasks/get (nobody streaming)", &task);
        let server = self
            .server
            .take()
            .ok_or_else(|| "no server is running".to_owned())?;
        let mut server = server;
        let running = server.running();
        let pid = server.pid();
        self.report.check(
            &mut self.ui,
            4,
            "durability",
            "precondition: the kill hits a running task",
            running && task.status == TaskStatus::Working,
            format!(
                "server alive: {running}; task status just before the kill: {}",
                task.status
            ),
        );
        let status = server.kill9()?;
        self.ui
            .line(&format!("SIGKILL → server pid {pid}: {status}"));
        let store = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let persisted =
            taskstream_client::CursorStore::load(&store, &task_id).map_err(err("cursor store"))?;
        let last_processed = self.seen_a.last().map(|s| s.seq);
        self.report.check(
            &mut self.ui,
            4,
            "RS-08",
            "cursor persisted only after the event was processed",
            persisted == last_processed
                && persisted == Some(self.cut_a)
                && self.probe_failures.is_empty()
                && self.probes == self.seen_a.len() as u64,
            format!(
                "cursor file {} = last processed {}; while each of {} events was processed the file still held the previous seq ({} mismatches)",
                opt(persisted),
                opt(last_processed),
                self.probes,
                self.probe_failures.len()
            ),
        );
        Ok(())
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

/// Where a seq list stops being 0, 1, 2, …, if it does.
fn first_break(seqs: &[u64]) -> Option<String> {
    seqs.iter()
        .enumerate()
        .find(|(i, s)| **s != *i as u64)
        .map(|(i, s)| format!("position {i} has seq {s}"))
}

/// Compares the events with seq in `range` (present in `events`) with the trace's lines: an
/// event with seq k is line k - 1.
fn compare_with_trace(
    trace: &Trace,
    events: &[Seen],
    range: std::ops::Range<u64>,
) -> (bool, String) {
    let mut compared = 0u64;
    let mut differ = Vec::new();
    for e in events.iter().filter(|e| range.contains(&e.seq)) {
        compared += 1;
        let line = usize::try_from(e.seq - 1)
            .ok()
            .and_then(|i| trace.events.get(i));
        let same = line.is_some_and(|l| {
            l.event_type == e.event_type
                && serde_json::from_str::<Map<String, Value>>(&l.payload)
                    .ok()
                    .as_ref()
                    == Some(&e.payload)
        });
        if !same {
            differ.push(e.seq);
        }
    }
    (
        compared > 0 && differ.is_empty(),
        format!(
            "{compared} events compared with data/traces/{}.jsonl; {} differ{}",
            trace.name,
            differ.len(),
            differ
                .first()
                .map(|s| format!(" (first: seq {s})"))
                .unwrap_or_default()
        ),
    )
}
