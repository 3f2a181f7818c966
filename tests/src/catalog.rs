//! The requirement IDs the suite checks on the wire, one row each.
//!
//! IDs are those of the SEP-2694 checklist (docs/specification/requirements.md), plus the derived `DX-*`
//! rules; RS-03 is split into its two branches, `RS-03a` (replay) and `RS-03b` (`events_gone`).
//! Client-only rules and rules that need another transport are not here: the traceability file
//! `sep-2694.yaml` lists them as `excluded`. The `CP-*` rows are taskstream's own checkpoint
//! rules (not SEP-2694's, so not in that file), judged only on a server that advertises them. This module owns only the table; what each check
//! observes is written in `scenarios/`.

/// How binding a requirement is, and so how its verdict is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// A MUST (or a rule normative in effect): counted in the closing line; a failure fails the run.
    Must,
    /// A SHOULD: reported as `PASS ID check (should)` or `WARN ID check: ...`; never fails the run.
    Should,
    /// A MAY: reported as an `INFO` line only.
    May,
}

/// One requirement the suite observes on the wire.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    /// The requirement ID, e.g. `EV-01`.
    pub id: &'static str,
    /// How the verdict is counted.
    pub level: Level,
    /// The check's name, as the traceability file cites it.
    pub name: &'static str,
    /// What the check observes, in one line.
    pub rule: &'static str,
}

/// Internal, typo-proof handle on a row of [`CHECKS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Id {
    Ts01,
    Ts02,
    Ts03,
    Ts05,
    Ts06,
    Ts08,
    Ev01,
    Ev02,
    Ev03,
    Ev04,
    Ev05,
    Ev06,
    Ev07,
    Ev08,
    Nt01,
    Nt02,
    Nt03,
    Rs01,
    Rs02,
    Rs03a,
    Rs03b,
    Rs04,
    Rs05,
    Rs06,
    Rs07,
    Eg01,
    Rt02,
    Rt04,
    Rl01,
    Se01,
    Se03,
    Se07,
    Dx01,
    Dx02,
    Dx03,
    Dx04,
    Dx05,
    Dx07,
    Cp01,
    Cp03,
    Cp04,
}

impl Id {
    /// Every ID, in report order (the order of [`CHECKS`]).
    pub(crate) const ALL: [Id; 41] = [
        Id::Ts01,
        Id::Ts02,
        Id::Ts03,
        Id::Ts05,
        Id::Ts06,
        Id::Ts08,
        Id::Ev01,
        Id::Ev02,
        Id::Ev03,
        Id::Ev04,
        Id::Ev05,
        Id::Ev06,
        Id::Ev07,
        Id::Ev08,
        Id::Nt01,
        Id::Nt02,
        Id::Nt03,
        Id::Rs01,
        Id::Rs02,
        Id::Rs03a,
        Id::Rs03b,
        Id::Rs04,
        Id::Rs05,
        Id::Rs06,
        Id::Rs07,
        Id::Eg01,
        Id::Rt02,
        Id::Rt04,
        Id::Rl01,
        Id::Se01,
        Id::Se03,
        Id::Se07,
        Id::Dx01,
        Id::Dx02,
        Id::Dx03,
        Id::Dx04,
        Id::Dx05,
        Id::Dx07,
        Id::Cp01,
        Id::Cp03,
        Id::Cp04,
    ];

    /// The table row of this ID.
    pub(crate) fn check(self) -> &'static Check {
        // `ALL` and `CHECKS` are written in the same order; the unit test below holds them to it.
        &CHECKS[self as usize]
    }

    /// The requirement ID as printed.
    #[cfg(test)]
    pub(crate) fn as_str(self) -> &'static str {
        self.check().id
    }
}

const fn must(id: &'static str, name: &'static str, rule: &'static str) -> Check {
    Check {
        id,
        level: Level::Must,
        name,
        rule,
    }
}

const fn should(id: &'static str, name: &'static str, rule: &'static str) -> Check {
    Check {
        id,
        level: Level::Should,
        name,
        rule,
    }
}

/// Every check of the suite, in report order.
pub static CHECKS: [Check; 41] = [
    must(
        "TS-01",
        "sep-2694-unsupported-method-not-found",
        "a server without event streams answers tasks/stream with -32601 (n/a when it supports them)",
    ),
    Check {
        id: "TS-02",
        level: Level::May,
        name: "sep-2694-event-streams-capability",
        rule: "eventStreams may be advertised inside the Tasks capability (reported, never judged)",
    },
    must(
        "TS-03",
        "sep-2694-terminal-stream-events-then-result",
        "on a terminal task the stream delivers notifications/tasks/event, then closes with a result",
    ),
    must(
        "TS-05",
        "sep-2694-one-active-stream-per-task",
        "a second tasks/stream for a task with an active stream is not served",
    ),
    must(
        "TS-06",
        "sep-2694-second-stream-invalid-params",
        "a second tasks/stream for a task with an active stream gets -32602",
    ),
    must(
        "TS-08",
        "sep-2694-stream-cancel-keeps-task",
        "cancelling the tasks/stream request does not cancel the task",
    ),
    must(
        "EV-01",
        "sep-2694-event-task-id-matches-stream",
        "each event's taskId is the task the stream was opened for",
    ),
    must(
        "EV-02",
        "sep-2694-event-first-seq-zero",
        "the first event of a task has seq 0",
    ),
    must(
        "EV-03",
        "sep-2694-event-seq-contiguous",
        "seq is a non-negative integer; no stream, and no history, shows a seq never assigned",
    ),
    must(
        "EV-04",
        "sep-2694-event-delivered-in-order",
        "each stream delivers events in strictly increasing seq order",
    ),
    must(
        "EV-05",
        "sep-2694-event-payload-object",
        "each event's payload is a JSON object",
    ),
    must(
        "EV-06",
        "sep-2694-event-type-prefixed",
        "no unprefixed event type (a namespace of at least two labels, then a name)",
    ),
    must(
        "EV-07",
        "sep-2694-event-type-vendor-namespace",
        "a prefixed event type is a well-formed vendor namespace, not MCP's own",
    ),
    must(
        "EV-08",
        "sep-2694-event-immutable",
        "the same (taskId, seq) carries the same type and payload on every delivery",
    ),
    must(
        "NT-01",
        "sep-2694-notification-related-task-meta",
        "each event carries _meta[\"io.modelcontextprotocol/related-task\"].taskId",
    ),
    must(
        "NT-02",
        "sep-2694-notification-related-task-matches",
        "the related-task taskId equals params.taskId",
    ),
    must(
        "NT-03",
        "sep-2694-notification-only-on-active-stream",
        "no task event arrives for a task without an active tasks/stream",
    ),
    must(
        "RS-01",
        "sep-2694-after-non-negative-integer",
        "a negative or non-integer after gets -32602",
    ),
    must(
        "RS-02",
        "sep-2694-after-invalid-seq",
        "an after that is no valid seq (1.0, 1e0, >= 2^53, beyond the last seq) gets -32602",
    ),
    must(
        "RS-03a",
        "sep-2694-after-replays-tail",
        "a valid after delivers exactly the retained events above it, then live ones",
    ),
    must(
        "RS-03b",
        "sep-2694-after-dropped-events-gone",
        "a valid after whose next events were dropped gets events_gone, not events",
    ),
    must(
        "RS-04",
        "sep-2694-after-last-terminal-immediate",
        "after = the last seq of a terminal task: a result at once, no events",
    ),
    must(
        "RS-05",
        "sep-2694-no-after-from-earliest",
        "without after the stream starts at the earliest retained event, then goes live",
    ),
    must(
        "RS-06",
        "sep-2694-no-after-nothing-retained",
        "without after, nothing retained and a terminal task: a result at once",
    ),
    must(
        "RS-07",
        "sep-2694-no-silent-gap",
        "every stream, live or replayed, carries exactly after+1, after+2, ...: nothing skipped, its tail included",
    ),
    must(
        "EG-01",
        "sep-2694-events-gone-shape",
        "events_gone is -32010 with data {reason: \"events_gone\", taskId, earliestSeq = oldest retained}",
    ),
    should(
        "RT-02",
        "sep-2694-events-retained-while-task-retrievable",
        "a terminal task that tasks/get still resolves still has events to stream",
    ),
    must(
        "RT-04",
        "sep-2694-resume-before-retained-range-gone",
        "a cursor just before the retained range gets events_gone",
    ),
    should(
        "RL-01",
        "sep-2694-status-events-match-tasks-get",
        "the last status-like event of a terminal task matches tasks/get",
    ),
    must(
        "SE-01",
        "sep-2694-stream-access-as-tasks-get",
        "tasks/stream refuses a task id exactly when and as tasks/get does",
    ),
    must(
        "SE-03",
        "sep-2694-no-events-for-inaccessible-task",
        "no events are streamed for a task id that tasks/get refuses",
    ),
    should(
        "SE-07",
        "sep-2694-concurrent-stream-limit",
        "concurrent streams per connection are limited; the one over the limit gets -32602",
    ),
    must(
        "DX-01",
        "sep-2694-stream-result-shape",
        "the closing result is {\"resultType\": \"complete\"} (modern) or an object (legacy)",
    ),
    must(
        "DX-02",
        "sep-2694-unknown-task-invalid-params",
        "tasks/stream for an unknown taskId gets -32602",
    ),
    must(
        "DX-03",
        "sep-2694-modern-extension-required",
        "a modern tasks/stream that did not declare the Tasks extension gets -32021",
    ),
    must(
        "DX-04",
        "sep-2694-cancelled-stream-silent",
        "after notifications/cancelled, no further event and no response for that stream",
    ),
    must(
        "DX-05",
        "sep-2694-modern-meta-required",
        "a modern tasks/stream without the required _meta gets -32602",
    ),
    must(
        "DX-07",
        "sep-2694-replay-before-live",
        "on a late join every replayed event precedes every live one",
    ),
    // taskstream's checkpoint rules, checked only on a server that advertises
    // `experimental["dev.taskstream/checkpoints"]` (given as --checkpoint-cmd / --checkpoint-url).
    must(
        "CP-01",
        "taskstream-checkpoint-shape",
        "a dev.taskstream.checkpoint event's payload is {coversThrough: its seq - 1, state: an object}",
    ),
    must(
        "CP-03",
        "taskstream-checkpoint-earliest-retained",
        "under retain-from-checkpoint, a stream without after starts with the task's latest checkpoint",
    ),
    must(
        "CP-04",
        "taskstream-checkpoint-no-silent-gap",
        "a cursor before the latest checkpoint gets events_gone with earliestSeq = its seq, never a result that skips; after = its seq - 1 resumes; tasks/get's earliest seq agrees",
    ),
];

/// The row of a printed requirement ID, if the suite checks it.
pub fn check(id: &str) -> Option<&'static Check> {
    CHECKS.iter().find(|c| c.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_table_rows_line_up() {
        let printed: Vec<&str> = Id::ALL.iter().map(|id| id.as_str()).collect();
        let table: Vec<&str> = CHECKS.iter().map(|c| c.id).collect();
        assert_eq!(printed, table);
        let expected_names: Vec<String> = Id::ALL
            .iter()
            .map(|id| format!("{:?}", id).to_uppercase())
            .collect();
        let table_compact: Vec<String> = CHECKS
            .iter()
            .map(|c| c.id.replace('-', "").to_uppercase())
            .collect();
        assert_eq!(expected_names, table_compact);
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = CHECKS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CHECKS.len());
    }
}
