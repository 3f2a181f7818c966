//! The demo's timeline output: step headers, timestamped lines, and on a terminal a live
//! bottom line (progress bar plus the text that is growing). When the output is not a
//! terminal there is no live line and no escape sequence, only plain lines.
//!
//! Everything shown from an event payload goes through [`clean`] first: payloads are untrusted
//! (SE-06), and a control character in one must not drive the terminal.

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Where the timeline goes and how it looks.
pub(crate) struct Ui {
    out: Box<dyn Write>,
    tty: bool,
    start: Instant,
    live_shown: bool,
    width: usize,
}

impl Ui {
    /// The timeline on stdout, or on stderr when stdout carries the JSON report.
    pub(crate) fn new(to_stderr: bool) -> Ui {
        let (out, tty): (Box<dyn Write>, bool) = if to_stderr {
            (Box::new(std::io::stderr()), std::io::stderr().is_terminal())
        } else {
            (Box::new(std::io::stdout()), std::io::stdout().is_terminal())
        };
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse::<usize>().ok())
            .filter(|&w| w >= 40)
            .unwrap_or(100);
        Ui {
            out,
            tty,
            start: Instant::now(),
            live_shown: false,
            width,
        }
    }

    /// Whether the output is a terminal (live line, colours).
    pub(crate) fn is_tty(&self) -> bool {
        self.tty
    }

    /// Seconds since the demo started.
    pub(crate) fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn write_raw(&mut self, s: &str) {
        // A closed stdout (`| head`) must not abort the demo's checks.
        let _ = self.out.write_all(s.as_bytes());
        let _ = self.out.flush();
    }

    fn clear_live(&mut self) {
        if self.live_shown {
            self.write_raw("\r\x1b[2K");
            self.live_shown = false;
        }
    }

    /// A step header.
    pub(crate) fn step(&mut self, n: usize, title: &str) {
        self.clear_live();
        let t = self.elapsed();
        let header = if self.tty {
            format!("\n\x1b[1m[{t:6.2}s] ── step {n}: {title}\x1b[0m\n")
        } else {
            format!("\n[{t:6.2}s] -- step {n}: {title}\n")
        };
        self.write_raw(&header);
    }

    /// A timeline line (indented, with the time).
    pub(crate) fn line(&mut self, text: &str) {
        self.clear_live();
        let t = self.elapsed();
        let line = format!("[{t:6.2}s]   {text}\n");
        self.write_raw(&line);
    }

    /// A line without the time (tables, notes).
    pub(crate) fn raw_line(&mut self, text: &str) {
        self.clear_live();
        let line = format!("{text}\n");
        self.write_raw(&line);
    }

    /// A highlighted outcome line: green/red on a terminal, `ok:`/`FAIL:` otherwise.
    pub(crate) fn outcome(&mut self, good: bool, text: &str) {
        let mark = match (self.tty, good) {
            (true, true) => "\x1b[32m✔\x1b[0m",
            (true, false) => "\x1b[31m✘\x1b[0m",
            (false, true) => "ok:",
            (false, false) => "FAIL:",
        };
        self.line(&format!("{mark} {text}"));
    }

    /// The live bottom line (terminal only): a progress bar and a tail of what is happening.
    pub(crate) fn live(&mut self, done: u64, total: Option<u64>, tail: &str) {
        if !self.tty {
            return;
        }
        let bar_width = 24usize;
        let (bar, count) = match total {
            Some(total) if total > 0 => {
                let filled = usize::try_from(done.min(total) * bar_width as u64 / total)
                    .unwrap_or(bar_width);
                let pct = done.min(total) * 100 / total;
                (
                    format!(
                        "{}{}",
                        "█".repeat(filled),
                        "░".repeat(bar_width.saturating_sub(filled))
                    ),
                    format!("{pct:3}% {done}/{total}"),
                )
            }
            _ => ("░".repeat(bar_width), format!("{done}")),
        };
        let room = self.width.saturating_sub(bar_width + count.len() + 8);
        let tail = fit(tail, room);
        let line = format!("\r\x1b[2K  ▕{bar}▏ {count}  {tail}");
        self.write_raw(&line);
        self.live_shown = true;
    }

    /// Ends the live line, if any.
    pub(crate) fn end_live(&mut self) {
        self.clear_live();
    }
}

/// `text` with every control character replaced (newlines and tabs by a space), so that an
/// untrusted payload cannot move the cursor, change colours or fake lines (SE-06).
pub(crate) fn clean(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' | '\r' => ' ',
            c if c.is_control() => '\u{fffd}',
            // Bidirectional overrides can reorder what a reader sees.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// The last `width` characters of `text` (cleaned), with a leading `…` when cut.
pub(crate) fn fit_tail(text: &str, width: usize) -> String {
    let cleaned = clean(text);
    let count = cleaned.chars().count();
    if count <= width {
        return cleaned;
    }
    let skip = count - width.saturating_sub(1);
    let mut out = String::from("…");
    out.extend(cleaned.chars().skip(skip));
    out
}

/// The first `width` characters of `text` (cleaned), with a trailing `…` when cut.
pub(crate) fn fit(text: &str, width: usize) -> String {
    let cleaned = clean(text);
    if cleaned.chars().count() <= width {
        return cleaned;
    }
    let mut out: String = cleaned.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_removes_terminal_control() {
        assert_eq!(clean("a\x1b[31mred\nb"), "a\u{fffd}[31mred b");
        assert_eq!(clean("x\u{202e}y"), "x\u{fffd}y");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit_tail("abcdef", 4), "…def");
        assert_eq!(fit("abc", 4), "abc");
    }
}
