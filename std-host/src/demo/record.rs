//! The demo's event handler: renders each event, records it for the later comparisons, and
//! probes RS-08 by reading the cursor file back, through a second store, while the event is
//! being processed: it must still hold the previous event's seq.

use serde_json::{Map, Value};

use crate::demo::ui::Ui;
use crate::demo::view::TraceView;
use taskstream_client::{CursorStore, FileCursorStore, Flow, TaskEvent};

/// An event the handler processed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Seen {
    pub(crate) seq: u64,
    pub(crate) event_type: String,
    pub(crate) payload: Map<String, Value>,
}

impl Seen {
    pub(crate) fn of(event: &TaskEvent) -> Seen {
        Seen {
            seq: event.seq,
            event_type: event.event_type.clone(),
            payload: event.payload.clone(),
        }
    }
}

/// Handles the events of one follow.
pub(crate) struct Recorder<'a> {
    pub(crate) ui: &'a mut Ui,
    pub(crate) view: &'a mut TraceView,
    /// Every event processed for this task, in processing order, across follows.
    pub(crate) seen: &'a mut Vec<Seen>,
    /// A second store on the cursor directory, to read the persisted cursor back.
    pub(crate) probe: &'a FileCursorStore,
    /// The cursor the probe must read while the next event is processed.
    pub(crate) probe_expect: Option<u64>,
    pub(crate) probes: &'a mut u64,
    pub(crate) probe_failures: &'a mut Vec<String>,
    /// The number of events the whole task will have, for the progress bar.
    pub(crate) total: Option<u64>,
    /// Stop (commit, then cancel the stream) after processing this seq.
    pub(crate) stop_after: Option<u64>,
    /// Quartiles already reported in plain mode.
    pub(crate) quartile: u64,
}

impl Recorder<'_> {
    /// The handler: probe, render, record; `Stop` at `stop_after`.
    pub(crate) fn on_event(&mut self, event: &TaskEvent) -> Result<Flow, String> {
        let on_disk = self
            .probe
            .load(&event.task_id)
            .map_err(|e| format!("reading the cursor back: {e}"))?;
        *self.probes += 1;
        if on_disk != self.probe_expect {
            self.probe_failures.push(format!(
                "while processing seq {} the cursor file held {on_disk:?}, expected {:?}",
                event.seq, self.probe_expect
            ));
        }
        if let Some(line) = self.view.render(event) {
            self.ui.line(&line);
        }
        let done = event.seq + 1;
        self.ui.live(done, self.total, self.view.tail());
        if let Some(total) = self.total.filter(|_| !self.ui.is_tty()) {
            let q = done * 4 / total.max(1);
            if q > self.quartile && q < 4 {
                self.quartile = q;
                self.ui
                    .line(&format!("progress    {}% ({done}/{total} events)", q * 25));
            }
        }
        self.seen.push(Seen::of(event));
        self.probe_expect = Some(event.seq);
        if self.stop_after.is_some_and(|s| event.seq >= s) {
            self.ui.end_live();
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }
}
