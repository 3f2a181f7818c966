//! Helpers every part of the suite may use.

pub(crate) mod client;
pub(crate) mod files;
pub(crate) mod rng;
