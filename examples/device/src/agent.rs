//! The MCP agent: what the device answers, in both eras, over one serial line.
//!
//! - `initialize` (2025-11-25: it selects the legacy era for as long as the device runs, and
//!   starts a new session on the line: streams of the previous peer are dropped) and
//!   `server/discover` (2026-07-28), `ping`;
//! - `tools/list` with one tool, `sample {count, interval_ms?}`, which runs only as a task
//!   (`execution.taskSupport: "required"`) and reads the board's SysTick counter `count` times,
//!   `interval_ms` apart, one `dev.taskstream.sample` event per reading, between two
//!   `dev.taskstream.task.status` events;
//! - `tools/call` as a task (SEP-1686 `params.task` in the legacy era, the SEP-2663 extension
//!   in the modern one), `tasks/get`, `tasks/cancel`, and in the legacy era `tasks/result`
//!   (answered when the task ends; one waiting request on the device) and `tasks/list`;
//! - `tasks/stream` (SEP-2694): replay from the task's ring, live delivery, `events_gone` when
//!   the ring moved past the cursor, `notifications/cancelled` of a stream.
//!
//! Every decision about a stream is the core's (`resume::decide`, `StreamTable`); every stream
//! message and error is written by the core's serialisers. Capacities: [`TASKS`] task slots,
//! each with its own ring of [`RING_EVENTS`] events in [`RING_BYTES`] bytes, and [`STREAMS`]
//! concurrent streams. A slot is free again [`TTL_MS`] after its task ended.
//!
//! Task ids are 128 bits of xoshiro128** (four 32-bit outputs), reseeded for every task with the timing jitter of
//! the bytes received so far (see `main.rs`): the AN385 has no random number generator, so an
//! id is as unpredictable as that jitter; a board with one should seed from it instead.

use core::mem::MaybeUninit;

use taskstream_core::json::Found;
use taskstream_core::resume::{decide, Lifecycle, ResumeError};
use taskstream_core::rpc::{
    self, BufferTooSmall, Era, ErrorCode, EventNotification, RawId, Reason, RpcError,
    StreamParamsError, WalkedMessage,
};
use taskstream_core::streams::{OpenError, Opened, Progress, Pump};
use taskstream_core::{
    json, EventRing, EventType, Millis, Payload, RequestId, RetentionPolicy, Seq, StreamTable,
};

use crate::out::Out;
use crate::params::{self, Members, Meta, MODERN, TASKS_EXTENSION};

/// Task slots: one more than [`STREAMS`], so that the stream limit can be reached and refused
/// with tasks to spare (SE-07).
pub(crate) const TASKS: usize = 3;
/// Events each task's ring holds.
pub(crate) const RING_EVENTS: usize = 12;
/// Bytes of event types and payloads each ring holds: 12 readings of up to 74 bytes (the type's
/// 21 and a payload of 53 while the uptime has at most 8 digits, 27 hours), plus the end of the
/// arena that an entry wrapping to its start may leave unused.
pub(crate) const RING_BYTES: usize = 968;
/// Concurrent `tasks/stream` requests.
pub(crate) const STREAMS: usize = 2;
/// How long an ended task stays retrievable: its `ttl`.
pub(crate) const TTL_MS: u64 = 60_000;
/// The `pollInterval` suggested to clients (written as text, with [`TTL_MS`], by `task_fields`).
const POLL_MS: u64 = 100;
const _: () = assert!(
    TTL_MS == 60_000 && POLL_MS == 100,
    "task_fields writes them as text"
);
/// The most readings one task may take, and the longest interval between two.
const MAX_COUNT: u32 = 1_000_000;
const MAX_INTERVAL_MS: u32 = 3_600_000;
/// Stream frames written per main-loop turn, so that input is read between them.
const FRAMES_PER_STEP: usize = 16;
/// Readings taken per task and main-loop turn, likewise.
const SAMPLES_PER_STEP: usize = 16;

/// The event types, checked when the image is compiled (no check is left in it).
const SAMPLE_TYPE: EventType<'static> = event_type("dev.taskstream.sample");
const STATUS_TYPE: EventType<'static> = event_type("dev.taskstream.task.status");

const fn event_type(name: &'static str) -> EventType<'static> {
    match EventType::new(name) {
        Ok(t) => t,
        Err(_) => panic!("not a valid event type"),
    }
}
/// How long a client may cache a list, in the modern era.
const CACHE: &str = r#","ttlMs":60000,"cacheScope":"public""#;
const SERVER_INFO: &str = r#""serverInfo":{"name":"taskstream-device","version":"0.1.0"}"#;

/// A whole number from the build environment, or `default` if unset or empty.
const fn env_number(value: Option<&str>, default: u64) -> u64 {
    let Some(text) = value else {
        return default;
    };
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return default;
    }
    let mut n = 0u64;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "a whole number is needed");
        n = n * 10 + (bytes[i] - b'0') as u64;
        i += 1;
    }
    n
}

/// Retention, fixed when the image is built: `TASKSTREAM_DEVICE_MAX_EVENTS` (at most
/// [`RING_EVENTS`]) and `TASKSTREAM_DEVICE_MAX_AGE_MS` (scripts/firmware's `--max-events` and
/// `--max-age-ms`).
const POLICY: RetentionPolicy = RetentionPolicy {
    max_events: env_number(
        option_env!("TASKSTREAM_DEVICE_MAX_EVENTS"),
        RING_EVENTS as u64,
    ) as u32,
    max_bytes: RING_BYTES as u32,
    max_event_age: Millis(env_number(
        option_env!("TASKSTREAM_DEVICE_MAX_AGE_MS"),
        86_400_000,
    )),
    terminal_retention: Millis(TTL_MS),
    max_payload_bytes: 256,
    retain_from_checkpoint: false,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Working,
    Completed,
    Cancelled,
}

impl Status {
    const fn name(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// One task slot.
struct Task {
    used: bool,
    /// Bumped each time the slot takes a new task, so a stream never outlives its task.
    generation: u8,
    /// 32 lowercase hex digits (a `String`, built a character at a time: no UTF-8 check).
    id: heapless::String<32>,
    status: Status,
    count: u32,
    done: u32,
    interval_ms: u32,
    due: Millis,
    created: Millis,
    updated: Millis,
    ring: EventRing<RING_EVENTS, RING_BYTES>,
}

impl Task {
    fn id(&self) -> &str {
        &self.id
    }

    fn lifecycle(&self) -> Lifecycle {
        if self.status == Status::Working {
            Lifecycle::Running
        } else {
            Lifecycle::Terminal
        }
    }
}

/// The methods the agent answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Initialize,
    Ping,
    Discover,
    ToolsList,
    ToolsCall,
    TasksGet,
    TasksCancel,
    TasksStream,
    TasksResult,
    TasksList,
}

/// A method answered before the modern era's `_meta` is read: the handshake and `ping`.
const BARE: u8 = 1;
/// A method that needs the Tasks extension declared (in the modern era).
const NEEDS_TASKS: u8 = 2;
/// A method of SEP-1686 only: unknown in the modern era, whose extension has neither.
const LEGACY_ONLY: u8 = 4;

/// Each method's name and how the eras differ for it, as data: one dispatch for both eras.
const METHODS: [(&str, Method, u8); 10] = [
    ("initialize", Method::Initialize, BARE),
    ("ping", Method::Ping, BARE),
    ("server/discover", Method::Discover, 0),
    ("tools/list", Method::ToolsList, 0),
    ("tools/call", Method::ToolsCall, 0),
    ("tasks/get", Method::TasksGet, NEEDS_TASKS),
    ("tasks/cancel", Method::TasksCancel, NEEDS_TASKS),
    ("tasks/stream", Method::TasksStream, NEEDS_TASKS),
    ("tasks/result", Method::TasksResult, LEGACY_ONLY),
    ("tasks/list", Method::TasksList, LEGACY_ONLY),
];

/// The kind of a request's params, as the walk gave them (an object or an array; `None` when
/// absent).
fn params_kind(params: Option<&[u8]>) -> Option<json::Kind> {
    params.map(|p| {
        if p.first() == Some(&b'{') {
            json::Kind::Object
        } else {
            json::Kind::Array
        }
    })
}

/// A task as the stream table knows it: its slot and the slot's generation.
type Key = (u8, u8);

/// Everything the agent keeps; one static, zero-initialised (`.bss`).
pub(crate) struct Agent {
    tasks: [Task; TASKS],
    streams: StreamTable<Key, STREAMS>,
    /// An `initialize` handshake selected the legacy era.
    legacy: bool,
    /// xoshiro128** state: 32-bit words, for a 32-bit core.
    rng: [u32; 4],
    out: Out,
    /// The legacy `tasks/result` waiting for a task to end, and that task: one on the device
    /// (a second waiter is refused with `waiter_limit`), not one per task, for the RAM a
    /// request id takes (144 bytes).
    waiter: Option<(Key, RequestId)>,
}

static mut AGENT: MaybeUninit<Agent> = MaybeUninit::zeroed();

impl Agent {
    /// The agent, set up in its static. Call once.
    pub(crate) fn take() -> &'static mut Agent {
        // SAFETY: called once, before anything else uses AGENT. Every field of `Agent` is valid
        // all-zero: bools false, integers 0, `Status::Working`, empty `heapless` collections,
        // option tags; a ring is `reset` before its slot's first task uses it, and the stream
        // table is replaced below.
        #[allow(unsafe_code)]
        let agent = unsafe { (*core::ptr::addr_of_mut!(AGENT)).assume_init_mut() };
        agent.streams = StreamTable::new(STREAMS);
        agent.waiter = None;
        agent
    }

    /// Mixes a value read from the board (timer counts, input timing jitter) into the task id
    /// generator.
    pub(crate) fn seed(&mut self, value: u32) {
        self.rng[0] ^= value.wrapping_mul(0x9e37_79b9);
        self.rng[1] ^= value.rotate_left(16);
        if self.rng == [0; 4] {
            self.rng[3] = 1;
        }
    }

    /// xoshiro128**: 32 bits, with 32-bit operations only (no 64-bit shifts on this core).
    fn random(&mut self) -> u32 {
        let s = &mut self.rng;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 9;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(11);
        result
    }

    /// An over-long request line was dropped.
    pub(crate) fn line_too_long(&mut self) {
        self.error(
            None,
            &refusal(ErrorCode::InvalidRequest, Reason::MessageTooLong),
        );
    }

    /// Handles one request line.
    pub(crate) fn handle_line(&mut self, line: &[u8], now: Millis) {
        let mut found: Members<'_> = [Found::default(); 20];
        // One walk over the line: it is validated, and the members the agent reads are found
        // in the same pass. The same messages and errors as `rpc::parse`; the id is decoded
        // here, once, and the method is compared raw.
        match rpc::parse_walked(line, &params::PATHS, &mut found) {
            Ok(WalkedMessage::Request { id, method, params }) => {
                if let Some(id) = id.decode() {
                    self.request(&id, method, params, &found, now);
                }
            }
            Ok(WalkedMessage::Notification { method, params }) => {
                self.notification(method, params, &found);
            }
            Ok(WalkedMessage::Response { .. }) => {}
            Err(e) => {
                if e.is_answered() {
                    let id = e.id().and_then(RawId::decode);
                    self.error(id.as_ref(), &RpcError::new(e.code()));
                }
            }
        }
    }

    fn notification(&mut self, method: &[u8], params: Option<&[u8]>, found: &Members<'_>) {
        if json::unescaped_eq(method, rpc::method::CANCELLED) {
            let request_id = rpc::param(found, params::REQUEST_ID);
            let id = rpc::read_cancelled_params(params_kind(params), request_id)
                .ok()
                .and_then(RawId::decode);
            if let Some(id) = id {
                if self.streams.cancel(&id).is_none() {
                    // Or the waiting `tasks/result`: it is dropped, unanswered.
                    if self.waiter.as_ref().is_some_and(|(_, w)| *w == id) {
                        self.waiter = None;
                    }
                }
            }
        }
    }

    fn request(
        &mut self,
        id: &RequestId,
        method: &[u8],
        params: Option<&[u8]>,
        found: &Members<'_>,
        now: Millis,
    ) {
        let entry = METHODS
            .iter()
            .find(|(name, ..)| json::unescaped_eq(method, name));
        let flags = entry.map_or(0, |&(_, _, flags)| flags);
        let tasks_declared = if self.legacy || flags & BARE != 0 {
            true
        } else {
            match params::meta(found) {
                Meta::Valid { tasks } => tasks,
                Meta::Missing => {
                    return self.fail(id, ErrorCode::InvalidParams);
                }
                Meta::Version(requested) => return self.unsupported_version(id, requested),
            }
        };
        let method = match entry {
            Some(&(_, method, flags)) if flags & LEGACY_ONLY == 0 || self.legacy => method,
            _ => return self.fail(id, ErrorCode::MethodNotFound),
        };
        if flags & NEEDS_TASKS != 0 && !tasks_declared {
            return self.missing_tasks_capability(id);
        }
        match method {
            Method::Initialize => self.initialize(id, found),
            Method::Ping => self.ping(id),
            Method::Discover => self.discover(id),
            Method::ToolsList => self.tools_list(id),
            Method::ToolsCall => self.tools_call(id, found, tasks_declared, now),
            Method::TasksGet => self.tasks_get(id, found),
            Method::TasksCancel => self.tasks_cancel(id, found, now),
            Method::TasksStream => self.tasks_stream(id, params, found),
            Method::TasksResult => self.tasks_result(id, found),
            Method::TasksList => self.tasks_list(id),
        }
    }

    /// `ping`, whose result carries the device's stack use in a vendor `_meta` entry.
    fn ping(&mut self, id: &RequestId) {
        let (peak, room) = crate::stack_use();
        let legacy = self.legacy;
        let out = self.begin(id);
        out.s(r#"{"_meta":{"dev.taskstream/device":{"stackPeakBytes":"#)
            .u64(peak as u64)
            .s(r#","stackBytes":"#)
            .u64(room as u64)
            .s("}}");
        end_complete(out, legacy);
    }

    fn initialize(&mut self, id: &RequestId, found: &Members<'_>) {
        self.legacy = true;
        // A handshake on the line is a new peer: the old one's streams are gone with it.
        self.streams = StreamTable::new(STREAMS);
        self.waiter = None;
        let version = if params::is_string(found, params::PROTOCOL_VERSION, "2025-06-18") {
            "2025-06-18"
        } else {
            "2025-11-25"
        };
        self.begin(id)
            .s(r#"{"protocolVersion":""#)
            .s(version)
            .s(r#"","capabilities":{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}},"eventStreams":{}}},"#)
            .s(SERVER_INFO)
            .s("}");
        self.end();
    }

    fn discover(&mut self, id: &RequestId) {
        self.begin(id)
            .s(r#"{"resultType":"complete","supportedVersions":[""#)
            .s(MODERN)
            .s(r#""],"capabilities":{"tools":{},"extensions":{""#)
            .s(TASKS_EXTENSION)
            .s(r#"":{"eventStreams":{}}}},"#)
            .s(SERVER_INFO)
            .s(CACHE)
            .s("}");
        self.end();
    }

    fn tools_list(&mut self, id: &RequestId) {
        let legacy = self.legacy;
        let out = self.begin(id);
        // The two arguments' schemas share their text; the bounds are MAX_COUNT and
        // MAX_INTERVAL_MS.
        const INTEGER: &str = r#"{"type":"integer","minimum":0,"maximum":"#;
        out.s(r#"{"tools":[{"name":"sample","description":"Reads SysTick count times","inputSchema":{"type":"object","properties":{"count":"#)
            .s(INTEGER)
            .s(r#"1000000},"interval_ms":"#)
            .s(INTEGER)
            .s(r#"3600000}},"required":["count"]},"execution":{"taskSupport":"required"}}]"#);
        if !legacy {
            out.s(CACHE);
        }
        end_complete(out, legacy);
    }

    /// A tool error; `text` is a constant that needs no escape.
    fn tool_error(&mut self, id: &RequestId, text: &str) {
        let legacy = self.legacy;
        let out = self.begin(id);
        out.s(r#"{"content":[{"type":"text","text":""#)
            .s(text)
            .s(r#""}],"isError":true"#);
        end_complete(out, legacy);
    }

    fn tools_call(&mut self, id: &RequestId, found: &Members<'_>, declared: bool, now: Millis) {
        if !params::is_string(found, params::NAME, "sample") {
            return self.fail(id, ErrorCode::InvalidParams);
        }
        let as_task = if self.legacy {
            params::of_kind(found, params::TASK, json::Kind::Object).is_some()
        } else {
            declared
        };
        if !as_task {
            if self.legacy {
                return self.fail(id, ErrorCode::MethodNotFound);
            }
            return self.missing_tasks_capability(id);
        }
        // Found only in an `arguments` that is an object, as the walk looks into no other.
        let Some(count) =
            params::member(found, params::COUNT).and_then(|m| params::at_most(&m, MAX_COUNT))
        else {
            return self.tool_error(id, "count: 0..1000000");
        };
        let interval_ms = match params::member(found, params::INTERVAL_MS) {
            None => Some(0),
            Some(m) if m.kind == json::Kind::Null => Some(0),
            Some(m) => params::at_most(&m, MAX_INTERVAL_MS),
        };
        let Some(interval_ms) = interval_ms else {
            return self.tool_error(id, "interval_ms: 0..3600000");
        };
        let Some(slot) = self.tasks.iter().position(|t| !t.used) else {
            return self.tool_error(id, "no free task slot");
        };
        self.seed(crate::jitter() ^ crate::systick_value());
        let mut words = [0u32; 4];
        for w in &mut words {
            *w = self.random();
        }
        let Some(task) = self.tasks.get_mut(slot) else {
            return;
        };
        task.used = true;
        task.generation = task.generation.wrapping_add(1);
        task.id.clear();
        for i in 0..32 {
            let nibble = (words[i / 8 % 4] >> ((i % 8) * 4)) & 0xf;
            let _fits = task
                .id
                .push(char::from(b"0123456789abcdef"[nibble as usize]));
        }
        task.status = Status::Working;
        task.count = count;
        task.done = 0;
        task.interval_ms = interval_ms;
        task.due = now.saturating_add(Millis(u64::from(interval_ms)));
        task.created = now;
        task.updated = now;
        task.ring.reset(Seq::ZERO);
        status_event(task, now, &mut self.out);
        if count == 0 {
            finish(task, Status::Completed, now, &mut self.out);
        }
        let legacy = self.legacy;
        let out = begin(&mut self.out, id);
        if legacy {
            out.s(r#"{"task":"#);
        }
        task_fields(out, &self.tasks[slot], legacy);
        out.s(if legacy {
            "}}"
        } else {
            r#","resultType":"task"}"#
        });
        self.end();
    }

    /// The slot of the task `params.taskId` names, or the error answered.
    fn find_task(&mut self, id: &RequestId, found: &Members<'_>) -> Option<usize> {
        let raw = params::member(found, params::TASK_ID).and_then(|m| params::string_raw(&m));
        let Some(raw) = raw else {
            self.fail(id, ErrorCode::InvalidParams);
            return None;
        };
        self.slot_of(id, raw)
    }

    /// The slot of the task whose id is the raw JSON string contents `raw`, or the
    /// `unknown_task` refusal answered.
    fn slot_of(&mut self, id: &RequestId, raw: &[u8]) -> Option<usize> {
        let found = self
            .tasks
            .iter()
            .position(|t| t.used && json::unescaped_eq(raw, t.id()));
        if found.is_none() {
            self.error(Some(id), &UNKNOWN_TASK);
        }
        found
    }

    fn tasks_get(&mut self, id: &RequestId, found: &Members<'_>) {
        let Some(slot) = self.find_task(id, found) else {
            return;
        };
        let legacy = self.legacy;
        let task = &self.tasks[slot];
        let out = begin(&mut self.out, id);
        task_fields(out, task, legacy);
        // A modern task's result comes with its status once completed.
        if !legacy && task.status == Status::Completed {
            sampled(out.s(r#","result":"#), task).s("}");
        }
        end_complete(out, legacy);
    }

    fn tasks_cancel(&mut self, id: &RequestId, found: &Members<'_>, now: Millis) {
        let Some(slot) = self.find_task(id, found) else {
            return;
        };
        let legacy = self.legacy;
        let task = &mut self.tasks[slot];
        if task.status != Status::Working {
            if legacy {
                return self.fail(id, ErrorCode::InvalidParams);
            }
        } else {
            finish(task, Status::Cancelled, now, &mut self.out);
        }
        let out = begin(&mut self.out, id);
        if legacy {
            task_fields(out, &self.tasks[slot], legacy);
            out.s("}");
        } else {
            out.s(r#"{"resultType":"complete"}"#);
        }
        self.end();
    }

    /// `tasks/result` (SEP-1686): the tool's result once the task has ended, at once or when
    /// it does.
    fn tasks_result(&mut self, id: &RequestId, found: &Members<'_>) {
        let Some(slot) = self.find_task(id, found) else {
            return;
        };
        let task = &mut self.tasks[slot];
        if task.status != Status::Working {
            return final_answer(&mut self.out, id, task);
        }
        if self.waiter.is_some() {
            let e = refusal(ErrorCode::InvalidParams, Reason::WaiterLimit);
            return self.error(Some(id), &e);
        }
        self.waiter = Some(((slot as u8, task.generation), id.clone()));
    }

    /// `tasks/list` (SEP-1686): every task the device holds, in one page.
    fn tasks_list(&mut self, id: &RequestId) {
        let out = begin(&mut self.out, id);
        out.s(r#"{"tasks":["#);
        let mut first = true;
        for task in self.tasks.iter().filter(|t| t.used) {
            if !first {
                out.s(",");
            }
            task_fields(out, task, true);
            out.s("}");
            first = false;
        }
        out.s("]}");
        self.end();
    }

    fn tasks_stream(&mut self, id: &RequestId, params: Option<&[u8]>, found: &Members<'_>) {
        let task_id = rpc::param(found, params::TASK_ID);
        let after = rpc::param(found, params::AFTER);
        let p = match rpc::read_stream_params(params_kind(params), task_id, after) {
            Ok(p) => p,
            Err(e) => return self.error(Some(id), &stream_params_error(e)),
        };
        let Some(slot) = self.slot_of(id, p.task_id) else {
            return;
        };
        let task = &self.tasks[slot];
        let key = (slot as u8, task.generation);
        if let Err(e) = self.streams.check_open(key) {
            return self.error(Some(id), &open_error(e));
        }
        let start = match decide(p.after, task.ring.retained(), task.lifecycle()) {
            Ok(start) => start,
            Err(e) => {
                let e = match e {
                    ResumeError::EventsGone { earliest } => {
                        RpcError::events_gone(task.id(), earliest)
                    }
                    _ => refusal(ErrorCode::InvalidParams, Reason::CursorAhead),
                };
                send_error(&mut self.out, Some(id), &e);
                return;
            }
        };
        match self.streams.open(id.clone(), key, start) {
            Ok(Opened::Streaming) => {}
            Ok(Opened::Complete) => self.stream_result(id),
            Err(e) => self.error(Some(id), &open_error(e)),
        }
    }

    fn stream_result(&mut self, id: &RequestId) {
        let era = if self.legacy {
            Era::Legacy
        } else {
            Era::Modern
        };
        let written = rpc::write_stream_result(id, era, self.out.buf_mut());
        send_written(&mut self.out, written);
    }

    /// One turn of the timers and the streams: up to [`SAMPLES_PER_STEP`] due readings per
    /// task, retention, then up to [`FRAMES_PER_STEP`] stream frames. Answers whether readings
    /// or frames are left for the next turn.
    pub(crate) fn step(&mut self, now: Millis) -> bool {
        let mut behind = false;
        for (slot, task) in self.tasks.iter_mut().enumerate() {
            if !task.used {
                continue;
            }
            // Readings that are due, at most a turn's worth, so that a task without an
            // interval (or one far behind) does not keep input waiting.
            let mut budget = SAMPLES_PER_STEP;
            while task.status == Status::Working && task.due <= now {
                if budget == 0 {
                    behind = true;
                    break;
                }
                budget -= 1;
                sample(task, now, &mut self.out);
                task.due = task.due.saturating_add(Millis(u64::from(task.interval_ms)));
                if task.done >= task.count {
                    finish(task, Status::Completed, now, &mut self.out);
                }
            }
            // The ring is the agent's only store of events: nothing else to tell of what aged out.
            let _aged_out = task.ring.expire(now, &POLICY);
            if task.status != Status::Working {
                let key = (slot as u8, task.generation);
                if self.waiter.as_ref().is_some_and(|(k, _)| *k == key) {
                    if let Some((_, waiter)) = self.waiter.take() {
                        final_answer(&mut self.out, &waiter, task);
                    }
                }
                if POLICY.is_task_expired(task.updated, now) {
                    task.used = false;
                }
            }
        }
        let era = if self.legacy {
            Era::Legacy
        } else {
            Era::Modern
        };
        let tasks = &self.tasks;
        for _ in 0..FRAMES_PER_STEP {
            let step = self.streams.poll(|(slot, generation)| {
                let t = tasks.get(usize::from(slot))?;
                (t.used && t.generation == generation).then(|| Progress {
                    retained: t.ring.retained(),
                    lifecycle: t.lifecycle(),
                })
            });
            let Some(step) = step else {
                return behind;
            };
            let written = match step {
                Pump::Event {
                    task: (slot, _),
                    seq,
                } => {
                    let Some(task) = tasks.get(usize::from(slot)) else {
                        continue;
                    };
                    // The pump hands out only a seq of the range `task.ring.retained()` reported
                    // just above, and nothing changes the ring in between, so the read cannot
                    // fail. Were it to (a corrupted ring), the stream could not go on without a
                    // gap (RS-07): the device halts rather than skip the event. No
                    // `StreamTable::missed` path, 0.9 KiB of flash for a branch never taken.
                    // The ring holds the device's two types only: read back as the constants
                    // they were appended as, not as text to check.
                    let Some(ev) = task.ring.get_typed(seq, &[SAMPLE_TYPE, STATUS_TYPE]) else {
                        crate::defect()
                    };
                    let note = EventNotification {
                        task_id: task.id(),
                        seq,
                        event_type: ev.event_type,
                        payload: ev.payload,
                    };
                    rpc::write_event(&note, self.out.buf_mut())
                }
                Pump::Complete { id, .. } => rpc::write_stream_result(&id, era, self.out.buf_mut()),
                Pump::Gone {
                    id,
                    task: (slot, _),
                    earliest,
                    ..
                } => {
                    let task_id = tasks.get(usize::from(slot)).map_or("", Task::id);
                    let e = RpcError::events_gone(task_id, earliest);
                    rpc::write_error(Some(&id), &e, self.out.buf_mut())
                }
            };
            send_written(&mut self.out, written);
        }
        true
    }

    fn unsupported_version(&mut self, id: &RequestId, requested: &[u8]) {
        error_head(&mut self.out, id, ErrorCode::UnsupportedProtocolVersion)
            .s(r#","data":{"supported":[""#)
            .s(MODERN)
            .s(r#""],"requested":"#)
            .put(requested)
            .s("}}}");
        send(&mut self.out);
    }

    fn missing_tasks_capability(&mut self, id: &RequestId) {
        error_head(
            &mut self.out,
            id,
            ErrorCode::MissingRequiredClientCapability,
        )
        .s(r#","data":{"requiredCapabilities":{"extensions":{""#)
        .s(TASKS_EXTENSION)
        .s(r#"":{}}}}}}"#);
        send(&mut self.out);
    }

    fn begin(&mut self, id: &RequestId) -> &mut Out {
        begin(&mut self.out, id)
    }

    /// Closes the result begun by [`Agent::begin`] and sends it.
    fn end(&mut self) {
        self.out.s("}");
        send(&mut self.out);
    }

    /// An error with the code's standard message and no data. One call instead of an error
    /// built at each of its callers.
    #[inline(never)]
    fn fail(&mut self, id: &RequestId, code: ErrorCode) {
        self.error(Some(id), &RpcError::new(code));
    }

    fn error(&mut self, id: Option<&RequestId>, e: &RpcError<'_>) {
        send_error(&mut self.out, id, e);
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":`, the start of a result. The core's writer of the
/// legacy `tasks/stream` result writes the head with the id, escaped as every id the agent
/// sends; its closing `{}}` is cut off, so that the agent has one id writer, the core's.
fn begin<'o>(out: &'o mut Out, id: &RequestId) -> &'o mut Out {
    let n = rpc::write_stream_result(id, Era::Legacy, out.buf_mut()).unwrap_or(0);
    out.set_head(n, b"{}}".len())
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…` of an error with data: the core's
/// error without data, its closing `}}` cut off (as in [`begin`]).
fn error_head<'o>(out: &'o mut Out, id: &RequestId, code: ErrorCode) -> &'o mut Out {
    let n = rpc::write_error(Some(id), &RpcError::new(code), out.buf_mut()).unwrap_or(0);
    out.set_head(n, b"}}".len())
}

/// Ends a result that is complete: `resultType` in the modern era, then the closing braces;
/// and sends it.
fn end_complete(out: &mut Out, legacy: bool) {
    if !legacy {
        out.s(r#","resultType":"complete""#);
    }
    out.s("}}");
    send(out);
}

/// The tool's result for a completed task, without its closing brace.
fn sampled<'o>(out: &'o mut Out, task: &Task) -> &'o mut Out {
    out.s(r#"{"content":[{"type":"text","text":"sampled "#)
        .u64(u64::from(task.done))
        .s(r#" readings"}],"isError":false"#)
}

fn send_error(out: &mut Out, id: Option<&RequestId>, e: &RpcError<'_>) {
    let written = rpc::write_error(id, e, out.buf_mut());
    send_written(out, written);
}

/// Sends what one of the core's writers wrote into the buffer; a message that did not fit is
/// not sent (the core's writers say so rather than write it in part).
fn send_written(out: &mut Out, written: Result<usize, BufferTooSmall>) {
    if let Ok(n) = written {
        out.set_len(n);
        send(out);
    }
}

// Errors carry the code's standard message only: the code and `data.reason` are what a
// client acts on, and the longer sentences of the core's constants would take flash.

/// An error with its code's standard message and a `data.reason`.
const fn refusal(code: ErrorCode, reason: Reason) -> RpcError<'static> {
    RpcError {
        code,
        message: code.message(),
        data: rpc::ErrorData::Reason(reason),
    }
}

/// `unknown_task`, with the short message (the core's constant has a longer one).
const UNKNOWN_TASK: RpcError<'static> = refusal(ErrorCode::InvalidParams, Reason::UnknownTask);

fn open_error(e: OpenError) -> RpcError<'static> {
    match e {
        OpenError::StreamActive => refusal(ErrorCode::InvalidParams, Reason::StreamActive),
        OpenError::StreamLimit => refusal(ErrorCode::InvalidParams, Reason::StreamLimit),
        OpenError::DuplicateId => RpcError::new(ErrorCode::InvalidRequest),
    }
}

/// The refusal of bad `tasks/stream` params, as the core's `From<StreamParamsError>` makes it
/// (an over-long task id is an unknown task, DX-02; a bad `after` is `invalid_after`, RS-02)
/// but with the short message.
fn stream_params_error(e: StreamParamsError) -> RpcError<'static> {
    if e == StreamParamsError::TaskIdTooLong {
        return UNKNOWN_TASK;
    }
    let data = if e.is_about_after() {
        rpc::ErrorData::Reason(rpc::Reason::InvalidAfter)
    } else {
        rpc::ErrorData::None
    };
    RpcError {
        data,
        ..RpcError::new(ErrorCode::InvalidParams)
    }
}

/// Writes the message and its newline to the UART; a message that did not fit is replaced by
/// an internal error, so that every request still gets one answer.
fn send(out: &mut Out) {
    if out.message().is_none() {
        // Written by the core's error writer, as every error is: no second copy of its text.
        let e = RpcError::new(ErrorCode::InternalError);
        let n = rpc::write_error(None, &e, out.buf_mut()).unwrap_or(0);
        out.set_len(n);
    }
    if let Some(message) = out.message() {
        crate::uart_write(message);
    }
    crate::uart_write(b"\n");
}

/// The answer to `tasks/result` for an ended task: the tool's result with the related-task
/// `_meta`, or, for a cancelled task, an internal error saying so.
fn final_answer(out: &mut Out, id: &RequestId, task: &Task) {
    if task.status == Status::Cancelled {
        return send_error(out, Some(id), &RpcError::new(ErrorCode::InternalError));
    }
    sampled(begin(out, id), task)
        .s(r#","_meta":{"io.modelcontextprotocol/related-task":{"taskId":""#)
        .s(task.id())
        .s(r#""}}}}"#);
    send(out);
}

/// A task's opening brace and fields, without its closing brace (SEP-1686 names in the legacy
/// era, SEP-2663 names in the modern one).
fn task_fields(out: &mut Out, task: &Task, legacy: bool) {
    out.s(r#"{"taskId":""#)
        .s(task.id())
        .s(r#"","status":""#)
        .s(task.status.name())
        .s(r#"","createdAt":"#)
        .time(task.created.0)
        .s(r#","lastUpdatedAt":"#)
        .time(task.updated.0);
    // TTL_MS and POLL_MS, as text: constants need no number writer.
    out.s(if legacy {
        r#","ttl":60000,"pollInterval":100"#
    } else {
        r#","ttlMs":60000,"pollIntervalMs":100"#
    });
}

/// Appends an event to the task's ring. The payloads are the device's own: compact, and they
/// always fit.
fn append(task: &mut Task, now: Millis, ty: EventType<'static>, payload: &[u8]) {
    if let Some(payload) = Payload::new(payload).ok().and_then(|p| p.compact()) {
        let _ = task.ring.append_compact(now, ty, payload, &POLICY);
    }
}

/// One reading of the board, as an event.
fn sample(task: &mut Task, now: Millis, out: &mut Out) {
    out.clear();
    out.s(r#"{"i":"#)
        .u64(u64::from(task.done))
        .s(r#","reading":"#)
        .u64(u64::from(crate::systick_value()))
        .s(r#","uptime_ms":"#)
        .u64(now.0)
        .s("}");
    if let Some(payload) = out.message() {
        append(task, now, SAMPLE_TYPE, payload);
    }
    task.done += 1;
}

fn status_event(task: &mut Task, now: Millis, out: &mut Out) {
    out.clear();
    out.s(r#"{"status":""#).s(task.status.name()).s(r#""}"#);
    if let Some(payload) = out.message() {
        append(task, now, STATUS_TYPE, payload);
    }
}

/// Ends a task: its status, then the status event that closes its streams once delivered.
fn finish(task: &mut Task, status: Status, now: Millis, out: &mut Out) {
    task.status = status;
    task.updated = now;
    status_event(task, now, out);
}
