//! Step 5: restart on the same data dir, the task's status and retained range without replay,
//! resume with `after` = the persisted cursor, a redelivery that must be dropped as
//! duplicates, and an audit of the log against what was received before the kill.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::demo::record::{Recorder, Seen};
use taskstream_client::{
    FileCursorStore, FollowEnd, GonePolicy, MemoryCursorStore, ResumableStream, StartAt, TaskStatus,
};

use super::{compare_with_trace, err, first_break, opt, stream_options, Demo, Res, STATUS_TYPE};

impl Demo {
    pub(super) fn step_resume(&mut self) -> Res<()> {
        let task_id = self.task_a.clone();
        let client = self.spawn(&[])?;
        let before = client.unsolicited_count();
        let task = client.task_info(&task_id).map_err(err("tasks/get"))?;
        let notifications = client.unsolicited_count() - before;
        self.show_task("tasks/get after restart", &task);
        self.ui.line(&format!(
            "(no tasks/stream open: {notifications} event notifications arrived — status without replay)"
        ));
        self.ui.line(
            "the server died mid-replay; replays do not resume (data/README.md), so recovery ended task A as failed with a terminal status event — the durability promise",
        );
        let range = task.events;
        let store = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let probe = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let mut stream =
            ResumableStream::new(task_id.clone(), store, stream_options(GonePolicy::Fail))
                .map_err(err("cursor store"))?;
        let cursor = stream.cursor();
        self.ui.line(&format!(
            "cursor loaded from disk by a fresh store: {}; tasks/stream {{taskId, after: {}}}",
            opt(cursor),
            opt(cursor)
        ));
        let before_resume = self.seen_a.len();
        let end = {
            let mut rec = Recorder {
                ui: &mut self.ui,
                view: &mut self.view_a,
                seen: &mut self.seen_a,
                probe: &probe,
                probe_expect: cursor,
                probes: &mut self.probes,
                probe_failures: &mut self.probe_failures,
                total: None,
                stop_after: None,
                quartile: 4,
            };
            stream.follow(&client, |e| rec.on_event(e))
        };
        self.count(stream.stats());
        let result = match end {
            Ok(FollowEnd::Completed(result)) => result,
            Ok(FollowEnd::Stopped) => return Err("the resumed stream stopped".into()),
            Ok(other) => return Err(format!("the resumed stream ended as {other:?}")),
            Err(e) => return Err(format!("resuming task A: {e}")),
        };
        let resumed: Vec<u64> = self.seen_a[before_resume..].iter().map(|s| s.seq).collect();
        self.last_a = self.seen_a.last().map_or(0, |s| s.seq);
        self.report.fact("taskALastSeq", json!(self.last_a));
        self.ui.line(&format!(
            "stream closed by the server with {result}; resumed seqs {}..={} ({} events)",
            resumed.first().map_or_else(|| "-".into(), u64::to_string),
            resumed.last().map_or_else(|| "-".into(), u64::to_string),
            resumed.len()
        ));
        self.report.check(
            &mut self.ui,
            5,
            "RS-09",
            "resume sends after = persisted cursor; next event is cursor + 1",
            stream.stats().afters == vec![Some(self.cut_a)]
                && resumed.first() == Some(&(self.cut_a + 1)),
            format!(
                "after sent: {}; first resumed seq: {} (cursor {})",
                stream
                    .stats()
                    .afters
                    .iter()
                    .map(|a| opt(*a))
                    .collect::<Vec<_>>()
                    .join(", "),
                opt(resumed.first().copied()),
                self.cut_a
            ),
        );
        self.report.check(
            &mut self.ui,
            5,
            "DX-01",
            "tasks/stream closes with {\"resultType\": \"complete\"} (modern)",
            result.get("resultType").and_then(Value::as_str) == Some("complete"),
            format!("result {result}"),
        );
        // Status without replay, checked against what the resume then delivered.
        let meta_ok = range.is_some_and(|r| {
            r.earliest_seq == Some(0)
                && r.latest_seq == Some(self.last_a)
                && r.next_seq == self.last_a + 1
        });
        self.report.check(
            &mut self.ui,
            5,
            "dev.taskstream/events",
            "tasks/get shows status and seq range without replaying",
            meta_ok && notifications == 0,
            format!(
                "{}; last seq streamed {}; notifications during tasks/get: {notifications}",
                range.map_or_else(
                    || "no range".to_owned(),
                    |r| format!(
                        "earliest {} latest {} next {}",
                        opt(r.earliest_seq),
                        opt(r.latest_seq),
                        r.next_seq
                    )
                ),
                self.last_a
            ),
        );
        // The processed sequence, across the crash.
        let order: Vec<u64> = self.seen_a.iter().map(|s| s.seq).collect();
        let contiguous = order.iter().copied().eq(0..=self.last_a);
        self.report.check(
            &mut self.ui,
            5,
            "EV-02/EV-03",
            "task A processed as seq 0, 1, 2, … with no gap across the crash",
            contiguous,
            format!(
                "{} events processed, seq 0..={}; {}",
                order.len(),
                self.last_a,
                first_break(&order).unwrap_or_else(|| "no break".into())
            ),
        );
        // Redelivery: ask for everything after the old cursor again. The server sends it; the
        // client must drop all of it as duplicates, processing nothing twice.
        let dup_before = stream.stats().duplicates;
        let mut calls = 0u64;
        let again = stream.follow_from(&client, StartAt::After(self.cut_a), |_| {
            calls += 1;
            Ok::<_, String>(taskstream_client::Flow::Continue)
        });
        self.count(stream.stats());
        let dropped = stream.stats().duplicates - dup_before;
        let expected_dups = self.last_a - self.cut_a;
        self.ui.line(&format!(
            "redelivery test: tasks/stream {{after: {}}} again → {dropped} events received, {dropped} dropped as duplicates, {calls} processed",
            self.cut_a
        ));
        let seqs: Vec<u64> = self.seen_a.iter().map(|s| s.seq).collect();
        let unique: BTreeSet<u64> = seqs.iter().copied().collect();
        self.report.check(
            &mut self.ui,
            5,
            "RS-10/RS-11",
            "redelivered duplicates dropped by (taskId, seq); none processed twice",
            matches!(again, Ok(FollowEnd::Completed(_)))
                && calls == 0
                && dropped == expected_dups
                && unique.len() == seqs.len(),
            format!(
                "{dropped} of {expected_dups} redelivered events dropped, {calls} handler calls; {} processed, {} distinct",
                seqs.len(),
                unique.len()
            ),
        );
        // Audit: replay everything the restarted server retains and compare with what the
        // client processed before the kill and after the resume.
        let mut audit = ResumableStream::new(
            task_id.clone(),
            MemoryCursorStore::new(),
            stream_options(GonePolicy::Fail),
        )
        .map_err(err("cursor store"))?;
        let mut log: Vec<Seen> = Vec::new();
        let audited = audit.follow_from(&client, StartAt::Retained, |e| {
            log.push(Seen::of(e));
            Ok::<_, String>(taskstream_client::Flow::Continue)
        });
        self.count(audit.stats());
        audited.map_err(|e| format!("audit replay: {e}"))?;
        let before_kill: Vec<&Seen> = self.seen_a.iter().filter(|s| s.seq <= self.cut_a).collect();
        let mismatched: Vec<u64> = before_kill
            .iter()
            .filter(|s| log.get(usize::try_from(s.seq).unwrap_or(usize::MAX)) != Some(*s))
            .map(|s| s.seq)
            .collect();
        self.ui.line(&format!(
            "audit: tasks/stream without after replays {} events (seq 0..={})",
            log.len(),
            log.last().map_or(0, |s| s.seq)
        ));
        self.report.check(
            &mut self.ui,
            5,
            "durability",
            "every event received before the kill survives: same seq, same content",
            mismatched.is_empty() && before_kill.len() as u64 == self.cut_a + 1,
            format!(
                "{} events (seq 0..={}) compared field by field; {} differ{}",
                before_kill.len(),
                self.cut_a,
                mismatched.len(),
                if mismatched.is_empty() {
                    String::new()
                } else {
                    format!(" (first: seq {})", mismatched.first().copied().unwrap_or(0))
                }
            ),
        );
        let same_log = log == self.seen_a;
        let terminal = log.last();
        let terminal_failed = terminal.is_some_and(|t| {
            t.event_type == STATUS_TYPE
                && t.payload.get("status").and_then(Value::as_str) == Some("failed")
        });
        let status_events = log.iter().filter(|s| s.event_type == STATUS_TYPE).count();
        let now = client.task_info(&task_id).map_err(err("tasks/get"))?;
        self.report.check(
            &mut self.ui,
            5,
            "durability/RL-01",
            "task A ended failed: terminal status event, consistent with tasks/get",
            terminal_failed && now.status == TaskStatus::Failed && status_events == 2 && same_log,
            format!(
                "last event {}; tasks/get status {}; {} status events; full log equals what was processed: {same_log}",
                terminal.map_or_else(
                    || "none".to_owned(),
                    |t| format!("seq {} {} {}", t.seq, t.event_type, Value::Object(t.payload.clone()))
                ),
                now.status,
                status_events
            ),
        );
        let (fidelity_ok, fidelity) = compare_with_trace(self.setup.trace, &log, 1..self.last_a);
        self.report.check(
            &mut self.ui,
            5,
            "EV-08",
            "task A's events are the bundled trace's lines, unchanged",
            fidelity_ok,
            fidelity,
        );
        let _ = client.close();
        Ok(())
    }
}
