//! The verdicts of a run, their counts, the printed form and the exit status.
//!
//! Printed form, per era: a `# ...` heading, then one line per MUST check in table order
//! (`PASS ID check`, `FAIL ID check: what was seen`, `SKIP ID check: why`, where `check` is the
//! check's name in the traceability file, e.g. `PASS EV-04 sep-2694-event-delivered-in-order`),
//! then the SHOULD checks (`PASS ID check (should)`, `WARN ID check: ...`,
//! `SKIP ID check (should): why`), then the MAY ones (`INFO ID check: ...`). After all eras: `should: N met, N warned, N skipped`, then the closing
//! line `N passed, N failed, N skipped`, which counts the MUST checks only.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::catalog::{Check, Id, Level};
use crate::config::Era;
use crate::evidence::{Evidence, Verdict};

/// The verdict of one check in one era.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The rule held wherever it was observed.
    Pass,
    /// The rule was broken; what was seen.
    Fail(String),
    /// The rule could not be observed; why.
    Skip(String),
    /// A MAY: what the server does, judged neither way.
    Info(String),
}

/// One check's outcome.
#[derive(Clone, Debug)]
pub struct CheckResult {
    /// The check.
    pub check: &'static Check,
    /// Its outcome.
    pub outcome: Outcome,
}

/// The outcomes of one era.
#[derive(Clone, Debug)]
pub struct EraReport {
    /// The era.
    pub era: Era,
    /// One result per row of [`crate::CHECKS`], in that order.
    pub results: Vec<CheckResult>,
    /// Set when the server speaks the era but the suite could not get as far as a stream: the
    /// server lacks the surface the suite needs (for instance a tool that makes a task).
    pub setup_error: Option<String>,
    /// Whether the server speaks this era at all.
    pub spoken: bool,
    /// Lines printed before the verdicts: whether each scenario group that needs a particular
    /// server ran, or why not (`RAN long-lived group: ...`, `SKIP long-lived group: ...`).
    pub notes: Vec<String>,
}

/// Totals over all eras.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// MUST checks that passed.
    pub passed: usize,
    /// MUST checks that failed.
    pub failed: usize,
    /// MUST checks that were skipped.
    pub skipped: usize,
    /// SHOULD checks that were met.
    pub should_met: usize,
    /// SHOULD checks that were not (warnings).
    pub should_warned: usize,
    /// SHOULD checks that were skipped.
    pub should_skipped: usize,
}

/// The outcome of a whole run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One report per era checked, in the order they ran.
    pub eras: Vec<EraReport>,
}

impl EraReport {
    pub(crate) fn from_evidence(
        era: Era,
        ev: &Evidence,
        infos: &BTreeMap<Id, String>,
    ) -> EraReport {
        let results = Id::ALL
            .iter()
            .map(|id| {
                let check = id.check();
                let outcome = match (check.level, ev.verdict(*id)) {
                    (Level::May, _) => Outcome::Info(
                        infos
                            .get(id)
                            .cloned()
                            .unwrap_or_else(|| "not observed".to_owned()),
                    ),
                    (_, Verdict::Pass) => Outcome::Pass,
                    (_, Verdict::Fail { first, more: 0 }) => Outcome::Fail(first),
                    (_, Verdict::Fail { first, more }) => {
                        Outcome::Fail(format!("{first} (and {more} more)"))
                    }
                    (_, Verdict::Skip(why)) => Outcome::Skip(why),
                };
                CheckResult { check, outcome }
            })
            .collect();
        EraReport {
            era,
            results,
            setup_error: None,
            spoken: true,
            notes: ev.notes().to_vec(),
        }
    }

    /// An era in which no check could run: every check is skipped with `why`.
    pub(crate) fn unchecked(era: Era, why: String, spoken: bool) -> EraReport {
        let mut ev = Evidence::default();
        for id in Id::ALL {
            ev.skip(id, why.clone());
        }
        let mut report = EraReport::from_evidence(era, &ev, &BTreeMap::new());
        report.spoken = spoken;
        if spoken {
            report.setup_error = Some(why);
        }
        report
    }

    /// The outcome of the check with printed ID `id`.
    pub fn outcome(&self, id: &str) -> Option<&Outcome> {
        self.results
            .iter()
            .find(|r| r.check.id == id)
            .map(|r| &r.outcome)
    }

    /// The IDs of the MUST checks that failed.
    pub fn failed(&self) -> Vec<&'static str> {
        self.with_level_and(Level::Must, |o| matches!(o, Outcome::Fail(_)))
    }

    /// The IDs of the SHOULD checks that were not met.
    pub fn warned(&self) -> Vec<&'static str> {
        self.with_level_and(Level::Should, |o| matches!(o, Outcome::Fail(_)))
    }

    /// The IDs of the checks (of any level) that were skipped.
    pub fn skipped(&self) -> Vec<&'static str> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Skip(_)))
            .map(|r| r.check.id)
            .collect()
    }

    fn with_level_and(&self, level: Level, keep: impl Fn(&Outcome) -> bool) -> Vec<&'static str> {
        self.results
            .iter()
            .filter(|r| r.check.level == level && keep(&r.outcome))
            .map(|r| r.check.id)
            .collect()
    }

    /// The era's section of the printed report.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {} era ({})",
            self.era.name(),
            self.era.protocol_version()
        );
        if let Some(error) = &self.setup_error {
            let _ = writeln!(out, "ERROR {}: {error}", self.era.name());
        }
        for note in &self.notes {
            let _ = writeln!(out, "{}", one_line(note));
        }
        // MUST checks first, then the SHOULD ones (warnings), then what is only reported.
        let by_level = [Level::Must, Level::Should, Level::May]
            .into_iter()
            .flat_map(|level| self.results.iter().filter(move |r| r.check.level == level));
        for result in by_level {
            let id = format!("{} {}", result.check.id, result.check.name);
            let line = match (result.check.level, &result.outcome) {
                (_, Outcome::Info(text)) => format!("INFO {id}: {text}"),
                (Level::Should, Outcome::Pass) => format!("PASS {id} (should)"),
                (Level::Should, Outcome::Fail(seen)) => format!("WARN {id}: {seen}"),
                (Level::Should, Outcome::Skip(why)) => format!("SKIP {id} (should): {why}"),
                (_, Outcome::Pass) => format!("PASS {id}"),
                (_, Outcome::Fail(seen)) => format!("FAIL {id}: {seen}"),
                (_, Outcome::Skip(why)) => format!("SKIP {id}: {why}"),
            };
            let _ = writeln!(out, "{}", one_line(&line));
        }
        out
    }

    fn add_counts(&self, counts: &mut Counts) {
        for result in &self.results {
            match (result.check.level, &result.outcome) {
                (Level::Must, Outcome::Pass) => counts.passed += 1,
                (Level::Must, Outcome::Fail(_)) => counts.failed += 1,
                (Level::Must, Outcome::Skip(_)) => counts.skipped += 1,
                (Level::Should, Outcome::Pass) => counts.should_met += 1,
                (Level::Should, Outcome::Fail(_)) => counts.should_warned += 1,
                (Level::Should, Outcome::Skip(_)) => counts.should_skipped += 1,
                _ => {}
            }
        }
    }
}

impl Report {
    /// The report of `era`, if it ran.
    pub fn era(&self, era: Era) -> Option<&EraReport> {
        self.eras.iter().find(|r| r.era == era)
    }

    /// Totals over every era.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for era in &self.eras {
            era.add_counts(&mut counts);
        }
        counts
    }

    /// 1 if a MUST check failed; else 2 if no era could be checked, or one that the server
    /// speaks could not be set up; else 0.
    pub fn exit_code(&self) -> i32 {
        if self.counts().failed > 0 {
            1
        } else if self.eras.iter().all(|era| !era.spoken)
            || self.eras.iter().any(|era| era.setup_error.is_some())
        {
            2
        } else {
            0
        }
    }

    /// The closing lines: the SHOULD totals, then `N passed, N failed, N skipped`.
    pub fn render_totals(&self) -> String {
        let c = self.counts();
        format!(
            "should: {} met, {} warned, {} skipped\n{} passed, {} failed, {} skipped\n",
            c.should_met, c.should_warned, c.should_skipped, c.passed, c.failed, c.skipped
        )
    }

    /// The whole printed report.
    pub fn render(&self) -> String {
        let mut out: String = self.eras.iter().map(EraReport::render).collect();
        out.push_str(&self.render_totals());
        out
    }
}

/// Keeps a report line on one line whatever the server's messages contain.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_with(fail: Option<Id>) -> Report {
        let mut ev = Evidence::default();
        for id in Id::ALL {
            ev.pass(id);
        }
        if let Some(id) = fail {
            ev.fail(id, "seen\nover two lines");
        }
        Report {
            eras: vec![EraReport::from_evidence(Era::Modern, &ev, &BTreeMap::new())],
        }
    }

    #[test]
    fn closing_line_counts_must_checks_only() {
        let report = report_with(Some(Id::Ev03));
        let text = report.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"# modern era (2026-07-28)"));
        // Each line names the check beside its ID, as the traceability file does.
        assert!(lines.contains(&"FAIL EV-03 sep-2694-event-seq-contiguous: seen over two lines"));
        assert!(lines.contains(&"PASS EV-04 sep-2694-event-delivered-in-order"));
        assert!(lines.contains(&"PASS SE-07 sep-2694-concurrent-stream-limit (should)"));
        assert!(lines.contains(&"INFO TS-02 sep-2694-event-streams-capability: not observed"));
        assert_eq!(lines.last(), Some(&"36 passed, 1 failed, 0 skipped"));
        assert_eq!(report.exit_code(), 1);
        assert_eq!(report.eras[0].failed(), ["EV-03"]);
    }

    #[test]
    fn a_failed_should_is_a_warning() {
        let report = report_with(Some(Id::Rl01));
        let text = report.render();
        assert!(text
            .contains("WARN RL-01 sep-2694-status-events-match-tasks-get: seen over two lines\n"));
        assert!(
            text.ends_with("should: 2 met, 1 warned, 0 skipped\n37 passed, 0 failed, 0 skipped\n")
        );
        assert_eq!(report.exit_code(), 0);
        assert_eq!(report.eras[0].warned(), ["RL-01"]);
    }

    #[test]
    fn unspoken_eras_skip_everything_and_exit_2() {
        let report = Report {
            eras: vec![EraReport::unchecked(Era::Legacy, "no".to_owned(), false)],
        };
        assert_eq!(report.counts().skipped, 37);
        assert_eq!(report.exit_code(), 2);
    }
}
