//! Step 7: a server that retains from checkpoints (`--retain-from-checkpoint`); a task that
//! checkpoints its state every 100 events; a late joiner starts from the latest checkpoint,
//! is told so, and rebuilds the state a full replay would give (CP-03, CP-05, CP-06).

use std::time::{Duration, Instant};

use serde_json::json;
use taskstream_client::{Delivery, Flow, GonePolicy, MemoryCursorStore, ResumableStream, StartAt};

use super::{err, opt, stream_options, Demo, Res};

/// The task of this step: `emit` ticks with a checkpoint after every `EVERY`.
const TICKS: u64 = 1_000;
const EVERY: u64 = 100;

impl Demo {
    pub(super) fn step_checkpoint(&mut self) -> Res<()> {
        let client = self.spawn(&["--retain-from-checkpoint"])?;
        let task = client
            .start_task(
                "emit",
                json!({"count": TICKS, "interval_ms": 2, "checkpoint_every": EVERY}),
            )
            .map_err(err("tools/call emit"))?
            .task_id;
        self.ui.line(&format!(
            "task C {task}: emit {TICKS} ticks, a checkpoint {{\"ticks\": n}} after every {EVERY}"
        ));
        // Wait (bounded) until the task has ended, showing only tasks/get.
        let deadline = Instant::now() + Duration::from_secs(60);
        let info = loop {
            let info = client.task_info(&task).map_err(err("tasks/get"))?;
            if info.status.is_terminal() {
                break info;
            }
            if Instant::now() >= deadline {
                return Err("task C did not finish within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.show_task("tasks/get", &info);
        let earliest = info.events.and_then(|r| r.earliest_seq);
        // A late joiner with no cursor: the first event it gets is the latest checkpoint.
        let mut stream = ResumableStream::new(
            task.clone(),
            MemoryCursorStore::new(),
            stream_options(GonePolicy::ResumeFromEarliest),
        )
        .map_err(err("cursor store"))?;
        let mut ticks = 0u64;
        let mut started = None;
        let mut after = 0u64;
        stream
            .follow_state(&client, StartAt::Cursor, |d| {
                match d {
                    Delivery::FromCheckpoint {
                        event, checkpoint, ..
                    } => {
                        ticks = checkpoint.state["ticks"].as_u64().unwrap_or(0);
                        started = Some(event.seq);
                    }
                    Delivery::Event(e) | Delivery::AfterGap { event: e, .. } => {
                        if e.event_type == "dev.taskstream.tick" {
                            ticks += 1;
                        }
                        after += 1;
                    }
                    _ => {}
                }
                Ok::<_, String>(Flow::Continue)
            })
            .map_err(|e| format!("the late joiner: {e}"))?;
        self.count(stream.stats());
        self.ui.line(&format!(
            "late joiner: started from the checkpoint at seq {} (told so by the client), then {after} events; state {{\"ticks\": {ticks}}}",
            opt(started)
        ));
        self.report.check(
            &mut self.ui,
            7,
            "CP-03/CP-06",
            "a late joiner starts from the latest checkpoint and is told so",
            started.is_some() && started == earliest,
            format!(
                "first event: checkpoint at {}; tasks/get earliestSeq {}",
                opt(started),
                opt(earliest)
            ),
        );
        self.report.check(
            &mut self.ui,
            7,
            "CP-05",
            "the state rebuilt from the checkpoint equals a full replay's",
            ticks == TICKS,
            format!("{ticks} ticks rebuilt; the task emitted {TICKS}"),
        );
        self.report.fact("checkpointJoinEvents", json!(after + 1));
        Ok(())
    }
}
