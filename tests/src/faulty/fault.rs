//! The ways the server can be told to break SEP-2694: each fault breaks one rule (or one
//! family of rules that say the same thing) and leaves everything else correct.

use std::collections::BTreeSet;

/// One deliberate mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    SkipSeq,
    DropLiveEvent,
    DropHistoryTail,
    Reorder,
    DropMeta,
    MetaMismatch,
    ForeignTaskId,
    StartAtOne,
    PayloadNotObject,
    UnprefixedType,
    ReservedNamespaceType,
    MutableReplay,
    NeverClose,
    SecondStream,
    SecondStreamCode,
    CancelKillsTask,
    IgnoreCancel,
    AnswerCancelled,
    PushUnsolicited,
    AcceptNegative,
    AcceptBeyondLast,
    ReplayIncludesCursor,
    AfterLastNotImmediate,
    NoAfterLiveOnly,
    LiveBeforeReplay,
    GoneWrongEarliest,
    GoneOtherCode,
    NoEventsGone,
    GoneOffByOne,
    StreamLooseMatch,
    StreamSkipsLookup,
    UnknownTaskCode,
    NoExtCheck,
    NoMetaCheck,
    NoResultType,
    StatusMismatch,
    NoStreamLimit,
    EmptyNoResult,
    EmptyLeftOpen,
    DropOnTerminal,
    NoStreams,
    CloseEarly,
    DuplicateOnResume,
    GoneOnResume,
    CheckpointGap,
    CheckpointCoversItself,
    CheckpointNotEarliest,
}

/// Every fault: its name on the command line and what it does.
pub(crate) const FAULTS: [(&str, Fault, &str); 44] = [
    (
        "skip-seq",
        Fault::SkipSeq,
        "numbers events 0, 1, 3, 4, ...: seq 2 is never assigned",
    ),
    (
        "drop-live-event",
        Fault::DropLiveEvent,
        "a stream following a task live leaves out seq 3 (replays still have it)",
    ),
    (
        "drop-history-tail",
        Fault::DropHistoryTail,
        "the history of a task that a stream on this connection followed to its end leaves out its last two events",
    ),
    ("reorder", Fault::Reorder, "delivers seq 3 before seq 2"),
    (
        "drop-meta",
        Fault::DropMeta,
        "sends events without the related-task _meta",
    ),
    (
        "meta-mismatch",
        Fault::MetaMismatch,
        "the related-task taskId differs from params.taskId",
    ),
    (
        "foreign-task-id",
        Fault::ForeignTaskId,
        "events name another task (params and _meta alike)",
    ),
    (
        "start-at-one",
        Fault::StartAtOne,
        "numbers a task's events from 1",
    ),
    (
        "payload-not-object",
        Fault::PayloadNotObject,
        "tick payloads are arrays",
    ),
    (
        "unprefixed-type",
        Fault::UnprefixedType,
        "tick events have the type \"tick\"",
    ),
    (
        "reserved-namespace-type",
        Fault::ReservedNamespaceType,
        "tick events have the type \"io.modelcontextprotocol.tick\"",
    ),
    (
        "mutable-replay",
        Fault::MutableReplay,
        "replayed events carry a changed payload",
    ),
    (
        "never-close",
        Fault::NeverClose,
        "a stream that delivered events never answers",
    ),
    (
        "second-stream",
        Fault::SecondStream,
        "serves a second stream on a task with an active one",
    ),
    (
        "second-stream-code",
        Fault::SecondStreamCode,
        "refuses a second stream with -32600",
    ),
    (
        "cancel-kills-task",
        Fault::CancelKillsTask,
        "cancelling a stream cancels its task",
    ),
    (
        "ignore-cancel",
        Fault::IgnoreCancel,
        "ignores notifications/cancelled",
    ),
    (
        "answer-cancelled",
        Fault::AnswerCancelled,
        "stops a cancelled stream's events, but answers it when the task ends",
    ),
    (
        "push-unsolicited",
        Fault::PushUnsolicited,
        "sends a new task's first event while no stream is open",
    ),
    (
        "accept-negative",
        Fault::AcceptNegative,
        "takes a negative after as omitted",
    ),
    (
        "accept-beyond-last",
        Fault::AcceptBeyondLast,
        "accepts an after beyond the last assigned seq",
    ),
    (
        "replay-includes-cursor",
        Fault::ReplayIncludesCursor,
        "after=k also delivers seq k",
    ),
    (
        "after-last-not-immediate",
        Fault::AfterLastNotImmediate,
        "after = the last seq of a terminal task delivers that event again",
    ),
    (
        "no-after-live-only",
        Fault::NoAfterLiveOnly,
        "without after, a running task's stream skips the retained events",
    ),
    (
        "live-before-replay",
        Fault::LiveBeforeReplay,
        "on a running task, holds the replay until the next live event has been sent",
    ),
    (
        "gone-wrong-earliest",
        Fault::GoneWrongEarliest,
        "events_gone reports earliestSeq - 1",
    ),
    (
        "gone-other-code",
        Fault::GoneOtherCode,
        "answers events_gone with code -32602 (data.reason still events_gone)",
    ),
    (
        "no-events-gone",
        Fault::NoEventsGone,
        "never answers events_gone: delivers what is retained",
    ),
    (
        "gone-off-by-one",
        Fault::GoneOffByOne,
        "answers events_gone only when two or more events after the cursor are gone",
    ),
    (
        "stream-loose-match",
        Fault::StreamLooseMatch,
        "tasks/stream matches task ids ignoring case and trailing characters",
    ),
    (
        "stream-skips-lookup",
        Fault::StreamSkipsLookup,
        "tasks/stream for an unknown task answers an empty result",
    ),
    (
        "unknown-task-code",
        Fault::UnknownTaskCode,
        "refuses unknown tasks with -32600",
    ),
    (
        "no-ext-check",
        Fault::NoExtCheck,
        "serves a modern tasks/stream that did not declare the Tasks extension",
    ),
    (
        "no-meta-check",
        Fault::NoMetaCheck,
        "serves a modern tasks/stream without _meta",
    ),
    (
        "no-result-type",
        Fault::NoResultType,
        "closes a modern stream with {} (no resultType)",
    ),
    (
        "status-mismatch",
        Fault::StatusMismatch,
        "the terminal status event of a completed task says \"failed\"",
    ),
    (
        "no-stream-limit",
        Fault::NoStreamLimit,
        "never limits concurrent streams",
    ),
    (
        "empty-no-result",
        Fault::EmptyNoResult,
        "without after, a terminal task with nothing retained never answers",
    ),
    (
        "empty-left-open",
        Fault::EmptyLeftOpen,
        "without after, a terminal task with nothing retained is answered, but its stream stays active",
    ),
    (
        "drop-on-terminal",
        Fault::DropOnTerminal,
        "forgets a task's events once it ends, though tasks/get still finds it",
    ),
    (
        "no-streams",
        Fault::NoStreams,
        "does not implement tasks/stream (-32601)",
    ),
    (
        "checkpoint-gap",
        Fault::CheckpointGap,
        "with --retain-from-checkpoint, a cursor before the latest checkpoint is served from the checkpoint with a result, not events_gone",
    ),
    (
        "checkpoint-covers-itself",
        Fault::CheckpointCoversItself,
        "a checkpoint's coversThrough is its own seq, not the seq before it",
    ),
    (
        "checkpoint-not-earliest",
        Fault::CheckpointNotEarliest,
        "with --retain-from-checkpoint, advertises checkpoints but keeps the events before the latest one",
    ),
];

/// The faults for client authors (`taskstream conformance-server --fault NAME`): each puts one
/// client rule to the test, and the client rules it exercises.
pub(crate) const CLIENT_FAULTS: [(&str, Fault, &str, &str); 3] = [
    (
        "close-early",
        Fault::CloseEarly,
        "RS-08, RS-09",
        "closes every stream with its result after 3 events while the task still runs (TS-04 \
         allows it): the client must reopen with after = the last seq it processed",
    ),
    (
        "duplicate-on-resume",
        Fault::DuplicateOnResume,
        "RS-10, RS-11",
        "a stream opened with after = k first delivers seqs k - 1 and k again: the client must \
         tolerate them and drop them by (taskId, seq)",
    ),
    (
        "gone-on-resume",
        Fault::GoneOnResume,
        "EG-02",
        "the first stream opened with after = k on a task drops the task's events up to k + 1 and \
         answers events_gone with earliestSeq = k + 2: the client must recover (after = \
         earliestSeq - 1, or without after) or report the gap",
    ),
];

/// The faults in force.
#[derive(Clone, Debug, Default)]
pub(crate) struct Faults(BTreeSet<Fault>);

impl Faults {
    /// Adds the fault named `name`.
    ///
    /// # Errors
    ///
    /// The unknown name.
    pub(crate) fn add(&mut self, name: &str) -> Result<(), String> {
        let server = FAULTS
            .iter()
            .find(|(known, _, _)| *known == name)
            .map(|(_, fault, _)| *fault);
        let client = CLIENT_FAULTS
            .iter()
            .find(|(known, _, _, _)| *known == name)
            .map(|(_, fault, _, _)| *fault);
        match server.or(client) {
            Some(fault) => {
                self.0.insert(fault);
                Ok(())
            }
            None => Err(format!(
                "unknown fault {name:?} (--list-faults, --list-client-faults)"
            )),
        }
    }

    pub(crate) fn has(&self, fault: Fault) -> bool {
        self.0.contains(&fault)
    }
}
