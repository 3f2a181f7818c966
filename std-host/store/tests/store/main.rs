//! The `taskstream-store` crate's integration tests, one binary: the store driven through its
//! public API on real data dirs.

#[path = "../../../tests/common/files.rs"]
mod files;
#[path = "../../../tests/common/rng.rs"]
mod rng;

mod durability;
mod recovery;
