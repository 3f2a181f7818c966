//! Giving freed heap back to the system.
//!
//! glibc's `malloc` keeps what a burst freed (the read caches of a thousand tasks emitting at
//! once, sled's batches, the buffers of finished requests) in its arenas, where it stays
//! resident: measured with 1 000 tasks × 200 events on a data dir (benches/REPORT.md, run L),
//! about 100 MiB of free chunks beside 60 MiB in use once every task had finished. Only
//! `malloc_trim` returns the free pages in the middle of an arena. The sweep thread ticks a
//! [`HeapTrimmer`] once a second; it trims only when [`TRIM_ABOVE`] more bytes are free than
//! at its last trim, so a steady server pays one `mallinfo2` a second and nothing else.
//!
//! Elsewhere than Linux with glibc (musl, macOS) both are no-ops.

/// New free bytes in the allocator's arenas (since the last trim) above which [`HeapTrimmer::tick`]
/// trims.
pub(crate) const TRIM_ABOVE: usize = 8 << 20;

/// What one [`HeapTrimmer::tick`] saw and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tick {
    /// Free bytes in the arenas (resident or not: a trim returns pages, the chunks stay free).
    pub(crate) free: usize,
    /// Whether `malloc_trim` ran.
    pub(crate) trimmed: bool,
}

/// Trims when the arenas hold [`TRIM_ABOVE`] more free bytes than at the last trim (or than
/// the least seen since: free chunks that were used again and freed again count anew).
#[derive(Debug, Default)]
pub(crate) struct HeapTrimmer {
    /// Free bytes left at the last trim, lowered whenever fewer are seen.
    baseline: usize,
}

impl HeapTrimmer {
    /// Looks at the arenas and trims if due. `None` where the allocator cannot say (not glibc).
    pub(crate) fn tick(&mut self) -> Option<Tick> {
        let free = imp::free_bytes()?;
        self.baseline = self.baseline.min(free);
        let trimmed = free > self.baseline.saturating_add(TRIM_ABOVE);
        if trimmed {
            imp::trim();
            self.baseline = free;
        }
        Some(Tick { free, trimmed })
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod imp {
    /// Free bytes in every arena: small free blocks plus ordinary free chunks.
    pub(super) fn free_bytes() -> Option<usize> {
        // SAFETY: `mallinfo2` takes no arguments and only reads the allocator's statistics
        // (under its own locks); it is safe to call from any thread at any time.
        let info = unsafe { libc::mallinfo2() };
        Some(info.fordblks.saturating_add(info.fsmblks))
    }

    /// Returns the free pages of every arena to the system.
    pub(super) fn trim() {
        // SAFETY: `malloc_trim` takes a plain integer (the bytes to leave at the top of the
        // main heap) and only releases pages that hold no allocation; it is thread-safe.
        unsafe { libc::malloc_trim(0) };
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub(super) fn free_bytes() -> Option<usize> {
        None
    }

    pub(super) fn trim() {}
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// This process's resident set, in bytes.
    fn rss() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
        let pages: usize = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        pages * 4096
    }

    #[test]
    fn a_freed_burst_is_given_back_once_and_a_quiet_heap_is_left_alone() {
        let mut trimmer = HeapTrimmer::default();
        let _ = trimmer.tick();
        // A burst of 64 MiB in 1 KiB blocks, every 64th kept so that the freed runs cannot
        // merge into the top of the heap: only a trim can return their pages.
        let mut blocks: Vec<Vec<u8>> = (0..65_536).map(|i| vec![i as u8; 1024]).collect();
        let kept: Vec<Vec<u8>> = blocks.iter_mut().step_by(64).map(std::mem::take).collect();
        drop(blocks);
        let before = rss();
        let first = trimmer.tick();
        let after = rss();
        assert!(
            first.is_some_and(|t| t.trimmed && t.free > TRIM_ABOVE),
            "{first:?}"
        );
        assert!(
            after + (32 << 20) < before,
            "a trim of about 63 MiB of free blocks took RSS from {before} to {after} bytes"
        );
        // Nothing new was freed: the next look does not trim again.
        let second = trimmer.tick();
        assert!(second.is_some_and(|t| !t.trimmed), "{second:?}");
        assert!(kept.iter().enumerate().all(|(k, b)| b[0] == (k * 64) as u8));
    }
}
