//! The demo's verdict: every property checked (requirement ID, what was compared, PASS or
//! FAIL), the time each step took, as a table and as a JSON report (`--json`).

use serde_json::{json, Value};

use crate::demo::ui::Ui;

/// One property the demo checked.
#[derive(Clone, Debug)]
pub(crate) struct Check {
    /// The requirement IDs it covers (`docs/specification/requirements.md`, or "durability" for docs/interface.md's
    /// promise).
    pub(crate) id: &'static str,
    /// The property, in words.
    pub(crate) property: String,
    /// Whether it held.
    pub(crate) pass: bool,
    /// What was compared (expected and seen).
    pub(crate) detail: String,
    /// The step it was checked in.
    pub(crate) step: usize,
}

/// One step and how long it took.
#[derive(Clone, Debug)]
pub(crate) struct StepTime {
    pub(crate) n: usize,
    pub(crate) title: String,
    pub(crate) ms: u128,
    /// The error that ended the step early, if any.
    pub(crate) error: Option<String>,
}

/// Everything the demo found.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) checks: Vec<Check>,
    pub(crate) steps: Vec<StepTime>,
    /// Facts worth reporting (task ids, seqs, dirs).
    pub(crate) facts: serde_json::Map<String, Value>,
}

impl Report {
    /// Records a check.
    pub(crate) fn check(
        &mut self,
        ui: &mut Ui,
        step: usize,
        id: &'static str,
        property: impl Into<String>,
        pass: bool,
        detail: impl Into<String>,
    ) {
        let check = Check {
            id,
            property: property.into(),
            pass,
            detail: detail.into(),
            step,
        };
        ui.outcome(
            pass,
            &format!("[{}] {} — {}", check.id, check.property, check.detail),
        );
        self.checks.push(check);
    }

    /// Records a fact for the JSON report.
    pub(crate) fn fact(&mut self, key: &str, value: Value) {
        self.facts.insert(key.to_owned(), value);
    }

    /// Whether every step completed and every check held (and there was at least one).
    pub(crate) fn ok(&self) -> bool {
        !self.checks.is_empty()
            && self.checks.iter().all(|c| c.pass)
            && self.steps.iter().all(|s| s.error.is_none())
    }

    /// The verdict table.
    pub(crate) fn print_table(&self, ui: &mut Ui) {
        ui.raw_line("");
        ui.raw_line("VERDICT");
        let id_w = self
            .checks
            .iter()
            .map(|c| c.id.len())
            .max()
            .unwrap_or(2)
            .max(11);
        let prop_w = self
            .checks
            .iter()
            .map(|c| c.property.chars().count())
            .max()
            .unwrap_or(8)
            .clamp(8, 72);
        ui.raw_line(&format!(
            "  {:<id_w$}  {:<prop_w$}  {:<6}  {:>4}  {:>8}",
            "requirement", "property", "result", "step", "step ms"
        ));
        ui.raw_line(&format!(
            "  {}  {}  {}  {}  {}",
            "-".repeat(id_w),
            "-".repeat(prop_w),
            "-".repeat(6),
            "-".repeat(4),
            "-".repeat(8)
        ));
        for c in &self.checks {
            let ms = self
                .steps
                .iter()
                .find(|s| s.n == c.step)
                .map_or_else(|| "-".to_owned(), |s| s.ms.to_string());
            let result = match (ui.is_tty(), c.pass) {
                (true, true) => "\x1b[32mPASS\x1b[0m  ",
                (true, false) => "\x1b[31mFAIL\x1b[0m  ",
                (false, true) => "PASS  ",
                (false, false) => "FAIL  ",
            };
            let property = crate::demo::ui::fit(&c.property, prop_w);
            ui.raw_line(&format!(
                "  {:<id_w$}  {property:<prop_w$}  {result}  {:>4}  {ms:>8}",
                c.id, c.step
            ));
        }
        ui.raw_line("");
        ui.raw_line("STEPS");
        for s in &self.steps {
            let status = match &s.error {
                None => "done".to_owned(),
                Some(e) => format!("STOPPED: {e}"),
            };
            ui.raw_line(&format!(
                "  {}. {:<52} {:>7} ms  {status}",
                s.n, s.title, s.ms
            ));
        }
        let passed = self.checks.iter().filter(|c| c.pass).count();
        let failed = self.checks.len() - passed;
        let total_ms: u128 = self.steps.iter().map(|s| s.ms).sum();
        ui.raw_line("");
        ui.raw_line(&format!(
            "{} — {passed} checks passed, {failed} failed, {:.1} s",
            if self.ok() {
                "VERDICT: PASS"
            } else {
                "VERDICT: FAIL"
            },
            total_ms as f64 / 1000.0
        ));
    }

    /// The machine-readable report.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "ok": self.ok(),
            "checks": self.checks.iter().map(|c| json!({
                "id": c.id,
                "property": c.property,
                "pass": c.pass,
                "detail": c.detail,
                "step": c.step,
            })).collect::<Vec<_>>(),
            "steps": self.steps.iter().map(|s| json!({
                "step": s.n,
                "title": s.title,
                "ms": u64::try_from(s.ms).unwrap_or(u64::MAX),
                "error": s.error,
            })).collect::<Vec<_>>(),
            "facts": self.facts,
        })
    }
}
