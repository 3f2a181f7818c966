//! The agent's one output buffer and a small JSON writer for the results the core does not
//! write (the core writes the stream messages and the errors). A message that does not fit is
//! cut short and reported, never sent half.

/// The largest message the agent writes. The longest it has to write is `tools/list`'s answer,
/// 617 bytes with a 128-byte id; one that does not fit is answered with an internal error.
pub(crate) const OUT_BYTES: usize = 640;

/// A message being written. One type, not one per buffer size: the event payloads the agent
/// makes are written into the same buffer as its messages, before the message that uses it.
pub(crate) struct Out {
    buf: [u8; OUT_BYTES],
    len: usize,
    overflow: bool,
}

impl Out {
    /// An empty buffer (the agent's lives in its zero-initialised static).
    #[cfg(feature = "bench")]
    pub(crate) const fn new() -> Out {
        Out {
            buf: [0; OUT_BYTES],
            len: 0,
            overflow: false,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.overflow = false;
    }

    /// The whole buffer, for the core's writers; [`Out::set_len`] records what they wrote.
    pub(crate) fn buf_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(OUT_BYTES);
        self.overflow = false;
    }

    /// Keeps the first `len - cut` bytes the core's writer put in the buffer (`len` of 0: it
    /// did not fit, and the message is reported as such), to go on writing after them.
    pub(crate) fn set_head(&mut self, len: usize, cut: usize) -> &mut Out {
        self.len = len.saturating_sub(cut);
        self.overflow = len == 0;
        self
    }

    /// The message, unless it did not fit.
    pub(crate) fn message(&self) -> Option<&[u8]> {
        if self.overflow {
            None
        } else {
            self.buf.get(..self.len)
        }
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) -> &mut Out {
        let end = self.len + bytes.len();
        match self.buf.get_mut(self.len..end) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = end;
            }
            None => self.overflow = true,
        }
        self
    }

    pub(crate) fn s(&mut self, text: &str) -> &mut Out {
        self.put(text.as_bytes())
    }

    /// `n` in decimal, by the core's number writer (the one its stream messages use).
    pub(crate) fn u64(&mut self, n: u64) -> &mut Out {
        let written = self
            .buf
            .get_mut(self.len..)
            .map(|rest| taskstream_core::rpc::write_unsigned(n, rest));
        match written {
            Some(Ok(k)) => self.len += k,
            _ => self.overflow = true,
        }
        self
    }

    /// Milliseconds since boot as an ISO-8601 UTC time counted from the Unix epoch (the board
    /// has no real-time clock), e.g. `1970-01-01T00:00:12.345Z`.
    pub(crate) fn time(&mut self, ms: u64) -> &mut Out {
        let (secs, milli) = divmod(ms, 1000);
        // 32-bit seconds reach 136 years of uptime; beyond that the time stays at its last.
        let secs = u32::try_from(secs).unwrap_or(u32::MAX);
        let (minutes, sec) = (secs / 60, secs % 60);
        let (hours, min) = (minutes / 60, minutes % 60);
        let (mut day, hour) = (hours / 24, hours % 24);
        // The calendar, a year and then a month at a time: an uptime is decades at most, and
        // this takes less flash than a closed form.
        let mut year = 1970u32;
        let mut month = 1u32;
        loop {
            let leap =
                year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
            // 31 days in the odd months up to July and the even ones from August, 30 in the
            // others; February's 28 or 29.
            let length = if month == 2 {
                28 + u32::from(leap)
            } else {
                30 + ((month + (month >> 3)) & 1)
            };
            if day < length {
                break;
            }
            day -= length;
            month += 1;
            if month > 12 {
                month = 1;
                year += 1;
            }
        }
        // Each field's digits, written from its last one back to the separator before it.
        let mut text = *b"\"0000-00-00T00:00:00.000Z\"";
        let fields = [
            (4, year),
            (7, month),
            (10, day + 1),
            (13, hour),
            (16, min),
            (19, sec),
            (23, milli),
        ];
        for (last, mut n) in fields {
            let mut i = last;
            while let Some(c) = text.get_mut(i).filter(|c| c.is_ascii_digit()) {
                *c = b'0' + (n % 10) as u8;
                n /= 10;
                i -= 1;
            }
        }
        self.put(&text)
    }
}

/// `(n / d, n % d)` for a divisor below 2^16, with 32-bit divisions only (a 64-bit one is a
/// library routine of about 900 bytes on this core): divide the upper half, then the
/// remainder joined to each 16-bit half of the lower one (every dividend is below `d·2^16`).
pub(crate) const fn divmod(n: u64, d: u32) -> (u64, u32) {
    let hi = (n >> 32) as u32;
    let lo = n as u32;
    let mid = (hi % d) << 16 | lo >> 16;
    let low = (mid % d) << 16 | (lo & 0xffff);
    let q = (((hi / d) as u64) << 32) | (((mid / d) << 16) | (low / d)) as u64;
    (q, low % d)
}
