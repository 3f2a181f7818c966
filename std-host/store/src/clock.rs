//! The host's one wall clock: [`now`] turns `SystemTime` into the core's [`Millis`] (ms since
//! the Unix epoch), and [`iso8601`] renders such a time for the wire (`createdAt`,
//! `lastUpdatedAt`). Nothing else in the host reads the system clock for protocol purposes;
//! waiting (sleeps, timeouts) uses `Instant`/`Duration` where it is local to a thread.

use std::time::{SystemTime, UNIX_EPOCH};

use taskstream_core::Millis;

/// The current wall-clock time in ms since the Unix epoch. A clock set before 1970 reads as 0.
#[must_use]
pub fn now() -> Millis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    Millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// `at` (ms since the Unix epoch) as an RFC 3339 / ISO-8601 UTC timestamp with milliseconds,
/// e.g. `2026-07-28T12:00:00.000Z`. Times past year 9999 are clamped to it.
#[must_use]
pub fn iso8601(at: Millis) -> String {
    // 253402300799999 ms is 9999-12-31T23:59:59.999Z.
    let ms = at.0.min(253_402_300_799_999);
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's `civil_from_days` for days since 1970-01-01 (non-negative only).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(ms: u64, expected: &str) {
        assert_eq!(iso8601(Millis(ms)), expected);
    }

    #[test]
    fn renders_utc_with_milliseconds() {
        check(0, "1970-01-01T00:00:00.000Z");
        check(951_782_400_000, "2000-02-29T00:00:00.000Z");
        check(1_785_240_000_123, "2026-07-28T12:00:00.123Z");
        check(4_107_542_399_999, "2100-02-28T23:59:59.999Z");
        check(u64::MAX, "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn now_is_after_2020() {
        assert!(now() > Millis(1_577_836_800_000));
    }
}
