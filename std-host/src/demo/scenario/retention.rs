//! Step 6: a server retaining 5 events per task; a client that left early comes back with an
//! old cursor, gets `events_gone`, fails under the fail policy and recovers with
//! `after = earliestSeq - 1`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::demo::record::{Recorder, Seen};
use crate::demo::ui::fit;
use crate::demo::view::TraceView;
use taskstream_client::{
    FileCursorStore, FollowEnd, FollowError, GonePolicy, ResumableStream, SkippedRange, StartAt,
    StreamItem, TaskStatus,
};

use super::{
    compare_with_trace, err, opt, stream_options, Demo, Res, SMALL_RETENTION, STATUS_TYPE,
};

impl Demo {
    pub(super) fn step_gone(&mut self) -> Res<()> {
        let limit = SMALL_RETENTION.to_string();
        let client = self.spawn(&["--max-events-per-task", &limit])?;
        let trace = self.setup.trace;
        // Nobody watches most of this replay, so it may run faster.
        let speed_b = self.setup.speed * 2.0;
        let task = client
            .start_task("run_trace", json!({"name": trace.name, "speed": speed_b}))
            .map_err(err("tools/call run_trace"))?;
        let task_id = task.task_id.clone();
        self.report.fact("taskB", json!(task_id));
        self.ui.line(&format!(
            "new task B {task_id}: {:?} again at ×{speed_b}; this server retains {SMALL_RETENTION} events per task",
            trace.name
        ));
        let store = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let probe = FileCursorStore::open(&self.cursor_dir).map_err(err("cursor store"))?;
        let mut stream = ResumableStream::new(
            task_id.clone(),
            store,
            stream_options(GonePolicy::ResumeFromEarliest),
        )
        .map_err(err("cursor store"))?;
        let mut seen_b: Vec<Seen> = Vec::new();
        let mut view_b = TraceView::default();
        let mut probes_b = 0u64;
        let mut probe_failures_b = Vec::new();
        let first = {
            let mut rec = Recorder {
                ui: &mut self.ui,
                view: &mut view_b,
                seen: &mut seen_b,
                probe: &probe,
                probe_expect: None,
                probes: &mut probes_b,
                probe_failures: &mut probe_failures_b,
                total: None,
                stop_after: Some(1),
                quartile: 4,
            };
            stream.follow_from(&client, StartAt::Retained, |e| rec.on_event(e))
        };
        self.count(stream.stats());
        if !matches!(first, Ok(FollowEnd::Stopped)) {
            return Err(format!("following task B: {first:?}"));
        }
        let old = stream.cursor().unwrap_or(0);
        let working = client.task_info(&task_id).map_err(err("tasks/get"))?;
        self.ui.line(&format!(
            "the client leaves after seq {old} (stream cancelled); task B is {} and runs on with nobody listening",
            working.status
        ));
        // Wait (bounded) for the task to finish, showing only what tasks/get reports.
        let budget = trace.duration_ms as f64 / 1000.0 / speed_b + 30.0;
        let deadline = Instant::now() + Duration::from_secs_f64(budget);
        let mut quartile = 0;
        let mut last_line = Instant::now();
        let task = loop {
            let task = client.task_info(&task_id).map_err(err("tasks/get"))?;
            let range = task.events;
            let next = range.map_or(0, |r| r.next_seq);
            let retained = range.map_or_else(
                || "-".to_owned(),
                |r| format!("{}..={}", opt(r.earliest_seq), opt(r.latest_seq)),
            );
            self.ui.live(
                next,
                Some(self.total),
                &format!(
                    "nobody listening; tasks/get: {} events, retained {retained}",
                    next
                ),
            );
            let q = next * 4 / self.total.max(1);
            let quiet_for = last_line.elapsed() >= Duration::from_millis(1500);
            if !self.ui.is_tty() && ((q > quartile && q < 4) || quiet_for) {
                quartile = quartile.max(q);
                last_line = Instant::now();
                self.ui.line(&format!(
                    "tasks/get   {next} events so far, retained seq {retained}"
                ));
            }
            if task.status.is_terminal() {
                break task;
            }
            if Instant::now() >= deadline {
                return Err(format!("task B did not finish within {budget:.0} s"));
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        self.ui.end_live();
        self.show_task("tasks/get", &task);
        let expected_status = if trace.completed {
            TaskStatus::Completed
        } else {
            TaskStatus::Failed
        };
        self.report.check(
            &mut self.ui,
            6,
            "TS-08",
            "cancelling the stream stops delivery, not the task",
            working.status == TaskStatus::Working && task.status == expected_status,
            format!(
                "task B after the cancel: {}; at the end: {} (the trace's outcome is {expected_status})",
                working.status, task.status
            ),
        );
        let last_b = self.total - 1;
        let retained = task.events;
        self.report.check(
            &mut self.ui,
            6,
            "RT-01",
            "the server retains exactly --max-events-per-task events",
            retained.is_some_and(|r| {
                r.latest_seq == Some(last_b)
                    && r.earliest_seq == Some(last_b + 1 - SMALL_RETENTION)
                    && r.next_seq == last_b + 1
            }),
            format!(
                "retained {}; expected {}..={last_b}",
                retained.map_or_else(
                    || "nothing reported".to_owned(),
                    |r| format!("{}..={}", opt(r.earliest_seq), opt(r.latest_seq))
                ),
                last_b + 1 - SMALL_RETENTION
            ),
        );
        // The raw answer, verbatim.
        let raw = {
            let mut s = client
                .open_stream(&task_id, Some(old))
                .map_err(err("tasks/stream"))?;
            s.next(Duration::from_secs(10))
                .map_err(err("tasks/stream"))?
        };
        let gone_error = match raw {
            StreamItem::Error(e) => e,
            other => return Err(format!("expected events_gone, got {other:?}")),
        };
        self.ui.line(&format!(
            "tasks/stream {{after: {old}}} → error {{code: {}, message: {:?}, data: {}}}",
            gone_error.code,
            gone_error.message,
            gone_error.data.clone().unwrap_or(Value::Null)
        ));
        let data = gone_error.data.clone().unwrap_or(Value::Null);
        let earliest = data.get("earliestSeq").and_then(Value::as_u64);
        self.report.check(
            &mut self.ui,
            6,
            "EG-01/RT-04",
            "a cursor before the retained range gets events_gone + earliestSeq",
            gone_error.code == -32010
                && gone_error.message == "Task events are no longer available"
                && data.get("reason").and_then(Value::as_str) == Some("events_gone")
                && data.get("taskId").and_then(Value::as_str) == Some(task_id.as_str())
                && earliest.is_some_and(|e| e > old + 1)
                && earliest == retained.and_then(|r| r.earliest_seq),
            format!(
                "code {}, reason {}, taskId matches: {}, earliestSeq {} (tasks/get: {}) > cursor + 1 = {}",
                gone_error.code,
                data.get("reason").unwrap_or(&Value::Null),
                data.get("taskId").and_then(Value::as_str) == Some(task_id.as_str()),
                opt(earliest),
                opt(retained.and_then(|r| r.earliest_seq)),
                old + 1
            ),
        );
        // Policy "fail": the gap is fatal and nothing is processed.
        stream.set_options(stream_options(GonePolicy::Fail));
        let processed_before = stream.stats().processed;
        let fatal = stream.follow(&client, |_| {
            Ok::<_, String>(taskstream_client::Flow::Continue)
        });
        self.count(stream.stats());
        let fatal_ok = matches!(&fatal, Err(FollowError::EventsGone(g)) if g.task_id == task_id)
            && stream.stats().processed == processed_before
            && stream.cursor() == Some(old);
        self.ui.line(&format!(
            "policy fail  → {}",
            match &fatal {
                Err(e) => e.to_string(),
                Ok(end) => format!("{end:?}"),
            }
        ));
        self.report.check(
            &mut self.ui,
            6,
            "EG-02 (fail)",
            "fail policy: the gap is reported, nothing is processed",
            fatal_ok,
            format!(
                "cursor still {}; events processed meanwhile: {}",
                opt(stream.cursor()),
                stream.stats().processed - processed_before
            ),
        );
        // Policy "resume from earliest": after = earliestSeq - 1, then live to the end.
        stream.set_options(stream_options(GonePolicy::ResumeFromEarliest));
        let afters_before = stream.stats().afters.len();
        let gaps_before = stream.stats().gaps.len();
        let gone_before = stream.stats().gone.len();
        let resumed_from = seen_b.len();
        let end = {
            let mut rec = Recorder {
                ui: &mut self.ui,
                view: &mut view_b,
                seen: &mut seen_b,
                probe: &probe,
                probe_expect: Some(old),
                probes: &mut probes_b,
                probe_failures: &mut probe_failures_b,
                total: None,
                stop_after: None,
                quartile: 4,
            };
            stream.follow(&client, |e| rec.on_event(e))
        };
        self.count(stream.stats());
        self.ui.end_live();
        let end = end.map_err(|e| format!("recovering task B: {e}"))?;
        let stats = stream.stats().clone();
        let gone = stats.gone[gone_before..].last().cloned();
        let after_sent = stats.afters[afters_before..].to_vec();
        let gaps = stats.gaps[gaps_before..].to_vec();
        let resumed: Vec<u64> = seen_b[resumed_from..].iter().map(|s| s.seq).collect();
        self.ui.line(&format!(
            "policy resume-from-earliest → tasks/stream after {}; lost range accepted and recorded: {}; processed seq {}..={}",
            after_sent
                .iter()
                .map(|a| opt(*a))
                .collect::<Vec<_>>()
                .join(", then "),
            gaps.iter()
                .map(|g| format!("{}..={}", g.first, g.last))
                .collect::<Vec<_>>()
                .join(", "),
            resumed.first().map_or_else(|| "-".into(), u64::to_string),
            resumed.last().map_or_else(|| "-".into(), u64::to_string)
        ));
        let recovered_ok = match &gone {
            Some(g) => {
                after_sent.last() == Some(&Some(g.earliest_seq - 1))
                    && resumed.first() == Some(&g.earliest_seq)
                    && resumed.iter().copied().eq(g.earliest_seq..=last_b)
                    && gaps.last()
                        == Some(&SkippedRange {
                            first: old + 1,
                            last: g.earliest_seq - 1,
                        })
            }
            None => false,
        };
        self.report.check(
            &mut self.ui,
            6,
            "EG-02 (recover)",
            "after = earliestSeq - 1 resumes at earliestSeq, gap-free to the end",
            recovered_ok && matches!(end, FollowEnd::Completed(_)),
            format!(
                "events_gone earliestSeq {}; first processed {}; last {} (expected {last_b}); lost range recorded {}",
                gone.as_ref().map_or_else(|| "-".into(), |g| g.earliest_seq.to_string()),
                resumed.first().map_or_else(|| "-".into(), u64::to_string),
                resumed.last().map_or_else(|| "-".into(), u64::to_string),
                gaps.last().map_or_else(|| "none".into(), |g| format!("{}..={}", g.first, g.last))
            ),
        );
        let done = client.task_info(&task_id).map_err(err("tasks/get"))?;
        let terminal_ok = seen_b.last().is_some_and(|t| {
            t.seq == last_b
                && t.event_type == STATUS_TYPE
                && t.payload.get("status").and_then(Value::as_str)
                    == Some(if trace.completed {
                        "completed"
                    } else {
                        "failed"
                    })
        });
        // The final answer, as SEP-2663's DetailedTask carries it: `result` when completed,
        // `error` (and the trace's status message) when failed.
        let (answer_ok, answer) = if trace.completed {
            // The protocol's envelope members (`resultType`, `_meta`) are not the tool's output.
            let output = done.result.clone().map(|mut r| {
                if let Some(obj) = r.as_object_mut() {
                    obj.remove("resultType");
                    obj.remove("_meta");
                }
                r
            });
            let same = output.as_ref() == Some(&trace.result);
            (
                same,
                format!("result (without resultType/_meta) equals the trace's: {same}"),
            )
        } else {
            let message_ok =
                trace.status_message.is_none() || done.status_message == trace.status_message;
            (
                done.error.is_some() && message_ok,
                format!(
                    "error {}; statusMessage {:?} (trace: {:?})",
                    fit(
                        &done
                            .error
                            .as_ref()
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        60
                    ),
                    done.status_message.as_deref().map(|m| fit(m, 50)),
                    trace.status_message.as_deref().map(|m| fit(m, 50))
                ),
            )
        };
        self.report.check(
            &mut self.ui,
            6,
            "RL-01",
            "task B finished as the trace does, and its last event says so",
            terminal_ok && done.status == expected_status && answer_ok,
            format!(
                "tasks/get status {} (trace outcome {expected_status}); {answer}",
                done.status
            ),
        );
        let (fidelity_ok, fidelity) = compare_with_trace(trace, &seen_b, 1..last_b);
        self.report.check(
            &mut self.ui,
            6,
            "EV-08",
            "task B's events are the bundled trace's lines, unchanged",
            fidelity_ok,
            fidelity,
        );
        self.report.check(
            &mut self.ui,
            6,
            "RS-08",
            "task B: cursor committed only after each event was processed",
            probe_failures_b.is_empty() && probes_b == seen_b.len() as u64,
            format!("{probes_b} probes, {} mismatches", probe_failures_b.len()),
        );
        self.report.check(
            &mut self.ui,
            6,
            "NT-01/NT-02",
            "every event carried related-task _meta naming its task",
            self.related_checked > 0 && self.related_checked == self.events_received,
            format!(
                "{} of {} received events checked (a missing or wrong one aborts the stream)",
                self.related_checked, self.events_received
            ),
        );
        let _ = client.close();
        Ok(())
    }
}
