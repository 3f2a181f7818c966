//! `docs/specification/requirements.md` defines every requirement ID the repository cites, and
//! every repository file the repository cites exists: a newcomer on a fresh clone can look up
//! each `EV-03`, `A-03` or `MCP-DIGEST a.2`, and follow each path to a file.
//!
//! Scanned: every source, script and documentation file of the workspace (not build output,
//! installed packages or fuzz inputs). Cited IDs: `TS-`, `EV-`, `NT-`, `RS-`, `EG-`, `RT-`,
//! `RL-`, `SE-`, `DX-`, `HX-`, `CP-` followed by two digits (and `a`/`b` for RS-03's branches), `A-` with two
//! digits, `OQ-` with one, and `MCP-DIGEST a.N` / `b.N`. Cited files: a `` `path` `` in
//! backticks that starts with a top-level directory of the repository, a backticked root file
//! name ending `.md` or `.toml`, and the target of a relative Markdown link.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

const REQUIREMENTS: &str = "docs/specification/requirements.md";

/// This file: its examples cite on purpose.
const SELF: &str = "tests/tests/suite/requirements.rs";

/// Files a script writes and the repository does not commit, cited as where output goes.
const GENERATED: &[&str] = &["benches/compare-last.txt"];

/// Trace content: the fictional repositories the bundled traces work on, whose file names
/// are data, not citations.
const FICTION: &[&str] = &["data/fixtures/", "data/scenarios/", "data/traces/"];

/// Directories never scanned: build output, installed packages, fuzz inputs and outputs. Every
/// Python virtual environment (`.venv` or `.venv-<name>`) is skipped by its prefix.
const SKIPPED_DIRS: &[&str] = &[
    "target",
    "node_modules",
    ".git",
    "corpus",
    "artifacts",
    "coverage",
    "__pycache__",
];

/// Extensions of the files scanned (and files without one, such as `scripts/test`).
const SCANNED: &[&str] = &["rs", "md", "yaml", "toml", "json", "mjs", "py", "sh", "txt"];

/// The top-level directories a cited path may start with.
const TOP: &[&str] = &[
    "core/",
    "std-host/",
    "tests/",
    "docs/",
    "fuzz/",
    "scripts/",
    "benches/",
    "data/",
    "examples/",
    ".ci/",
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) && !name.starts_with(".venv") {
                files(&path, out);
            }
            continue;
        }
        let scanned = match path.extension().and_then(|e| e.to_str()) {
            Some(ext) => SCANNED.contains(&ext) && !name.ends_with(".lock"),
            None => !name.starts_with('.') && !name.starts_with("LICENSE"),
        };
        if scanned && !name.ends_with("package-lock.json") {
            out.push(path);
        }
    }
}

/// The IDs in the first column of the requirement file's tables.
fn defined() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(REQUIREMENTS)).unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("| "))
        .filter_map(|rest| rest.split(" |").next())
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty() && id != "ID" && id != "section" && !id.starts_with("---"))
        .collect()
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every requirement ID cited in `text`.
fn cited_ids(text: &str) -> Vec<String> {
    const FAMILIES: &[&str] = &[
        "TS", "EV", "NT", "RS", "EG", "RT", "RL", "SE", "DX", "HX", "CP", "OQ", "A",
    ];
    let b = text.as_bytes();
    let mut ids = Vec::new();
    for (i, _) in text.match_indices('-') {
        for family in FAMILIES {
            let Some(start) = i.checked_sub(family.len()) else {
                continue;
            };
            if b.get(start..i) != Some(family.as_bytes()) {
                continue;
            }
            if start > 0 && b.get(start - 1).copied().is_some_and(is_word) {
                continue;
            }
            let digits = if *family == "OQ" { 1 } else { 2 };
            let Some(number) = b.get(i + 1..i + 1 + digits) else {
                continue;
            };
            if !number.iter().all(u8::is_ascii_digit) {
                continue;
            }
            let mut end = i + 1 + digits;
            if *family == "RS" && matches!(b.get(end), Some(b'a' | b'b')) {
                end += 1;
            }
            if b.get(end).copied().is_some_and(is_word) {
                continue;
            }
            ids.push(text[start..end].to_owned());
        }
    }
    ids
}

/// Every `MCP-DIGEST` citation in `text`: the section it names (`a.2`), or, for one that
/// names none (`MCP-DIGEST (c)`, `MCP-DIGEST.md`), what follows it, which no section matches.
fn cited_sections(text: &str) -> Vec<String> {
    let mut sections = Vec::new();
    for (i, _) in text.match_indices("MCP-DIGEST") {
        let rest = &text[i + "MCP-DIGEST".len()..];
        let named = rest.strip_prefix(' ').map(|rest| {
            let section: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .collect();
            section.trim_end_matches('.').to_owned()
        });
        match named {
            Some(section) if section.len() >= 3 && section.as_bytes().get(1) == Some(&b'.') => {
                sections.push(section);
            }
            // `MCP-DIGEST A-05`: a decision, whose ID `cited_ids` checks.
            Some(section) if section.starts_with("A") && !cited_ids(&rest[1..]).is_empty() => {}
            _ => sections.push(format!(
                "(no section: {:?})",
                rest.chars().take(6).collect::<String>()
            )),
        }
    }
    sections
}

/// Every repository path cited in `text`: backticked paths and relative Markdown links.
fn cited_paths(text: &str, markdown: bool) -> Vec<(String, bool)> {
    let mut paths = Vec::new();
    let mut parts = text.split('`');
    parts.next();
    while let Some(inside) = parts.next() {
        parts.next();
        let token = inside.trim();
        let token = token.split(['#', ':']).next().unwrap_or_default();
        let odd = token.is_empty()
            || token.contains(|c: char| c.is_whitespace() || "<>*{}…$|,()[]".contains(c))
            || token.contains("NNNN")
            || token.contains("..");
        if odd {
            continue;
        }
        let rooted = TOP.iter().any(|top| token.starts_with(top));
        let root_file =
            !token.contains('/') && (token.ends_with(".md") || token.ends_with(".toml"));
        if rooted || root_file {
            paths.push((token.to_owned(), false));
        }
    }
    if markdown {
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or_default();
            let external = target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.contains(char::is_whitespace);
            if !external {
                paths.push((target.to_owned(), true));
            }
        }
    }
    paths
}

/// Whether a cited path is one the root `.gitignore` names (a build or install output such as
/// `fuzz/target/`): the scripts make it, so a fresh clone does not have it, and whether this
/// checkout happens to have it says nothing.
fn generated(cited: &str, root: &Path) -> bool {
    let cited = cited.trim_start_matches('/').trim_end_matches('/');
    std::fs::read_to_string(root.join(".gitignore"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().trim_start_matches('/').trim_end_matches('/'))
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains('*'))
        .any(|l| cited == l || cited.starts_with(&format!("{l}/")))
}

/// Whether a cited path names a file or directory: from the root, from the citing file's
/// directory, or from its package (the nearest directory with a `Cargo.toml` or
/// `package.json`); a bare root file name may also be any file of that name.
fn exists(cited: &str, relative_link: bool, from: &Path, all: &[PathBuf]) -> bool {
    let root = root();
    if generated(cited, &root) {
        return true;
    }
    let dir = from.parent().unwrap_or(&root);
    if relative_link {
        return dir.join(cited).exists();
    }
    if root.join(cited).exists() || dir.join(cited).exists() {
        return true;
    }
    let mut package = dir;
    while package.starts_with(&root) {
        if (package.join("Cargo.toml").exists() || package.join("package.json").exists())
            && package.join(cited).exists()
        {
            return true;
        }
        match package.parent() {
            Some(parent) => package = parent,
            None => break,
        }
    }
    !cited.contains('/')
        && all
            .iter()
            .any(|f| f.file_name().and_then(|n| n.to_str()) == Some(cited))
}

#[test]
fn every_cited_id_is_defined_and_every_cited_file_exists() {
    let root = root();
    let ids = defined();
    for must in [
        "EV-03", "RS-03a", "RS-07", "DX-07", "A-03", "A-10", "OQ-4", "a.2", "b.4",
    ] {
        assert!(ids.contains(must), "{REQUIREMENTS} does not define {must}");
    }
    let mut all = Vec::new();
    files(&root, &mut all);
    assert!(
        all.len() > 50,
        "only {} files found under {root:?}",
        all.len()
    );
    let mut problems = BTreeSet::new();
    for file in &all {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        if shown == REQUIREMENTS || shown == SELF {
            continue;
        }
        for id in cited_ids(&text) {
            if !ids.contains(&id) {
                problems.insert(format!(
                    "{shown} cites {id}, which {REQUIREMENTS} does not define"
                ));
            }
        }
        for section in cited_sections(&text) {
            if !ids.contains(&section) {
                problems.insert(format!(
                    "{shown} cites MCP-DIGEST {section}, which {REQUIREMENTS} does not define"
                ));
            }
        }
        let markdown = shown.ends_with(".md");
        if FICTION.iter().any(|dir| shown.starts_with(dir)) {
            continue;
        }
        for (path, link) in cited_paths(&text, markdown) {
            if !GENERATED.contains(&path.as_str()) && !exists(&path, link, file, &all) {
                problems.insert(format!("{shown} cites {path}, which does not exist"));
            }
        }
    }
    // The requirement file's own links.
    let own = root.join(REQUIREMENTS);
    let text = std::fs::read_to_string(&own).unwrap();
    for (path, link) in cited_paths(&text, true) {
        if !exists(&path, link, &own, &all) {
            problems.insert(format!("{REQUIREMENTS} cites {path}, which does not exist"));
        }
    }
    let problems: Vec<String> = problems.into_iter().collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_what_it_must() {
    assert_eq!(
        cited_ids("EV-03, [RS-03a], (A-03) OQ-4; not UTF-8, SHA-256, XEV-03, EV-034"),
        vec!["EV-03", "RS-03a", "A-03", "OQ-4"]
    );
    assert_eq!(
        cited_sections("MCP-DIGEST a.2; MCP-DIGEST b.3. MCP-DIGEST A-05 MCP-DIGEST.md"),
        vec!["a.2", "b.3", "(no section: \".md\")"]
    );
    assert_eq!(
        cited_paths(
            "`core/src/lib.rs` `no-such-file.toml` `wal/<lsn>.wal` `x`",
            false
        ),
        vec![
            ("core/src/lib.rs".to_owned(), false),
            ("no-such-file.toml".to_owned(), false)
        ]
    );
    assert_eq!(
        cited_paths("[a](../x.md#y) [b](https://e.org) [c](#z)", true),
        vec![("../x.md".to_owned(), true)]
    );
    let root = root();
    let mut all = Vec::new();
    files(&root, &mut all);
    let from = root.join("docs/guide.md");
    assert!(exists("ARCHITECTURE.md", false, &from, &all));
    assert!(!exists("no-such-file.toml", false, &from, &all));
    assert!(exists("specification/tasks-stream.md", true, &from, &all));
}
