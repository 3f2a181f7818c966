//! The black-box conformance suite for SEP-2694 (placeholder until the suite lands).
