//! The in-process driver behind the `server` fuzz target and the in-process tests: feeds the
//! lines of an input to a [`Connection`] (in memory, small limits) and checks what comes out.
//!
//! The input is newline-separated lines, fed as they are, except that `$T0` … `$T9` are
//! replaced by the id of the 1st … 10th task the server created so far (so a fuzzer, and the
//! seed corpus, can name real tasks). The checks, against `serde_json` as an independent
//! reader:
//! - every output line is one JSON object: a response (`id` plus exactly one of `result`,
//!   `error`) or a notification (`method`, no `id`), with `"jsonrpc":"2.0"`;
//! - a request (an object whose members are not repeated, `"jsonrpc":"2.0"`, a string
//!   `method`, an integer or short string `id` not used before) is answered exactly once,
//!   before `handle_line` returns, unless it is one of those answered later (`tools/call`,
//!   `tasks/stream`, `tasks/result`); those are answered at most once;
//! - no id is answered more often than lines carrying it were sent;
//! - nothing panics, here or in any server thread (the fuzzer aborts on any panic).
//!
//! Shared by `std-host/tests/hostile` and `fuzz/fuzz_targets/server.rs` (through `#[path]`).

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use taskstream_core::id::MAX_REQUEST_ID_BYTES;
use taskstream_server::config::ServeConfig;
use taskstream_server::Connection;
use taskstream_store::{Durability, Store, StoreConfig};

/// The output, shared with the connection.
#[derive(Clone, Default)]
pub(crate) struct Output(Arc<Mutex<Vec<u8>>>);

impl Write for Output {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Output {
    /// The bytes written after the first `from`.
    fn tail(&self, from: usize) -> Vec<u8> {
        let all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        all.get(from..).unwrap_or_default().to_vec()
    }
}

/// The configuration the driver serves with: small limits, so that inputs reach them.
pub(crate) fn config() -> ServeConfig {
    let mut c = ServeConfig::in_memory();
    c.max_message_bytes = 4096;
    c.max_streams = 4;
    c.max_running_tasks = 8;
    c.max_failed_lookups_per_minute = 20;
    c.durability = Durability::None;
    c.retention.max_events = 64;
    c
}

/// What [`run`] saw.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Every output line, parsed.
    pub(crate) lines: Vec<Value>,
    /// The ids of the tasks created, in order.
    pub(crate) tasks: Vec<String>,
}

/// Feeds `input` to a fresh in-memory server and checks the invariants above.
///
/// # Errors
/// A description of the first broken invariant.
pub(crate) fn run(input: &[u8]) -> Result<Report, String> {
    let config = config();
    let max_line = config.max_message_bytes;
    let store = Store::open(
        StoreConfig {
            data_dir: None,
            durability: config.durability,
            retention: config.retention,
            max_store_bytes: config.max_store_bytes,
            index_cache_bytes: config.index_cache_bytes,
        },
        taskstream_server::clock::now(),
    )
    .map_err(|e| format!("store: {e}"))?;
    let out = Output::default();
    let mut conn = Connection::start(config, Arc::new(store), Box::new(out.clone()))
        .map_err(|e| format!("start: {e}"))?;
    let mut sent: HashMap<Value, usize> = HashMap::new();
    let mut seen = Tracker::default();
    let mut failure = None;
    for raw in input.split(|&b| b == b'\n') {
        let line = substitute(raw, &seen.tasks);
        // A line over the limit is refused whole, with `id: null`.
        let request = as_request(&line).filter(|_| line.len() <= max_line);
        if let Some(id) = carried_id(&line) {
            *sent.entry(id).or_default() += 1;
        }
        let fresh = request
            .as_ref()
            .filter(|(id, _)| sent.get(id).copied() == Some(1));
        seen.update(&out)?;
        let before = fresh.map(|(id, _)| seen.answers(id));
        conn.handle_line(&line);
        seen.update(&out)?;
        if let (Some((id, method)), Some(before)) = (fresh, before) {
            let after = seen.answers(id);
            let deferred = matches!(
                method.as_str(),
                "tools/call" | "tasks/stream" | "tasks/result"
            );
            let ok = if deferred {
                after <= before + 1
            } else {
                after == before + 1
            };
            if !ok && failure.is_none() {
                let shown: String = String::from_utf8_lossy(&line).chars().take(300).collect();
                failure = Some(format!(
                    "request {id} ({method}) answered {} times: {shown}",
                    after - before
                ));
            }
        }
    }
    conn.close();
    if let Some(f) = failure {
        return Err(f);
    }
    seen.update(&out)?;
    for (id, n) in &seen.answered {
        let carried = sent.get(id).copied().unwrap_or(0);
        if *n > carried {
            return Err(format!("id {id} answered {n} times, sent {carried} times"));
        }
    }
    Ok(Report {
        lines: seen.lines,
        tasks: seen.tasks,
    })
}

/// What the output said so far, read incrementally.
#[derive(Default)]
struct Tracker {
    /// Bytes of output already read (whole lines only).
    offset: usize,
    lines: Vec<Value>,
    answered: HashMap<Value, usize>,
    tasks: Vec<String>,
}

impl Tracker {
    /// Reads the complete lines after `offset`, checking each one's shape.
    fn update(&mut self, out: &Output) -> Result<(), String> {
        let new = out.tail(self.offset);
        let Some(end) = new.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        for line in new[..end].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line).map_err(|e| {
                format!(
                    "output is not JSON ({e}): {}",
                    String::from_utf8_lossy(line)
                )
            })?;
            check_shape(&v)?;
            if v.get("method").is_none() {
                if let Some(id) = v.get("id").filter(|id| !id.is_null()) {
                    *self.answered.entry(id.clone()).or_default() += 1;
                }
            }
            let r = &v["result"];
            let task = if r["resultType"] == "task" {
                r["taskId"].as_str()
            } else {
                r["task"]["taskId"].as_str()
            };
            if let Some(t) = task {
                if !self.tasks.iter().any(|k| k == t) {
                    self.tasks.push(t.to_owned());
                }
            }
            self.lines.push(v);
        }
        self.offset += end + 1;
        Ok(())
    }

    fn answers(&self, id: &Value) -> usize {
        self.answered.get(id).copied().unwrap_or(0)
    }
}

/// `$T0` … `$T9` replaced by the task ids created so far (or left as they are).
fn substitute(line: &[u8], tasks: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        if let (Some(b'$'), Some(b'T'), Some(d)) = (line.get(i), line.get(i + 1), line.get(i + 2)) {
            if d.is_ascii_digit() {
                if let Some(t) = tasks.get(usize::from(d - b'0')) {
                    out.extend_from_slice(t.as_bytes());
                    i += 3;
                    continue;
                }
            }
        }
        if let Some(&b) = line.get(i) {
            out.push(b);
        }
        i += 1;
    }
    out
}

/// The `id` member of a line that `serde_json` reads as an object, if it is one JSON-RPC
/// could echo (a string or an integer).
fn carried_id(line: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let id = v.get("id")?;
    (id.is_string() || id.is_i64() || id.is_u64()).then(|| id.clone())
}

/// `(id, method)` of a line that is a valid request to an independent reader.
fn as_request(line: &[u8]) -> Option<(Value, String)> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let obj = v.as_object()?;
    if repeats_a_member(line) {
        return None;
    }
    if obj.get("jsonrpc")? != "2.0" {
        return None;
    }
    let method = obj.get("method")?.as_str()?;
    let id = obj.get("id")?;
    let id_ok = match id {
        Value::String(s) => s.len() <= MAX_REQUEST_ID_BYTES,
        Value::Number(n) => n.is_i64(),
        _ => false,
    };
    if !id_ok || obj.contains_key("result") || obj.contains_key("error") {
        return None;
    }
    if obj
        .get("params")
        .is_some_and(|p| !p.is_object() && !p.is_array())
    {
        return None;
    }
    Some((id.clone(), method.to_owned()))
}

/// Whether the top-level object repeats a member (JSON leaves the meaning open; the server
/// refuses such a line as a whole).
fn repeats_a_member(line: &[u8]) -> bool {
    let Ok(Members(members)) = serde_json::from_slice::<Members>(line) else {
        return false;
    };
    let mut names: Vec<&String> = members.iter().map(|(k, _)| k).collect();
    names.sort();
    names.windows(2).any(|w| w[0] == w[1])
}

/// The member names of an object, repeats kept.
struct Members(Vec<(String, serde::de::IgnoredAny)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    let v: serde::de::IgnoredAny = m.next_value()?;
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// One output message has the JSON-RPC shape.
fn check_shape(v: &Value) -> Result<(), String> {
    let obj: &Map<String, Value> = v.as_object().ok_or_else(|| format!("not an object: {v}"))?;
    if obj.get("jsonrpc") != Some(&Value::from("2.0")) {
        return Err(format!("no jsonrpc 2.0: {v}"));
    }
    match (obj.get("method"), obj.get("id")) {
        (Some(m), None) if m.is_string() && obj.get("params").is_some_and(Value::is_object) => {
            Ok(())
        }
        (None, Some(_)) if obj.contains_key("result") != obj.contains_key("error") => {
            if let Some(e) = obj.get("error") {
                if !e["code"].is_i64() || !e["message"].is_string() {
                    return Err(format!("bad error object: {v}"));
                }
            }
            Ok(())
        }
        _ => Err(format!("neither a response nor a notification: {v}")),
    }
}
