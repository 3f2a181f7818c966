//! The `taskstream-conformance` command: what it prints and how it exits.

use std::process::{Command, Output};

use crate::server;

const SUITE: &str = env!("CARGO_BIN_EXE_taskstream-conformance");

fn suite(options: &[&str], fault: Option<&str>) -> Output {
    Command::new(SUITE)
        .args(["--timeout-ms", "2000", "--quiet-ms", "100"])
        .args(["--stream-probe", "12"])
        .args(options)
        .arg("--")
        .args(server(fault, &[]))
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn a_failing_server_prints_the_broken_rule_and_exits_1() {
    let output = suite(&["--era", "modern"], Some("skip-seq"));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"# modern era (2026-07-28)"), "{text}");
    let fail = lines.iter().find(|line| line.starts_with("FAIL ")).unwrap();
    assert!(
        fail.starts_with("FAIL EV-03 sep-2694-event-seq-contiguous: "),
        "{text}"
    );
    assert!(
        lines.contains(&"PASS EV-04 sep-2694-event-delivered-in-order"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("SKIP RS-03b sep-2694-")
                && line.contains(": needs --small-retention-cmd")),
        "{text}"
    );
    // 37 MUST checks: EV-03 failed; TS-01, RS-06, three events_gone checks and the three
    // checkpoint checks skipped (RS-07 is judged on every stream, so it passes without the
    // small-retention twin).
    assert_eq!(
        lines.last(),
        Some(&"28 passed, 1 failed, 8 skipped"),
        "{text}"
    );
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_correct_server_exits_0_with_the_small_retention_command() {
    let small = format!("'{}' --max-events 5", crate::FAULTY_SERVER);
    let output = suite(&["--era", "legacy", "--small-retention-cmd", &small], None);
    let text = stdout(&output);
    assert!(text.starts_with("# legacy era (2025-11-25)\n"), "{text}");
    assert!(
        text.contains("\nPASS RS-03b sep-2694-after-dropped-events-gone\n"),
        "{text}"
    );
    assert!(
        text.contains("\nPASS SE-07 sep-2694-concurrent-stream-limit (should)\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "\nSKIP RS-06 sep-2694-no-after-nothing-retained: needs a terminal task with nothing retained: give --aged-retention-cmd"
        ),
        "{text}"
    );
    // TS-01, RS-06, the modern `_meta` rules DX-03 and DX-05, and the checkpoint checks
    // (no --checkpoint-cmd) skipped.
    assert!(
        text.contains(
            "\nSKIP CP-03 taskstream-checkpoint-earliest-retained: needs a server that retains from checkpoints: give --checkpoint-cmd"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("should: 3 met, 0 warned, 0 skipped\n30 passed, 0 failed, 7 skipped\n"),
        "{text}"
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn a_correct_server_exits_0_with_every_twin_command() {
    let small = format!("'{}' --max-events 5", crate::FAULTY_SERVER);
    let aged = format!(
        "'{}' --max-age-ms {}",
        crate::FAULTY_SERVER,
        crate::MAX_AGE_MS
    );
    let checkpoint = format!("'{}' --retain-from-checkpoint", crate::FAULTY_SERVER);
    let options = [
        "--era",
        "legacy",
        "--small-retention-cmd",
        &small,
        "--aged-retention-cmd",
        &aged,
        "--checkpoint-cmd",
        &checkpoint,
    ];
    let output = suite(&options, None);
    let text = stdout(&output);
    assert!(
        text.contains("\nPASS RS-06 sep-2694-no-after-nothing-retained\n"),
        "{text}"
    );
    for check in [
        "CP-01 taskstream-checkpoint-shape",
        "CP-03 taskstream-checkpoint-earliest-retained",
        "CP-04 taskstream-checkpoint-no-silent-gap",
    ] {
        assert!(text.contains(&format!("\nPASS {check}\n")), "{text}");
    }
    // Only TS-01 and the modern `_meta` rules skipped.
    assert!(
        text.ends_with("should: 3 met, 0 warned, 0 skipped\n34 passed, 0 failed, 3 skipped\n"),
        "{text}"
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn usage_errors_exit_2() {
    for args in [&[][..], &["--era", "future", "srv"], &["--nope", "srv"]] {
        let output = Command::new(SUITE).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("Usage:"));
    }
    let help = Command::new(SUITE).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).starts_with("Usage: taskstream-conformance"));
}

#[test]
fn a_command_that_is_no_server_exits_2() {
    let output = Command::new(SUITE)
        .args(["--timeout-ms", "500", "--", "true"])
        .output()
        .unwrap();
    let text = stdout(&output);
    assert!(text.contains("ERROR modern: "), "{text}");
    assert!(text.ends_with("0 passed, 0 failed, 74 skipped\n"), "{text}");
    assert_eq!(output.status.code(), Some(2), "{text}");
}
