//! Embeds the bundled traces (`data/traces/*.jsonl`, format in `data/README.md`) into the binary
//! so that `run_trace` works from any directory: writes `$OUT_DIR/traces.rs` with one
//! `(name, include_str!(path))` pair per file, sorted by name.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let dir = manifest
        .unwrap_or_default()
        .join("..")
        .join("..")
        .join("data")
        .join("traces");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut traces: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("jsonl"))
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_owned();
            let abs = std::fs::canonicalize(&p).ok()?;
            Some((name, abs))
        })
        .collect();
    traces.sort();
    let mut out = String::from(
        "/// The bundled traces: (name, JSON lines), sorted by name.\n\
         pub(crate) static BUNDLED: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &traces {
        let _ = writeln!(out, "    ({name:?}, include_str!({:?})),", path_str(path));
    }
    out.push_str("];\n");
    let out_dir = std::env::var_os("OUT_DIR")
        .map(PathBuf::from)
        .unwrap_or_default();
    if let Err(e) = std::fs::write(out_dir.join("traces.rs"), out) {
        println!("cargo:warning=cannot write traces.rs: {e}");
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
