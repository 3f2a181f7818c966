//! A real PostgreSQL for the tests: `scripts/postgres` installs it when missing and runs a
//! throwaway cluster in a temp dir on a free port; the fixture stops it when dropped. Nothing
//! assumes a server is already running.

use std::path::PathBuf;
use std::process::Command;

/// Whether the PostgreSQL tests run (`TASKSTREAM_PG_TESTS=1`, as scripts/test sets it): they
/// start a cluster each, which needs the PostgreSQL packages (installed by the script, as
/// root) and a few seconds.
pub(crate) fn enabled() -> bool {
    let on = std::env::var_os("TASKSTREAM_PG_TESTS").is_some_and(|v| v == "1");
    if !on {
        eprintln!(
            "SKIP: set TASKSTREAM_PG_TESTS=1 to run the PostgreSQL tests (scripts/test does)"
        );
    }
    on
}

fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres"))
}

/// One throwaway cluster, stopped on drop.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    /// `postgres://taskstream@127.0.0.1:PORT` (no database).
    pub(crate) base: String,
}

fn run(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .expect("run scripts/postgres");
    assert!(
        out.status.success(),
        "scripts/postgres {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Cluster {
    /// Starts a fresh cluster.
    pub(crate) fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let pg = dir.path().join("pg");
        let url = run(&["start", pg.to_str().expect("utf-8 path")]);
        let base = url
            .strip_suffix("/postgres")
            .expect("the URL names database postgres")
            .to_owned();
        Cluster { dir, base }
    }

    fn pg(&self) -> String {
        self.dir.path().join("pg").display().to_string()
    }

    /// Creates database `name`; returns its URL.
    pub(crate) fn db(&self, name: &str) -> String {
        run(&["createdb", &self.pg(), name])
    }

    /// Runs SQL as the superuser on database `db`; returns its unaligned output.
    pub(crate) fn psql(&self, db: &str, sql: &str) -> String {
        run(&["psql", &self.pg(), sql, db])
    }

    /// Stops the server (fast shutdown) and starts it again on the same port.
    pub(crate) fn restart(&self) {
        run(&["restart", &self.pg()]);
    }

    /// Starts a stopped (or killed) server again on its port.
    pub(crate) fn resume(&self) {
        run(&["resume", &self.pg()]);
    }

    /// Stops the server at once (immediate shutdown), leaving it down.
    pub(crate) fn kill(&self) {
        run(&["kill", &self.pg()]);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["stop", &self.pg()])
            .output();
    }
}
