//! The replay engine driven by arbitrary operation sequences against the reference model: the
//! same checker as the property test (`core/tests/model/check.rs`): no skip, no reorder,
//! `events_gone` exactly when the model says, with the model's `earliestSeq`.
#![no_main]

#[path = "../../core/tests/model/check.rs"]
#[allow(dead_code)]
mod check;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (ops, max_events) = check::ops_from_bytes(data);
    if let Err(divergence) = check::run(&ops, max_events) {
        panic!("core diverged from the model: {divergence}\nops: {ops:?}");
    }
});
