//! What a run is told: the server commands, the eras, how to make a task, and its time bounds.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// The protocol era a run speaks to the server (MCP-DIGEST a.3 and a.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Era {
    /// 2026-07-28: no handshake, the required `_meta` on every request, Tasks as the
    /// `io.modelcontextprotocol/tasks` extension (SEP-2663).
    Modern,
    /// 2025-11-25: an `initialize` handshake, Tasks as SEP-1686 (`params.task` opt-in).
    Legacy,
}

impl Era {
    /// Both eras, in the order a `both` run takes them.
    pub const BOTH: [Era; 2] = [Era::Modern, Era::Legacy];

    /// The protocol version the era speaks.
    pub fn protocol_version(self) -> &'static str {
        match self {
            Era::Modern => "2026-07-28",
            Era::Legacy => "2025-11-25",
        }
    }

    /// The era's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the suite asks the server for a task: a tool that runs as one.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskProfile {
    /// The tool to call.
    pub tool: String,
    /// Its arguments for every task, or `None` for the built-in `emit` arguments, which vary by
    /// check (a few events at once, a slow live task, many events for the retention checks).
    pub args: Option<Value>,
}

impl TaskProfile {
    /// The default profile: the `emit` tool of the taskstream interface,
    /// `emit {count, interval_ms?, payload_bytes?, fail_at?}`.
    pub fn emit() -> TaskProfile {
        TaskProfile {
            tool: "emit".to_owned(),
            args: None,
        }
    }

    /// Whether the suite may choose the arguments (and so knows how the task will end).
    pub(crate) fn is_builtin_emit(&self) -> bool {
        self.tool == "emit" && self.args.is_none()
    }
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The server under test: a program and its arguments, speaking MCP on stdin/stdout; or
    /// one word, `http://HOST:PORT/PATH`, a Streamable HTTP endpoint already listening (`--url`),
    /// which every scenario reaches over connections of its own. The twins below take either
    /// form too.
    pub command: Vec<String>,
    /// The same server started with a small per-task retention (fewer events than the suite's
    /// 30-tick task produces), for the `events_gone` checks; without it they are skipped.
    pub small_retention_command: Option<Vec<String>>,
    /// The same server started with a short maximum event age (a few seconds at most), so that
    /// a terminal task ends up with nothing retained, for RS-06 and the cursor rules on such a
    /// task; without it they are judged only where another scenario meets that situation.
    pub aged_retention_command: Option<Vec<String>>,
    /// The same server started so that it retains from each task's latest checkpoint (taskstream:
    /// `serve --retain-from-checkpoint`), for the checkpoint checks CP-01, CP-03 and CP-04;
    /// without it, or when that server does not advertise
    /// `experimental["dev.taskstream/checkpoints"]`, they are skipped.
    pub checkpoint_command: Option<Vec<String>>,
    /// How long the suite waits, polling, for the aged-retention server to drop every event of
    /// a terminal task before it skips the checks that need it.
    pub aged_wait: Duration,
    /// The eras to check, in turn.
    pub eras: Vec<Era>,
    /// How to make a task.
    pub profile: TaskProfile,
    /// Milliseconds between the events of the suite's live `emit` tasks.
    pub interval_ms: u64,
    /// Bound on every wait for an answer or an event.
    pub timeout: Duration,
    /// How long the suite listens to be sure that something does not arrive.
    pub quiet: Duration,
    /// How many concurrent streams the stream-limit check (SE-07) opens at most.
    pub stream_probe: usize,
    /// Print the wire traffic and the server's stderr to stderr.
    pub verbose: bool,
    /// Every start of the stdio command is a new connection to one server that outlives it
    /// (a relay such as `taskstream connect`): the long-lived group runs over stdio too. A URL
    /// target always runs it.
    pub long_lived: bool,
}

impl Config {
    /// A configuration with the defaults for `command`: both eras, the `emit` profile, 100 ms
    /// between live events, 5 s timeouts, a 200 ms quiet window, up to 64 concurrent streams,
    /// and 15 s for events to age out on the aged-retention server.
    pub fn new(command: Vec<String>) -> Config {
        Config {
            command,
            small_retention_command: None,
            aged_retention_command: None,
            checkpoint_command: None,
            aged_wait: Duration::from_secs(15),
            eras: Era::BOTH.to_vec(),
            profile: TaskProfile::emit(),
            interval_ms: 100,
            timeout: Duration::from_secs(5),
            quiet: Duration::from_millis(200),
            stream_probe: 64,
            verbose: false,
            long_lived: false,
        }
    }
}
