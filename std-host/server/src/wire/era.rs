//! Protocol eras (docs/interface.md "Protocol eras"; MCP-DIGEST a.3, a.4): which era a request is
//! served in, the legacy `initialize` handshake, modern `server/discover`, and how results are
//! dressed for each era.
//!
//! Rules, in order:
//! - An `initialize` selects the legacy era for the life of the process (a second one is
//!   -32600). After it, every request is served as legacy; `_meta` is not inspected.
//! - Before any `initialize`, `ping` is answered `{}` and every other request must carry the
//!   modern `_meta` (DX-05): without `io.modelcontextprotocol/protocolVersion` it gets -32602
//!   (whose message also points at `initialize`), an unknown version -32022, a missing
//!   `clientCapabilities` -32602.
//! - Requests after `initialize` are accepted whether or not `notifications/initialized` has
//!   arrived yet (clients pipeline it); the notification is recorded, nothing more.

use serde_json::{json, Map, Value};

use super::{ServerError, EVENT_STREAMS_EXTENSION, MODERN_VERSION, TASKS_EXTENSION};

/// What a server says of itself in `initialize` and `server/discover`, beyond its tools and
/// Tasks: fixed when the process starts, the same for every connection.
#[derive(Clone)]
pub(crate) struct Identity {
    /// `serverInfo`.
    pub(crate) server_info: Value,
    /// `instructions` (with Tasks, and for a 2025-06-18 session without).
    pub(crate) instructions: (String, String),
    /// Capabilities beyond `tools` and `tasks` (`resources`, `prompts`, `logging`, …).
    pub(crate) capabilities: Map<String, Value>,
}

impl Identity {
    /// `taskstream serve`'s.
    pub(crate) fn builtin() -> Identity {
        Identity {
            server_info: server_info(),
            instructions: (
                INSTRUCTIONS.to_owned(),
                INSTRUCTIONS_WITHOUT_TASKS.to_owned(),
            ),
            capabilities: Map::new(),
        }
    }
}

/// The legacy versions this server negotiates; the last is its latest.
pub(crate) const LEGACY_VERSIONS: [&str; 2] = ["2025-06-18", "2025-11-25"];

/// The era a request is served in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// 2025-06-18 / 2025-11-25 after `initialize`; Tasks as SEP-1686, in 2025-11-25 only.
    Legacy,
    /// 2026-07-28, stateless; Tasks as SEP-2663 when `tasks` (the request declared it).
    Modern {
        /// Whether the request declared the Tasks extension.
        tasks: bool,
    },
}

/// Which Tasks codec answers a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Codec {
    /// SEP-1686.
    Legacy,
    /// SEP-2663.
    Modern,
}

impl Codec {
    /// The codec for a Tasks method in `era`.
    ///
    /// # Errors
    /// -32601 for `tasks/result` and `tasks/list` in a modern request; -32021 for the others
    /// when the request did not declare the extension (DX-03).
    pub(crate) fn for_method(era: Era, method: &str) -> Result<Codec, ServerError> {
        match era {
            Era::Legacy => Ok(Codec::Legacy),
            Era::Modern { .. } if matches!(method, "tasks/result" | "tasks/list") => {
                Err(ServerError::MethodNotFound(method.to_owned()))
            }
            Era::Modern { tasks: true } => Ok(Codec::Modern),
            Era::Modern { tasks: false } => Err(ServerError::MissingTasksExtension),
        }
    }
}

/// The reader thread's view of the connection's handshake.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// The negotiated legacy version, once `initialize` was answered.
    legacy: Option<&'static str>,
    /// Whether `notifications/initialized` arrived.
    initialized: bool,
}

impl Session {
    /// Whether `initialize` has selected the legacy era.
    pub(crate) fn is_legacy(&self) -> bool {
        self.legacy.is_some()
    }

    /// Whether Tasks (and so `tasks/stream`) exist in this session: not after a 2025-06-18
    /// `initialize`, since Tasks first appeared in 2025-11-25.
    pub(crate) fn offers_tasks(&self) -> bool {
        self.legacy != Some(LEGACY_VERSIONS[0])
    }

    /// Records `notifications/initialized`; whether it was the first.
    pub(crate) fn mark_initialized(&mut self) -> bool {
        !std::mem::replace(&mut self.initialized, true)
    }

    /// The era of a request other than `initialize`.
    ///
    /// # Errors
    /// [`ServerError`] when a request in no era is missing or has bad modern `_meta`.
    pub(crate) fn era_of(
        &self,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<Era, ServerError> {
        if self.is_legacy() {
            return Ok(Era::Legacy);
        }
        let meta = params.get("_meta").and_then(Value::as_object);
        let version = meta.and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"));
        match (method, version) {
            ("ping", None) => Ok(Era::Legacy),
            (_, None) => Err(ServerError::InvalidParams(
                "missing _meta[\"io.modelcontextprotocol/protocolVersion\"] (2026-07-28 requests \
                 carry it; a 2025 client sends initialize first)"
                    .into(),
            )),
            (_, Some(v)) if v.as_str() != Some(MODERN_VERSION) => {
                Err(ServerError::UnsupportedVersion {
                    requested: v.clone(),
                })
            }
            (_, Some(_)) => {
                let caps = meta
                    .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
                    .and_then(Value::as_object)
                    .ok_or_else(|| {
                        ServerError::InvalidParams(
                            "missing _meta[\"io.modelcontextprotocol/clientCapabilities\"]".into(),
                        )
                    })?;
                let tasks = caps
                    .get("extensions")
                    .and_then(|e| e.get(TASKS_EXTENSION))
                    .is_some_and(Value::is_object);
                Ok(Era::Modern { tasks })
            }
        }
    }

    /// Answers `initialize` (MCP-DIGEST a.3): echoes a supported requested version, else offers
    /// the latest legacy one.
    ///
    /// # Errors
    /// [`ServerError::InvalidRequest`] if the session is already initialized;
    /// [`ServerError::InvalidParams`] if `protocolVersion` is not a string.
    pub(crate) fn initialize(
        &mut self,
        params: &Map<String, Value>,
        extra: &Identity,
    ) -> Result<Value, ServerError> {
        let server_info = &extra.server_info;
        if self.is_legacy() {
            return Err(ServerError::InvalidRequest("already initialized"));
        }
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| ServerError::InvalidParams("protocolVersion must be a string".into()))?;
        let version = LEGACY_VERSIONS
            .iter()
            .copied()
            .find(|v| *v == requested)
            .unwrap_or(LEGACY_VERSIONS[1]);
        self.legacy = Some(version);
        if !self.offers_tasks() {
            // 2025-06-18 has no Tasks: tools only, and plain tool calls.
            return Ok(json!({
                "protocolVersion": version,
                "capabilities": with_extra(json!({ "tools": { "listChanged": false } }), extra),
                "serverInfo": server_info,
                "instructions": extra.instructions.1,
            }));
        }
        let capabilities = json!({
            "tools": { "listChanged": false },
            "tasks": {
                "list": {},
                "cancel": {},
                "requests": { "tools": { "call": {} } },
                "eventStreams": {},
            },
        });
        Ok(json!({
            "protocolVersion": version,
            "capabilities": with_extra(capabilities, extra),
            "serverInfo": server_info,
            "instructions": extra.instructions.0,
        }))
    }
}

/// What the server tells a host about itself.
pub(crate) const INSTRUCTIONS: &str =
    "Tools emit and run_trace run as tasks; follow a task's events with \
tasks/stream (SEP-2694), resuming with `after` = the last seq you processed.";

/// The instructions of a session without Tasks (2025-06-18).
pub(crate) const INSTRUCTIONS_WITHOUT_TASKS: &str =
    "Tools emit and run_trace run as plain calls in this \
protocol version; tasks and their event streams need 2025-11-25 or later.";

/// The `server/discover` result (MCP-DIGEST a.4), before dressing.
pub(crate) fn discover(extra: &Identity) -> Value {
    let capabilities = json!({
        "tools": { "listChanged": false },
        // The Tasks extension's object is `{}` (SEP-2663 defines no settings, and the
        // official client treats any member as "no Tasks"); event streams are advertised
        // beside it.
        "extensions": { TASKS_EXTENSION: {}, EVENT_STREAMS_EXTENSION: {} },
    });
    json!({
        "supportedVersions": [MODERN_VERSION],
        "capabilities": with_extra(capabilities, extra),
        "serverInfo": extra.server_info,
        "instructions": extra.instructions.0,
        "ttlMs": 3_600_000,
        "cacheScope": "public",
    })
}

/// `capabilities` with the extra ones added (never replacing `tools`, `tasks`, `extensions`).
fn with_extra(mut capabilities: Value, extra: &Identity) -> Value {
    if let Some(obj) = capabilities.as_object_mut() {
        for (k, v) in &extra.capabilities {
            obj.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    capabilities
}

/// `{"name": "taskstream", "version": …}`.
pub(crate) fn server_info() -> Value {
    json!({ "name": "taskstream", "version": env!("CARGO_PKG_VERSION") })
}

/// Dresses a result for its era: a modern result gets `resultType` (`"complete"` unless set)
/// and `_meta["io.modelcontextprotocol/serverInfo"]`; a legacy one is left as it is.
pub(crate) fn dress(era: Era, mut result: Value, server_info: &Value) -> Value {
    if let (Era::Modern { .. }, Some(obj)) = (era, result.as_object_mut()) {
        obj.entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                "io.modelcontextprotocol/serverInfo".into(),
                server_info.clone(),
            );
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn modern(caps: Value) -> Map<String, Value> {
        params(json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
        }}))
    }

    #[test]
    fn requests_before_initialize_need_modern_meta() {
        let s = Session::default();
        assert_eq!(s.era_of("ping", &Map::new()), Ok(Era::Legacy));
        assert_eq!(
            s.era_of("tools/list", &Map::new())
                .map_err(|e| e.code().code()),
            Err(-32602)
        );
        assert_eq!(
            s.era_of("tools/list", &modern(json!({}))),
            Ok(Era::Modern { tasks: false })
        );
        assert_eq!(
            s.era_of(
                "tools/list",
                &modern(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}))
            ),
            Ok(Era::Modern { tasks: true })
        );
        let old = params(
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25",
            "io.modelcontextprotocol/clientCapabilities": {}}}),
        );
        assert_eq!(
            s.era_of("tools/list", &old).map_err(|e| e.to_json()),
            Err(
                json!({"code": -32022, "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}})
            )
        );
        let no_caps =
            params(json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}));
        assert_eq!(
            s.era_of("tools/list", &no_caps)
                .map_err(|e| e.code().code()),
            Err(-32602)
        );
    }

    #[test]
    fn initialize_negotiates_and_selects_legacy_for_good() {
        let info = Identity::builtin();
        let mut s = Session::default();
        let r = s.initialize(&params(json!({"protocolVersion": "2025-06-18"})), &info);
        assert_eq!(
            r.ok().and_then(|r| r.get("protocolVersion").cloned()),
            Some(json!("2025-06-18"))
        );
        assert_eq!(s.era_of("tools/list", &modern(json!({}))), Ok(Era::Legacy));
        assert_eq!(
            s.initialize(&Map::new(), &info)
                .map_err(|e| e.code().code()),
            Err(-32600)
        );
        let mut s = Session::default();
        let r = s.initialize(&params(json!({"protocolVersion": "2099-01-01"})), &info);
        assert_eq!(
            r.ok().and_then(|r| r.get("protocolVersion").cloned()),
            Some(json!("2025-11-25"))
        );
    }

    #[test]
    fn modern_results_are_dressed() {
        let info = server_info();
        assert_eq!(
            dress(Era::Modern { tasks: false }, json!({}), &info),
            json!({"resultType": "complete",
                   "_meta": {"io.modelcontextprotocol/serverInfo": info.clone()}})
        );
        assert_eq!(
            dress(
                Era::Modern { tasks: true },
                json!({"resultType": "task"}),
                &info
            )["resultType"],
            json!("task")
        );
        assert_eq!(dress(Era::Legacy, json!({}), &info), json!({}));
    }
}
