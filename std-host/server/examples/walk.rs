//! `walk`: a small MCP server built only on taskstream's public API. Its one tool, `walk`,
//! walks a directory tree and emits an event per file (`com.example.walk.file {path, bytes}`);
//! called as a task, that is a durable, resumable event stream.
//!
//! ```sh
//! cargo run -p taskstream-server --example walk -- --in-memory                 # stdio
//! cargo run -p taskstream-server --example walk -- --data-dir /tmp/walk --http 127.0.0.1:8080
//! ```
//!
//! It takes every option of `taskstream serve` (`--help` lists them).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{json, Map, Value};
use taskstream_server::tool::{TaskContext, Tool, ToolError, ToolResult};
use taskstream_server::ServerBuilder;

fn main() -> ExitCode {
    let walk = Tool::new(
        "walk",
        "Walks a directory tree and emits one event per file",
        json!({
            "type": "object",
            "properties": {
                "dir": { "type": "string", "description": "the directory to walk" },
                "delay_ms": { "type": "integer", "minimum": 0, "maximum": 10000,
                              "description": "pause after each file (default 0)" },
            },
            "required": ["dir"],
            "additionalProperties": false,
        }),
        walk,
    );
    ServerBuilder::new("walk", env!("CARGO_PKG_VERSION"))
        .tool(walk)
        .main()
}

fn walk(ctx: &mut TaskContext<'_>, args: &Map<String, Value>) -> Result<ToolResult, ToolError> {
    let root = PathBuf::from(args.get("dir").and_then(Value::as_str).unwrap_or("."));
    let delay =
        std::time::Duration::from_millis(args.get("delay_ms").and_then(Value::as_u64).unwrap_or(0));
    let mut pending = vec![root.clone()];
    let (mut files, mut bytes) = (0u64, 0u64);
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            ctx.emit(
                "com.example.walk.skipped",
                &json!({ "path": shown(&root, &dir) }),
            )?;
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let size = entry.metadata().map_or(0, |m| m.len());
                ctx.emit(
                    "com.example.walk.file",
                    &json!({ "path": shown(&root, &path), "bytes": size }),
                )?;
                files += 1;
                bytes += size;
                ctx.sleep(delay)?;
            }
        }
    }
    Ok(ToolResult::text(format!("{files} files, {bytes} bytes")))
}

/// `path` relative to the walked directory.
fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
