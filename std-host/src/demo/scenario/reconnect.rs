//! Step 3: the connection is gone but the server and the task are not. The client reconnects,
//! loads its cursor from disk and resumes with `after` while the task still produces events;
//! a second client, with no cursor, joins late and replays from seq 0 into the live stream.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::demo::record::{Recorder, Seen};
use taskstream_client::{
    Client, ClientOptions, EraChoice, FileCursorStore, Flow, FollowEnd, GonePolicy,
    MemoryCursorStore, ResumableStream, StartAt, TaskStatus,
};

use super::{err, first_break, opt, stream_options, Demo, Res};

/// What the late joiner brings back.
struct Joined {
    /// The task's latest seq just before it opened its stream.
    latest_at_join: Option<u64>,
    seen: Vec<Seen>,
    end: Result<FollowEnd, String>,
    afters: Vec<Option<u64>>,
}

impl Demo {
    pub(super) fn step_reconnect(&mut self) -> Res<()> {
        let task_id = self.task_a.clone();
        // The same server process, reachable: a new connection, nothing else.
        let client = self.connect("the client reconnects")?;
        let (pid, alive) = match self.server.as_mut() {
            Some(s) => (s.pid(), s.running()),
            None => (0, false),
        };
        // While nobody was connected the task went on: wait (bounded) to see it.
        let deadline = Instant::now() + Duration::from_secs(5);
        let task = loop {
            let task = client.task_info(&task_id).map_err(err("tasks/get"))?;
            let latest = task.events.and_then(|r| r.latest_seq).unwrap_or(0);
            if latest >= self.lost_a + 5 || Instant::now() >= deadline || task.status.is_terminal()
            {
                break task;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.show_task("tasks/get on the new connection", &task);
        let latest_at_resume = task.events.and_then(|r| r.latest_seq).unwrap_or(0);
        self.report.check(
            &mut self.ui,
            3,
            "A-08",
            "task outlived its connection: same server, still working and producing",
            alive
                && self.servers == 1
                && task.status == TaskStatus::Working
                && latest_at_resume > self.lost_a,
            format!(
                "server #{} pid {pid} alive: {alive}; task {}; latest seq {latest_at_resume} > last processed {} (produced with nobody connected)",
                self.servers, task.status, self.lost_a
            ),
        );
        let store = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let probe = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let mut stream =
            ResumableStream::new(task_id.clone(), store, stream_options(GonePolicy::Fail))
                .map_err(err("cursor store"))?;
        let cursor = stream.cursor();
        self.ui.line(&format!(
            "cursor loaded from disk by a fresh store: {}; tasks/stream {{taskId, after: {}}} while the task runs",
            opt(cursor),
            opt(cursor)
        ));
        let url = self
            .server
            .as_ref()
            .map(|s| s.url.clone())
            .ok_or_else(|| "no server is running".to_owned())?;
        let join_at = latest_at_resume + 3;
        let stop_at = self.cut_a;
        let (joined_tx, joined_rx) = mpsc::channel::<Joined>();
        let mut joiner_started = false;
        let before = self.seen_a.len();
        let end = {
            let mut rec = Recorder {
                ui: &mut self.ui,
                view: &mut self.view_a,
                seen: &mut self.seen_a,
                probe: &probe,
                probe_expect: cursor,
                probes: &mut self.probes,
                probe_failures: &mut self.probe_failures,
                total: Some(self.total),
                stop_after: Some(stop_at),
                quartile: 0,
            };
            stream.follow(&client, |e| {
                let flow = rec.on_event(e)?;
                if e.seq >= join_at && !joiner_started {
                    joiner_started = true;
                    let (url, task_id, tx) = (url.clone(), task_id.clone(), joined_tx.clone());
                    std::thread::spawn(move || {
                        let _ = tx.send(late_joiner(&url, &task_id, stop_at));
                    });
                }
                Ok::<_, String>(flow)
            })
        };
        self.count(stream.stats());
        self.ui.end_live();
        match end {
            Ok(FollowEnd::Stopped) => {}
            Ok(FollowEnd::Completed(_)) => {
                return Err("the task ended before the resumed client stopped".into())
            }
            Ok(other) => return Err(format!("resuming task A ended as {other:?}")),
            Err(e) => return Err(format!("resuming task A: {e}")),
        }
        let resumed: Vec<u64> = self.seen_a[before..].iter().map(|s| s.seq).collect();
        let afters = stream.stats().afters.clone();
        self.report.check(
            &mut self.ui,
            3,
            "RS-09 (reconnect)",
            "new connection resumes with after = persisted cursor; next is cursor + 1",
            cursor == Some(self.lost_a)
                && afters == vec![cursor]
                && resumed.first() == Some(&(self.lost_a + 1)),
            format!(
                "cursor on disk {} = last processed {}; after sent: {}; first resumed seq: {}",
                opt(cursor),
                self.lost_a,
                afters
                    .iter()
                    .map(|a| opt(*a))
                    .collect::<Vec<_>>()
                    .join(", "),
                opt(resumed.first().copied()),
            ),
        );
        let live = resumed.iter().filter(|s| **s > latest_at_resume).count();
        self.report.check(
            &mut self.ui,
            3,
            "RS-03a",
            "the resume replays what was retained, then goes on live",
            resumed
                .iter()
                .copied()
                .eq(self.lost_a + 1..=stop_at)
                && latest_at_resume < stop_at
                && live > 0,
            format!(
                "replayed {}..={latest_at_resume} (logged while disconnected), then {live} live events {}..={stop_at} that did not exist when the stream opened",
                self.lost_a + 1,
                latest_at_resume + 1
            ),
        );
        let order: Vec<u64> = self.seen_a.iter().map(|s| s.seq).collect();
        let distinct: BTreeSet<u64> = order.iter().copied().collect();
        self.report.check(
            &mut self.ui,
            3,
            "EV-03/RS-11",
            "across the lost connection: seq 0, 1, 2, … no gap, none processed twice",
            order.iter().copied().eq(0..=stop_at) && distinct.len() == order.len(),
            format!(
                "{} events processed, {} distinct, seq 0..={stop_at}; {}",
                order.len(),
                distinct.len(),
                first_break(&order).unwrap_or_else(|| "no break".into())
            ),
        );
        // The late joiner stops at the same seq; it has at most the stream's idle timeout.
        let joined = if joiner_started {
            joined_rx.recv_timeout(Duration::from_secs(30)).ok()
        } else {
            None
        };
        let Some(joined) = joined else {
            self.report.check(
                &mut self.ui,
                3,
                "RS-05/DX-07",
                "a second client joins late, replays from seq 0 and goes on live",
                false,
                "the late joiner did not start or did not report in 30 s",
            );
            self.client = Some(client);
            return Ok(());
        };
        let seqs: Vec<u64> = joined.seen.iter().map(|s| s.seq).collect();
        let at_join = joined.latest_at_join.unwrap_or(0);
        let same = joined.seen.iter().zip(&self.seen_a).all(|(a, b)| a == b)
            && joined.seen.len() == self.seen_a.len();
        self.ui.line(&format!(
            "late joiner (client #3, no cursor): joined when the latest seq was {at_join}; tasks/stream without after → {} events, seq {}..={}; {:?}",
            seqs.len(),
            seqs.first().map_or_else(|| "-".into(), u64::to_string),
            seqs.last().map_or_else(|| "-".into(), u64::to_string),
            joined.end.as_ref().map(|_| "stopped").map_err(String::as_str)
        ));
        self.report.check(
            &mut self.ui,
            3,
            "RS-05/DX-07",
            "a second client joins late, replays from seq 0 and goes on live",
            matches!(joined.end, Ok(FollowEnd::Stopped))
                && joined.afters == vec![None]
                && seqs.iter().copied().eq(0..=stop_at)
                && at_join < stop_at,
            format!(
                "after omitted; replay 0..={at_join}, then live to {stop_at}; {}",
                first_break(&seqs).unwrap_or_else(|| "no break".into())
            ),
        );
        self.report.check(
            &mut self.ui,
            3,
            "EV-08",
            "the late joiner saw the same events as the first client",
            same,
            format!(
                "{} events compared field by field with the first client's {}",
                joined.seen.len(),
                self.seen_a.len()
            ),
        );
        self.report
            .fact("lateJoinerEvents", json!(joined.seen.len()));
        self.client = Some(client);
        Ok(())
    }
}

/// Client #3: its own connection, no cursor (memory store), follows from the earliest
/// retained event until `stop_at`.
fn late_joiner(url: &str, task_id: &str, stop_at: u64) -> Joined {
    let mut joined = Joined {
        latest_at_join: None,
        seen: Vec::new(),
        end: Err("not started".into()),
        afters: Vec::new(),
    };
    let options = ClientOptions {
        era: EraChoice::Modern,
        ..ClientOptions::default()
    };
    let client = match Client::connect_http(url, None, options) {
        Ok(c) => c,
        Err(e) => {
            joined.end = Err(format!("connecting: {e}"));
            return joined;
        }
    };
    joined.latest_at_join = client
        .task_info(task_id)
        .ok()
        .and_then(|t| t.events)
        .and_then(|r| r.latest_seq);
    let mut stream = match ResumableStream::new(
        task_id,
        MemoryCursorStore::new(),
        stream_options(GonePolicy::Fail),
    ) {
        Ok(s) => s,
        Err(e) => {
            joined.end = Err(format!("cursor store: {e}"));
            return joined;
        }
    };
    let seen = &mut joined.seen;
    let end = stream.follow_from(&client, StartAt::Retained, |e| {
        seen.push(Seen::of(e));
        Ok::<_, String>(if e.seq >= stop_at {
            Flow::Stop
        } else {
            Flow::Continue
        })
    });
    joined.end = end.map_err(|e| e.to_string());
    joined.afters = stream.stats().afters.clone();
    joined
}
