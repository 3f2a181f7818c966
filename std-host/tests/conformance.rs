//! The conformance suite (`taskstream-conformance`) against the real `taskstream serve`, in
//! both eras, with the events_gone checks enabled by a small-retention server, RS-06 by a
//! server with a one-second maximum event age and the checkpoint checks by a server started
//! with `--retain-from-checkpoint`: every MUST and SHOULD check that applies passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use taskstream_conformance::{Config, Outcome};

fn serve(extra: &[&str]) -> Vec<String> {
    let mut cmd = vec![
        env!("CARGO_BIN_EXE_taskstream").to_owned(),
        "serve".to_owned(),
        "--in-memory".to_owned(),
        "--durability".to_owned(),
        "none".to_owned(),
    ];
    cmd.extend(extra.iter().map(|s| (*s).to_owned()));
    cmd
}

#[test]
fn taskstream_serve_passes_the_conformance_suite_in_both_eras() {
    let mut config = Config::new(serve(&[]));
    config.small_retention_command = Some(serve(&["--max-events-per-task", "5"]));
    config.aged_retention_command = Some(serve(&["--max-event-age", "1"]));
    config.checkpoint_command = Some(serve(&["--retain-from-checkpoint"]));
    let report = taskstream_conformance::run(&config);
    assert_eq!(report.eras.len(), 2, "both eras ran");
    for era in &report.eras {
        let failed: Vec<_> = era.failed();
        let warned: Vec<_> = era.warned();
        assert!(
            failed.is_empty(),
            "{:?}: MUST checks failed: {failed:?}",
            era.era
        );
        assert!(
            warned.is_empty(),
            "{:?}: SHOULD checks warned: {warned:?}",
            era.era
        );
        // The checks that need the small- and aged-retention servers and the checkpoint server
        // ran, rather than skipped.
        for id in [
            "EG-01", "RS-03b", "RS-06", "RS-07", "RT-04", "TS-05", "TS-08", "EV-03", "CP-01",
            "CP-03", "CP-04",
        ] {
            assert!(
                matches!(era.outcome(id), Some(Outcome::Pass)),
                "{:?}: {id} did not pass: {:?}",
                era.era,
                era.outcome(id)
            );
        }
    }
    assert_eq!(report.exit_code(), 0);
}
