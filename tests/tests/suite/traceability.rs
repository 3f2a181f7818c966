//! `sep-2694.yaml` covers every requirement ID of the SEP-2694 checklist, and agrees with the
//! suite's own table of checks.

use std::collections::BTreeMap;

use taskstream_conformance::{check, Level, CHECKS};

/// The IDs of the SEP-2694 checklist (docs/specification/requirements.md); RS-03 is traced as its two
/// branches.
const CHECKLIST: &[&str] = &[
    "TS-01", "TS-02", "TS-03", "TS-04", "TS-05", "TS-06", "TS-07", "TS-08", //
    "EV-01", "EV-02", "EV-03", "EV-04", "EV-05", "EV-06", "EV-07", "EV-08", //
    "NT-01", "NT-02", "NT-03", "NT-04", //
    "RS-01", "RS-02", "RS-03a", "RS-03b", "RS-04", "RS-05", "RS-06", "RS-07", "RS-08", "RS-09",
    "RS-10", "RS-11", //
    "EG-01", "EG-02", "EG-03", //
    "RT-01", "RT-02", "RT-03", "RT-04", //
    "RL-01", "RL-02", "RL-03", "RL-04", "RL-05", //
    "SE-01", "SE-02", "SE-03", "SE-04", "SE-05", "SE-06", "SE-07", "SE-08", "SE-09", //
    "DX-01", "DX-02", "DX-03", "DX-04", "DX-05", "DX-06", "DX-07",
];

/// One `requirements` row: its fields, unquoted.
#[derive(Debug, Default)]
struct Row {
    fields: BTreeMap<String, String>,
}

/// Reads the rows of the file: a row starts at `  - id: `, and its fields are the `key: value`
/// lines indented under it.
fn rows(text: &str) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for line in text.lines() {
        let (starts_row, rest) = match line.strip_prefix("  - ") {
            Some(rest) => (true, rest),
            None => match line.strip_prefix("    ") {
                Some(rest) if !rest.starts_with(' ') && !rest.starts_with('#') => (false, rest),
                _ => continue,
            },
        };
        let Some((key, value)) = rest.split_once(": ") else {
            continue;
        };
        if starts_row {
            rows.push(Row::default());
        }
        let value = value.trim();
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .unwrap_or(value);
        if let Some(row) = rows.last_mut() {
            row.fields.insert(key.to_owned(), value.replace("''", "'"));
        }
    }
    rows
}

fn traced() -> BTreeMap<String, Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/sep-2694.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("\nsep: 2694\n"));
    assert!(text.contains("\ntitle: Resumable Task Event Streams\n"));
    let mut by_id = BTreeMap::new();
    for row in rows(&text) {
        let id = row.fields.get("id").cloned().unwrap();
        assert!(by_id.insert(id.clone(), row).is_none(), "{id} twice");
    }
    by_id
}

#[test]
fn every_checklist_id_has_one_row_with_a_check_or_a_reason() {
    let traced = traced();
    let ids: Vec<&str> = traced.keys().map(String::as_str).collect();
    let mut want = CHECKLIST.to_vec();
    want.sort_unstable();
    assert_eq!(ids, want);
    for (id, row) in &traced {
        for key in ["keyword", "text"] {
            assert!(
                row.fields.get(key).is_some_and(|v| !v.is_empty()),
                "{id} has no {key}"
            );
        }
        let has_check = row.fields.contains_key("check");
        let has_reason = row.fields.contains_key("not_testable");
        assert!(
            has_check != has_reason,
            "{id}: one of check or not_testable"
        );
    }
}

#[test]
fn rows_with_a_check_name_the_suites_check_and_its_level() {
    let traced = traced();
    for (id, row) in &traced {
        let Some(name) = row.fields.get("check") else {
            continue;
        };
        let check = check(id).unwrap_or_else(|| panic!("{id} is traced to {name}, not a check"));
        assert_eq!(name, check.name, "{id}");
        let keyword = row.fields.get("keyword").map(String::as_str).unwrap_or("");
        let level = match keyword {
            "SHOULD" => Level::Should,
            "MAY" => Level::May,
            _ => Level::Must,
        };
        assert_eq!(level, check.level, "{id} is a {keyword}");
    }
    for check in &CHECKS {
        assert_eq!(
            traced.get(check.id).and_then(|row| row.fields.get("check")),
            Some(&check.name.to_owned()),
            "{} is checked but not traced",
            check.id
        );
    }
}
