//! Time as the caller tells it. The core never reads a clock: every operation that depends on
//! time (event age, terminal retention) takes a [`Millis`] from the caller, which keeps the core
//! deterministic and testable in virtual time.

use core::fmt;

/// A point in time, or a duration, in milliseconds on the caller's clock.
///
/// The origin is the caller's choice (Unix epoch on a host, boot on a board); the core only
/// compares and subtracts values from the same clock.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// Zero milliseconds.
    pub const ZERO: Millis = Millis(0);
    /// The largest representable time; as a duration it means "forever".
    pub const MAX: Millis = Millis(u64::MAX);

    /// `self - earlier`, or zero if `earlier` is later (clocks may step backwards).
    #[must_use]
    pub const fn saturating_since(self, earlier: Millis) -> Millis {
        Millis(self.0.saturating_sub(earlier.0))
    }

    /// `self + duration`, saturating at [`Millis::MAX`].
    #[must_use]
    pub const fn saturating_add(self, duration: Millis) -> Millis {
        Millis(self.0.saturating_add(duration.0))
    }

    /// Whole seconds as milliseconds, saturating.
    #[must_use]
    pub const fn from_secs(secs: u64) -> Millis {
        Millis(secs.saturating_mul(1000))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms", self.0)
    }
}
