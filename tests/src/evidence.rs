//! What the checks of one era have observed, merged into one verdict per requirement ID.
//!
//! Several scenarios may speak to the same ID. A failure anywhere wins over passes (the first
//! failure's message is kept, with a count of the others); a pass wins over a skip; an ID
//! nobody spoke to is skipped.

use std::collections::BTreeMap;

use crate::catalog::Id;

/// One ID's merged verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    Fail { first: String, more: usize },
    Skip(String),
}

/// The verdicts of one era so far.
#[derive(Debug, Default)]
pub(crate) struct Evidence {
    verdicts: BTreeMap<Id, Verdict>,
    notes: Vec<String>,
}

impl Evidence {
    /// A line the report prints before the verdicts (which scenario groups ran, or why not).
    pub(crate) fn note(&mut self, line: String) {
        self.notes.push(line);
    }

    /// The notes, in order.
    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The rule held where it was observed.
    pub(crate) fn pass(&mut self, id: Id) {
        match self.verdicts.get(&id) {
            Some(Verdict::Pass | Verdict::Fail { .. }) => {}
            Some(Verdict::Skip(_)) | None => {
                self.verdicts.insert(id, Verdict::Pass);
            }
        }
    }

    /// The rule was broken; `seen` says how.
    pub(crate) fn fail(&mut self, id: Id, seen: impl Into<String>) {
        match self.verdicts.get_mut(&id) {
            Some(Verdict::Fail { more, .. }) => *more += 1,
            _ => {
                self.verdicts.insert(
                    id,
                    Verdict::Fail {
                        first: seen.into(),
                        more: 0,
                    },
                );
            }
        }
    }

    /// The rule could not be observed here; `why` says why. Kept only if nothing else is known.
    pub(crate) fn skip(&mut self, id: Id, why: impl Into<String>) {
        self.verdicts
            .entry(id)
            .or_insert_with(|| Verdict::Skip(why.into()));
    }

    /// [`Evidence::skip`] for several IDs at once.
    pub(crate) fn skip_all(&mut self, ids: &[Id], why: &str) {
        for id in ids {
            self.skip(*id, why);
        }
    }

    /// Passes `id` when `failure` is `None`, else fails it with the message.
    pub(crate) fn judge(&mut self, id: Id, failure: Option<String>) {
        match failure {
            None => self.pass(id),
            Some(seen) => self.fail(id, seen),
        }
    }

    /// The verdict for `id`, a skip when nothing spoke to it.
    pub(crate) fn verdict(&self, id: Id) -> Verdict {
        self.verdicts
            .get(&id)
            .cloned()
            .unwrap_or_else(|| Verdict::Skip("not exercised".to_owned()))
    }

    /// The printed IDs that failed so far, in report order.
    #[cfg(test)]
    pub(crate) fn failures(&self) -> Vec<String> {
        self.verdicts
            .iter()
            .filter(|(_, verdict)| matches!(verdict, Verdict::Fail { .. }))
            .map(|(id, _)| id.as_str().to_owned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_wins_and_counts() {
        let mut ev = Evidence::default();
        ev.skip(Id::Ev01, "not yet");
        ev.pass(Id::Ev01);
        assert_eq!(ev.verdict(Id::Ev01), Verdict::Pass);
        ev.fail(Id::Ev01, "first");
        ev.pass(Id::Ev01);
        ev.fail(Id::Ev01, "second");
        ev.skip(Id::Ev01, "late");
        assert_eq!(
            ev.verdict(Id::Ev01),
            Verdict::Fail {
                first: "first".to_owned(),
                more: 1
            }
        );
    }

    #[test]
    fn first_skip_reason_is_kept_and_silence_is_a_skip() {
        let mut ev = Evidence::default();
        ev.skip(Id::Rs06, "one");
        ev.skip(Id::Rs06, "two");
        assert_eq!(ev.verdict(Id::Rs06), Verdict::Skip("one".to_owned()));
        assert_eq!(
            ev.verdict(Id::Rs07),
            Verdict::Skip("not exercised".to_owned())
        );
    }
}
