//! END TO END, SLOW (about 15 s): `taskstream demo --json` on the real binary (an HTTP server
//! that outlives its client's connection, then a kill -9), checking the machine-readable report.
//! Bounded: the demo is killed and the test fails after 180 s.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(180);

#[test]
fn demo_json_report_passes_every_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskstream"))
        .args(["demo", "--json", "--data-dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the demo");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let _ = tx.send(out);
    });
    let timeline = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let Ok(out) = rx.recv_timeout(DEADLINE) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the demo did not finish within {DEADLINE:?}");
    };
    let status = child.wait().expect("wait");
    let timeline = timeline.join().unwrap_or_default();
    let report: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| {
        panic!("stdout is not one JSON report ({e}):\n{out}\n--- timeline:\n{timeline}")
    });
    let checks = report["checks"].as_array().expect("checks");
    let failed: Vec<&Value> = checks.iter().filter(|c| c["pass"] != true).collect();
    assert!(
        failed.is_empty() && report["ok"] == true && status.success(),
        "failed checks {failed:#?}\nexit {status}\n--- timeline:\n{timeline}"
    );
    // Every property the demo promises, by requirement ID.
    let ids: Vec<&str> = checks.iter().filter_map(|c| c["id"].as_str()).collect();
    for id in [
        "TS-02",
        // The long-lived server: a lost connection, a resume while the task runs, a late
        // joiner.
        "A-08",
        "RS-09 (reconnect)",
        "RS-03a",
        "EV-03/RS-11",
        "RS-05/DX-07",
        "RS-08",
        "RS-09",
        "RS-10/RS-11",
        "EV-02/EV-03",
        "NT-01/NT-02",
        "EG-01/RT-04",
        "EG-02 (fail)",
        "EG-02 (recover)",
        "durability",
        "durability/RL-01",
        "TS-08",
        "RT-01",
        "EV-08",
        // Retention from checkpoints: the late joiner starts from the state.
        "CP-03/CP-06",
        "CP-05",
    ] {
        assert!(ids.contains(&id), "no check {id} in {ids:?}");
    }
    let steps = report["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 7);
    assert!(steps
        .iter()
        .all(|s| s["error"].is_null() && s["ms"].is_u64()));
    assert_eq!(report["facts"]["trace"], "agent-delegation");
    // The late joiner replayed and followed live (its count is the first client's).
    assert!(
        report["facts"]["lateJoinerEvents"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{report}"
    );
    // The plain timeline (stderr is not a terminal) has no escape sequences.
    assert!(timeline.contains("VERDICT: PASS"), "{timeline}");
    assert!(
        !timeline.contains('\x1b'),
        "escape sequences in plain output"
    );
}
