//! `sep-2694.yaml` covers every requirement ID of the SEP-2694 checklist, in the format of the
//! MCP conformance repository's SEP files (`check` + `text` rows, then `text` + `excluded` rows;
//! MAY sentences have no row), and agrees with the suite's own table of checks.

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

/// One `requirements` row: its ID and keyword (from the comment above it) and its fields,
/// unquoted, in file order.
#[derive(Debug, Default)]
struct Row {
    id: String,
    keyword: String,
    keys: Vec<String>,
    fields: BTreeMap<String, String>,
}

/// The file, read as the conformance repository writes it: rows start at `  - `, their fields
/// are the `key: value` lines under them; the comment line `  # ID · keyword` names the row
/// that follows; `  # ID · keyword · no row: why` lists a requirement without a row.
struct Traced {
    rows: Vec<Row>,
    no_row: BTreeMap<String, String>,
}

fn parse(text: &str) -> Traced {
    let mut rows: Vec<Row> = Vec::new();
    let mut no_row = BTreeMap::new();
    let mut pending: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("  # ") {
            let parts: Vec<&str> = comment.split(" · ").collect();
            let is_id = parts.first().is_some_and(|id| CHECKLIST.contains(id));
            match parts.as_slice() {
                [id, keyword, rest] if is_id && rest.starts_with("no row: ") => {
                    no_row.insert((*id).to_owned(), (*keyword).to_owned());
                }
                [id, keyword] if is_id => pending = Some(((*id).to_owned(), (*keyword).to_owned())),
                _ => {}
            }
            continue;
        }
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
            let (id, keyword) = pending.take().unwrap_or_default();
            rows.push(Row {
                id,
                keyword,
                ..Row::default()
            });
        }
        let value = value.trim();
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .unwrap_or(value);
        if let Some(row) = rows.last_mut() {
            row.keys.push(key.to_owned());
            row.fields.insert(key.to_owned(), value.replace("''", "'"));
        }
    }
    Traced { rows, no_row }
}

fn traced() -> Traced {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/sep-2694.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("\nsep: 2694\n"));
    assert!(text.contains(
        "\nspec_url: https://github.com/modelcontextprotocol/modelcontextprotocol/pull/2694\n"
    ));
    assert!(text.contains("\nrequirements:\n"));
    parse(&text)
}

#[test]
fn every_checklist_id_has_one_row_in_the_conformance_repository_format_or_none_as_a_may() {
    let t = traced();
    let mut ids: Vec<&str> = t.rows.iter().map(|r| r.id.as_str()).collect();
    ids.extend(t.no_row.keys().map(String::as_str));
    ids.sort_unstable();
    let mut want = CHECKLIST.to_vec();
    want.sort_unstable();
    assert_eq!(ids, want, "each ID once: a row, or listed without one");
    let mut excluded_seen = false;
    for row in &t.rows {
        let id = &row.id;
        assert!(!id.is_empty(), "a row without an ID comment: {row:?}");
        // check rows: `check` first, then `text`; excluded rows: `text`, then `excluded`.
        let shape: Vec<&str> = row.keys.iter().map(String::as_str).collect();
        match shape.as_slice() {
            ["check", "text"] => {
                assert!(!excluded_seen, "{id}: a check row after the excluded ones")
            }
            ["text", "excluded"] => excluded_seen = true,
            other => panic!("{id}: fields {other:?}, not check+text or text+excluded"),
        }
        assert!(
            row.fields.values().all(|v| !v.is_empty()),
            "{id}: an empty field"
        );
        assert!(
            !matches!(row.keyword.as_str(), "MAY" | "guidance"),
            "{id}: a {} has no row in the conformance repository's format",
            row.keyword
        );
    }
    for (id, keyword) in &t.no_row {
        assert!(
            matches!(keyword.as_str(), "MAY" | "guidance"),
            "{id} is a {keyword}"
        );
    }
}

#[test]
fn rows_with_a_check_name_the_suites_check_and_its_level() {
    let t = traced();
    for row in &t.rows {
        let Some(name) = row.fields.get("check") else {
            continue;
        };
        let id = row.id.as_str();
        let check = check(id).unwrap_or_else(|| panic!("{id} is traced to {name}, not a check"));
        assert_eq!(name, check.name, "{id}");
        let level = match row.keyword.as_str() {
            "SHOULD" => Level::Should,
            _ => Level::Must,
        };
        assert_eq!(level, check.level, "{id} is a {}", row.keyword);
    }
    for check in &CHECKS {
        if check.id.starts_with("CP-") {
            // taskstream's checkpoint rules are its own, not SEP-2694's: not in the SEP's file.
            assert!(
                t.rows.iter().all(|row| row.id != check.id),
                "{} is taskstream's rule, not SEP-2694's",
                check.id
            );
            continue;
        }
        let traced_as = t
            .rows
            .iter()
            .find(|row| row.id == check.id)
            .and_then(|row| row.fields.get("check"));
        match check.level {
            // A MAY has no row; it is listed with the check that reports it.
            Level::May => assert!(
                t.no_row.contains_key(check.id),
                "{} is not listed",
                check.id
            ),
            _ => assert_eq!(
                traced_as,
                Some(&check.name.to_owned()),
                "{} is checked but not traced",
                check.id
            ),
        }
    }
}
