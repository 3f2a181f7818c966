//! The suite against `faulty-server`: with no fault every check passes; with each fault exactly
//! the checks of the rule it breaks fail (or warn), in each era, and no other.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use taskstream_conformance::{run, Era, Level, Outcome, Report, CHECKS};

use crate::{config, FAULTY_SERVER};

/// What one fault must break.
struct Breaks {
    fault: &'static str,
    /// MUST checks that fail in both eras.
    both: &'static [&'static str],
    /// MUST checks that fail in the modern era only (the rule is modern-only).
    modern: &'static [&'static str],
    /// SHOULD checks that warn, in both eras.
    warned: &'static [&'static str],
    /// Events the small-retention twin keeps per task.
    small_retention: &'static str,
}

const fn breaks(fault: &'static str, both: &'static [&'static str]) -> Breaks {
    Breaks {
        fault,
        both,
        modern: &[],
        warned: &[],
        small_retention: "5",
    }
}

/// Where a fault fails more than one check, the rules say the same thing in that situation:
/// - second-stream: serving a second stream is both "more than one active" (TS-05) and "not
///   refused with -32602" (TS-06);
/// - replay-includes-cursor: at the last seq of a terminal task, delivering the cursor's own
///   event is what RS-04 forbids;
/// - live-before-replay: DX-07 is the replay/live boundary case of EV-04;
/// - no-events-gone: RS-03b, RT-04 and RS-07 all demand events_gone for a cursor before the
///   retained range; gone-off-by-one breaks the two of them that speak of the boundary;
/// - stream-loose-match and stream-skips-lookup: SE-01 is "tasks/stream refuses as tasks/get
///   does", which any leak (SE-03) or any lax answer to an unknown task (DX-02) breaks.
const FAULTS: [Breaks; 44] = [
    breaks("skip-seq", &["EV-03"]),
    breaks("drop-live-event", &["RS-07"]),
    breaks("drop-history-tail", &["RS-07"]),
    breaks("reorder", &["EV-04"]),
    breaks("drop-meta", &["NT-01"]),
    breaks("meta-mismatch", &["NT-02"]),
    breaks("foreign-task-id", &["EV-01"]),
    breaks("start-at-one", &["EV-02"]),
    breaks("payload-not-object", &["EV-05"]),
    breaks("unprefixed-type", &["EV-06"]),
    breaks("reserved-namespace-type", &["EV-07"]),
    breaks("mutable-replay", &["EV-08"]),
    breaks("never-close", &["TS-03"]),
    breaks("second-stream", &["TS-05", "TS-06"]),
    breaks("second-stream-code", &["TS-06"]),
    breaks("cancel-kills-task", &["TS-08"]),
    breaks("ignore-cancel", &["DX-04"]),
    breaks("answer-cancelled", &["DX-04"]),
    breaks("push-unsolicited", &["NT-03"]),
    breaks("accept-negative", &["RS-01"]),
    breaks("accept-beyond-last", &["RS-02"]),
    breaks("replay-includes-cursor", &["RS-03a", "RS-04"]),
    breaks("after-last-not-immediate", &["RS-04"]),
    breaks("no-after-live-only", &["RS-05"]),
    breaks("live-before-replay", &["EV-04", "DX-07"]),
    breaks("gone-wrong-earliest", &["EG-01"]),
    // The other checks recognise events_gone by data.reason, as clients do: the code is EG-01's.
    breaks("gone-other-code", &["EG-01"]),
    // On the checkpoint twin too, a cursor before the checkpoint is answered with a gap (CP-04).
    breaks("no-events-gone", &["RS-03b", "RS-07", "RT-04", "CP-04"]),
    breaks("gone-off-by-one", &["RT-04", "RS-07", "CP-04"]),
    breaks("stream-loose-match", &["SE-01", "SE-03"]),
    breaks("stream-skips-lookup", &["SE-01", "DX-02"]),
    breaks("unknown-task-code", &["DX-02"]),
    Breaks {
        modern: &["DX-03"],
        ..breaks("no-ext-check", &[])
    },
    Breaks {
        modern: &["DX-05"],
        ..breaks("no-meta-check", &[])
    },
    Breaks {
        modern: &["DX-01"],
        ..breaks("no-result-type", &[])
    },
    Breaks {
        warned: &["RL-01"],
        ..breaks("status-mismatch", &[])
    },
    Breaks {
        warned: &["SE-07"],
        ..breaks("no-stream-limit", &[])
    },
    Breaks {
        warned: &["RT-02"],
        ..breaks("drop-on-terminal", &[])
    },
    Breaks {
        small_retention: "0",
        ..breaks("empty-no-result", &["RS-06"])
    },
    // Seen on the aged-retention twin: the second stream after the result is refused.
    breaks("empty-left-open", &["RS-06"]),
    // Without tasks/stream at all, TS-01 passes and nothing else can be checked.
    breaks("no-streams", &[]),
    // The checkpoint faults show only on the checkpoint twin; a result that skips to the
    // checkpoint is a silent gap (RS-07) as well.
    breaks("checkpoint-gap", &["CP-04", "RS-07"]),
    breaks("checkpoint-covers-itself", &["CP-01"]),
    // Everything kept: the stream starts at seq 0, and after = 0 is answered with events.
    breaks("checkpoint-not-earliest", &["CP-03"]),
];

fn set(ids: impl IntoIterator<Item = &'static str>) -> BTreeSet<&'static str> {
    ids.into_iter().collect()
}

fn era_report(report: &Report, era: Era) -> &taskstream_conformance::EraReport {
    report.era(era).unwrap()
}

#[track_caller]
fn check(fault: &str) {
    let row = FAULTS.iter().find(|row| row.fault == fault).unwrap();
    let report = run(&config(Some(fault), row.small_retention));
    for era in Era::BOTH {
        let got = era_report(&report, era);
        let mut want = set(row.both.iter().copied());
        if era == Era::Modern {
            want.extend(row.modern);
        }
        assert_eq!(
            set(got.failed()),
            want,
            "--fault {fault}, {era} era: MUST failures\n{}",
            got.render()
        );
        assert_eq!(
            set(got.warned()),
            set(row.warned.iter().copied()),
            "--fault {fault}, {era} era: SHOULD warnings\n{}",
            got.render()
        );
    }
    let expected_exit = if row.both.is_empty() && row.modern.is_empty() {
        0
    } else {
        1
    };
    assert_eq!(report.exit_code(), expected_exit, "--fault {fault}");
}

macro_rules! fault_tests {
    ($($name:ident => $fault:literal,)*) => {
        $(
            #[test]
            fn $name() {
                check($fault);
            }
        )*

        /// Every row of the table has its test above.
        const TESTED: &[&str] = &[$($fault),*];
    };
}

fault_tests! {
    skip_seq => "skip-seq",
    drop_live_event => "drop-live-event",
    drop_history_tail => "drop-history-tail",
    reorder => "reorder",
    drop_meta => "drop-meta",
    meta_mismatch => "meta-mismatch",
    foreign_task_id => "foreign-task-id",
    start_at_one => "start-at-one",
    payload_not_object => "payload-not-object",
    unprefixed_type => "unprefixed-type",
    reserved_namespace_type => "reserved-namespace-type",
    mutable_replay => "mutable-replay",
    never_close => "never-close",
    second_stream => "second-stream",
    second_stream_code => "second-stream-code",
    cancel_kills_task => "cancel-kills-task",
    ignore_cancel => "ignore-cancel",
    answer_cancelled => "answer-cancelled",
    push_unsolicited => "push-unsolicited",
    accept_negative => "accept-negative",
    accept_beyond_last => "accept-beyond-last",
    replay_includes_cursor => "replay-includes-cursor",
    after_last_not_immediate => "after-last-not-immediate",
    no_after_live_only => "no-after-live-only",
    live_before_replay => "live-before-replay",
    gone_wrong_earliest => "gone-wrong-earliest",
    gone_other_code => "gone-other-code",
    no_events_gone => "no-events-gone",
    gone_off_by_one => "gone-off-by-one",
    stream_loose_match => "stream-loose-match",
    stream_skips_lookup => "stream-skips-lookup",
    unknown_task_code => "unknown-task-code",
    no_ext_check => "no-ext-check",
    no_meta_check => "no-meta-check",
    no_result_type => "no-result-type",
    status_mismatch => "status-mismatch",
    no_stream_limit => "no-stream-limit",
    drop_on_terminal => "drop-on-terminal",
    empty_no_result => "empty-no-result",
    empty_left_open => "empty-left-open",
    no_streams => "no-streams",
    checkpoint_gap => "checkpoint-gap",
    checkpoint_covers_itself => "checkpoint-covers-itself",
    checkpoint_not_earliest => "checkpoint-not-earliest",
}

#[test]
fn a_correct_server_passes_every_check() {
    let report = run(&config(None, "5"));
    for era in Era::BOTH {
        let got = era_report(&report, era);
        let render = got.render();
        assert_eq!(got.failed(), Vec::<&str>::new(), "{era} era\n{render}");
        assert_eq!(got.warned(), Vec::<&str>::new(), "{era} era\n{render}");
        // TS-01 is for servers without streams; the `_meta` rules are modern. RS-06 passes on
        // the aged-retention twin.
        let skipped: &[&str] = match era {
            Era::Modern => &["TS-01"],
            Era::Legacy => &["TS-01", "DX-03", "DX-05"],
        };
        assert_eq!(got.skipped(), skipped, "{era} era\n{render}");
        // A stdio server's connection is its process: the long-lived group says why it is
        // skipped, before the verdicts.
        assert!(
            got.notes
                .iter()
                .any(|n| n.starts_with("SKIP long-lived group: ")
                    && n.contains("stdio")
                    && n.contains("--url")),
            "{era} era\n{render}"
        );
        assert!(render.contains("\nSKIP long-lived group: "), "{render}");
    }
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn a_server_that_keeps_nothing_answers_at_once() {
    // With no event retained, the events_gone checks have nothing to resume from, but RS-06
    // (no after, nothing retained, terminal task) is observable.
    let report = run(&config(None, "0"));
    for era in Era::BOTH {
        let got = era_report(&report, era);
        assert_eq!(
            got.outcome("RS-06"),
            Some(&Outcome::Pass),
            "{}",
            got.render()
        );
        assert_eq!(got.failed(), Vec::<&str>::new(), "{}", got.render());
    }
}

#[test]
fn an_aged_retention_server_that_keeps_everything_leaves_rs06_skipped() {
    // A twin without a maximum age never reaches "nothing retained": RS-06 is skipped, with the
    // reason, rather than failed, and the cursor checks fall back on the small-retention twin.
    let mut config = config(None, "5");
    config.aged_retention_command = Some(crate::server(None, &[]));
    config.aged_wait = Duration::from_millis(600);
    let report = run(&config);
    for era in Era::BOTH {
        let got = era_report(&report, era);
        match got.outcome("RS-06") {
            Some(Outcome::Skip(why)) => assert!(
                why.contains("still retained") && why.contains("600 ms"),
                "{}",
                got.render()
            ),
            other => panic!("RS-06 is {other:?}\n{}", got.render()),
        }
        assert_eq!(got.failed(), Vec::<&str>::new(), "{}", got.render());
        assert_eq!(
            got.outcome("RT-04"),
            Some(&Outcome::Pass),
            "{}",
            got.render()
        );
    }
}

#[test]
fn without_the_aged_retention_command_rs06_is_skipped_and_says_why() {
    let mut config = config(None, "5");
    config.aged_retention_command = None;
    let report = run(&config);
    for era in Era::BOTH {
        let got = era_report(&report, era);
        match got.outcome("RS-06") {
            Some(Outcome::Skip(why)) => {
                assert!(why.contains("--aged-retention-cmd"), "{}", got.render())
            }
            other => panic!("RS-06 is {other:?}\n{}", got.render()),
        }
    }
}

#[test]
fn a_server_without_streams_passes_ts01_and_checks_nothing_else() {
    let report = run(&config(Some("no-streams"), "5"));
    for era in Era::BOTH {
        let got = era_report(&report, era);
        for result in &got.results {
            let expected_pass = result.check.id == "TS-01";
            match &result.outcome {
                Outcome::Pass => assert!(expected_pass, "{}", got.render()),
                Outcome::Skip(_) | Outcome::Info(_) => assert!(!expected_pass, "{}", got.render()),
                Outcome::Fail(_) => panic!("{}", got.render()),
            }
        }
    }
}

#[test]
fn every_check_can_fail() {
    // TS-01 passes by answering -32601, which a server that supports streams cannot be caught
    // failing; every other check is failed (or warned) by some fault.
    let caught: BTreeSet<&str> = FAULTS
        .iter()
        .flat_map(|row| row.both.iter().chain(row.modern).chain(row.warned))
        .copied()
        .collect();
    let judged = CHECKS
        .iter()
        .filter(|check| check.level != Level::May && check.id != "TS-01")
        .map(|check| check.id);
    let never: Vec<&str> = judged.filter(|id| !caught.contains(id)).collect();
    assert_eq!(never, Vec::<&str>::new(), "checks no fault breaks");
    for id in &caught {
        assert!(
            CHECKS.iter().any(|check| check.id == *id),
            "{id} is no check"
        );
    }
}

#[test]
fn every_fault_of_the_server_is_in_the_table_and_tested() {
    let output = Command::new(FAULTY_SERVER)
        .arg("--list-faults")
        .output()
        .unwrap();
    let listed: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    let sorted = |names: Vec<String>| -> Vec<String> {
        let mut names = names;
        names.sort_unstable();
        names
    };
    let table = sorted(FAULTS.iter().map(|row| row.fault.to_owned()).collect());
    assert_eq!(sorted(listed), table);
    let tested = sorted(TESTED.iter().map(|fault| (*fault).to_owned()).collect());
    assert_eq!(tested, table);
}

#[test]
fn without_the_checkpoint_command_or_its_advertisement_the_cp_checks_are_skipped_and_say_why() {
    let mut config = config(None, "5");
    config.checkpoint_command = None;
    let report = run(&config);
    // A twin without --retain-from-checkpoint does not advertise it.
    let mut unadvertised = crate::config(None, "5");
    unadvertised.checkpoint_command = Some(crate::server(None, &[]));
    let unadvertised = run(&unadvertised);
    for era in Era::BOTH {
        for (report, says) in [
            (&report, "--checkpoint-cmd"),
            (&unadvertised, "does not advertise"),
        ] {
            let got = era_report(report, era);
            for id in ["CP-01", "CP-03", "CP-04"] {
                match got.outcome(id) {
                    Some(Outcome::Skip(why)) => {
                        assert!(why.contains(says), "{id}: {why}\n{}", got.render())
                    }
                    other => panic!("{id} is {other:?}\n{}", got.render()),
                }
            }
            assert_eq!(got.failed(), Vec::<&str>::new(), "{}", got.render());
        }
    }
}
