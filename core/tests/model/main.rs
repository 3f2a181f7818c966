//! Model-based property test of the core (see `check.rs`): proptest generates scenarios.

mod check;

use check::{Op, TASKS};
use proptest::prelude::*;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..TASKS, 0usize..40).prop_map(|(task, len)| Op::Append { task, len }),
        1 => (0u64..30).prop_map(|ms| Op::Advance { ms }),
        1 => (0..TASKS).prop_map(|task| Op::Terminate { task }),
        3 => (0..TASKS, proptest::option::of(0u64..40))
            .prop_map(|(task, after)| Op::Open { task, after }),
        1 => (0..TASKS).prop_map(|task| Op::Cancel { task }),
        3 => (0usize..12).prop_map(|steps| Op::Pump { steps }),
        1 => (0u64..80).prop_map(|ms| Op::RacedPump { ms }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn core_matches_the_model(ops in proptest::collection::vec(op(), 1..120), max_events in 1u32..8) {
        check::run(&ops, max_events).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn byte_scenarios_decode_and_pass() {
    // The fuzz target's decoder, on a few fixed inputs, must produce passing scenarios.
    for data in [
        &b""[..],
        b"\x03\x00\x10\x08\x85\x0c\x05\x07\x01\x0c\x09",
        &[7u8; 64],
    ] {
        let (ops, max_events) = check::ops_from_bytes(data);
        assert!(max_events >= 1);
        check::run(&ops, max_events).unwrap();
    }
}
