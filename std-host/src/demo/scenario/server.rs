//! The demo's server: `taskstream serve --http 127.0.0.1:0` on the demo's data dir, one
//! long-lived process that the demo's clients connect to, lose and reconnect; killed with
//! SIGKILL for the crash, stopped with SIGTERM otherwise.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Res;

/// How long the server may take to print its listening line.
const START_DEADLINE: Duration = Duration::from_secs(20);
/// How long a SIGTERM may take before SIGKILL follows.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running `taskstream serve --http`.
pub(crate) struct ServerProc {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
}

impl ServerProc {
    /// Starts `exe serve --http 127.0.0.1:0 --data-dir DIR EXTRA…`, copying its stderr to
    /// `log_path`, and waits (bounded) for its `listening on` line.
    pub(crate) fn start(exe: &Path, data_dir: &Path, extra: &[&str], log_path: &Path) -> Res<Self> {
        let mut log =
            File::create(log_path).map_err(|e| format!("creating the server log: {e}"))?;
        let mut child = Command::new(exe)
            .arg("serve")
            .args(["--http", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the server: {e}"))?;
        let Some(stderr) = child.stderr.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the server has no stderr pipe".into());
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(log, "{line}");
                if !sent {
                    if let Some(url) = line.split("listening on ").nth(1) {
                        sent = tx.send(url.trim().to_owned()).is_ok();
                    }
                }
            }
        });
        match rx.recv_timeout(START_DEADLINE) {
            Ok(url) => Ok(ServerProc { child, url }),
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                Err(format!(
                    "the server printed no listening line within {START_DEADLINE:?} (exit: {}); see {}",
                    status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                    log_path.display()
                ))
            }
        }
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL: a crash, not a shutdown.
    pub(crate) fn kill9(mut self) -> Res<ExitStatus> {
        self.child
            .kill()
            .map_err(|e| format!("kill -9 the server: {e}"))?;
        self.child
            .wait()
            .map_err(|e| format!("reaping the server: {e}"))
    }

    /// SIGTERM, then (after the grace period) SIGKILL.
    pub(crate) fn stop(mut self) -> Res<ExitStatus> {
        if let Some(pid) = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill9()
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
