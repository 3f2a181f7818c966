//! The simulation test: the real log over the simulated disk (`storage::sim`), through rounds
//! of appends, faults, retention and power losses, checking the log's promise after each.
//!
//! A run is a function of its seed. Each round opens the log as the store does (read the
//! checkpoint record, [`recover`] from it, [`Wal::open`] at the end), checks it, arms faults
//! (crash the disk after N changing operations; fail the Nth write or sync with EIO or ENOSPC),
//! appends events of many tasks (single-threaded rounds interleave tasks, deferred submissions
//! and flushes as the seed says, so they replay exactly; threaded rounds run concurrent
//! appenders on the group commit, and replay their workload but not their interleaving),
//! sometimes runs retention (rotate, write the checkpoint record, delete the segments before
//! it), then cuts the power (or, one round in four, kills only the process: its unsynced
//! writes stay, for a later power loss to take). Checked after every restart:
//! - the log starts: losing only unsynced data is never damage (`group` and `event` mode);
//! - every acknowledged event not yet dropped by retention is there, at its seq, with its
//!   payload (W3: acknowledged means durable);
//! - no seq is issued twice: a task's next seq after a restart is past every acknowledged one;
//! - damage to synced data (a flipped byte in a record that valid records follow) is refused
//!   with [`WalError::Damaged`] naming the segment file, and changes nothing.
//!
//! The simulation has teeth: with `Wal::rotate`'s fix reverted (`durable` moved before the
//! segment's sync, a failed sync not setting the log's failure state), seeds 376, 1086 and
//! 1353 fail with acknowledged events lost; without W6's sync at open, seed 14 fails to start.
//!
//! `TASKSTREAM_SIM_RUNS` sets the number of seeds (default [`DEFAULT_RUNS`]);
//! `TASKSTREAM_SIM_SEED` runs one seed, to replay a failure.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use taskstream_core::record::{EventRecord, Record};
use taskstream_core::{Millis, Seq};

use super::*;
use crate::frame::encode_into;
use crate::storage::sim::{Rng, SimStorage, EIO, ENOSPC};

/// Seeds run by `cargo test` (about half a minute in a debug build).
const DEFAULT_RUNS: u64 = 2000;

fn event_bytes(task: &str, seq: u64, payload: &[u8]) -> Vec<u8> {
    let rec = Record::Event(EventRecord {
        task_id: task,
        seq: Seq::new(seq).expect("seq"),
        at: Millis(seq),
        event_type: "dev.taskstream.sim",
        payload,
    });
    let mut out = Vec::new();
    encode_into(&rec, &mut out).expect("encodes");
    out
}

/// An acknowledged event: its task, seq, payload and LSN.
#[derive(Clone, Debug)]
struct Acked {
    task: String,
    seq: u64,
    payload: Vec<u8>,
    lsn: u64,
}

/// What the test knows: the events acknowledged and not yet dropped by retention, and every
/// task's highest acknowledged seq ever.
#[derive(Default)]
struct Model {
    acked: Vec<Acked>,
    highest: HashMap<String, u64>,
}

impl Model {
    fn ack(&mut self, a: Acked) {
        let h = self.highest.entry(a.task.clone()).or_insert(0);
        *h = (*h).max(a.seq);
        self.acked.push(a);
    }
}

/// The checkpoint record of the simulation: the LSN and every task's next seq.
fn encode_checkpoint(lsn: u64, next: &BTreeMap<String, u64>) -> Vec<u8> {
    let mut s = format!("{lsn}\n");
    for (t, n) in next {
        s.push_str(&format!("{t} {n}\n"));
    }
    s.push_str("end\n");
    s.into_bytes()
}

fn decode_checkpoint(bytes: &[u8]) -> Option<(u64, BTreeMap<String, u64>)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    let lsn = lines.next()?.parse().ok()?;
    let mut next = BTreeMap::new();
    for line in lines {
        if line == "end" {
            return Some((lsn, next));
        }
        let (t, n) = line.split_once(' ')?;
        next.insert(t.to_owned(), n.parse().ok()?);
    }
    None
}

const DATA: &str = "/sim";

fn wal_dir() -> PathBuf {
    Path::new(DATA).join("wal")
}

/// One record found by recovery.
struct Found {
    task: String,
    seq: u64,
    payload: Vec<u8>,
    lsn: u64,
}

/// What [`open`] found: the records, every task's next seq, the checkpoint, the recovery.
type Opened = (Vec<Found>, BTreeMap<String, u64>, u64, Recovered);

/// Opens the log on `disk` as the store does; returns the records, every task's next seq and
/// the recovery's report.
fn open(disk: &SimStorage) -> Result<Opened, String> {
    let ckpt_path = Path::new(DATA).join("CHECKPOINT");
    let (checkpoint, mut next) = match disk.contents(&ckpt_path) {
        None => (0, BTreeMap::new()),
        Some(bytes) => decode_checkpoint(&bytes)
            .ok_or_else(|| format!("the checkpoint record is damaged: {bytes:?}"))?,
    };
    let mut found = Vec::new();
    let recovered = recover::<WalError>(
        disk,
        &wal_dir(),
        checkpoint,
        true,
        false,
        |rec, _raw, lsn, _archived| {
            let ev = rec.event().expect("only events are written");
            found.push(Found {
                task: ev.task_id.to_owned(),
                seq: ev.seq.get(),
                payload: ev.payload.to_vec(),
                lsn,
            });
            Ok(())
        },
    )
    .map_err(|e| e.to_string())?;
    for f in &found {
        let n = next.entry(f.task.clone()).or_insert(0);
        *n = (*n).max(f.seq + 1);
    }
    Ok((found, next, checkpoint, recovered))
}

/// Checks the promise against what recovery found.
fn check(model: &Model, found: &[Found], next: &BTreeMap<String, u64>) -> Result<(), String> {
    let by_key: HashMap<(&str, u64), &Found> = found
        .iter()
        .map(|f| ((f.task.as_str(), f.seq), f))
        .collect();
    for a in &model.acked {
        match by_key.get(&(a.task.as_str(), a.seq)) {
            None => {
                return Err(format!(
                    "acknowledged event {} #{} (LSN {}) is lost",
                    a.task, a.seq, a.lsn
                ))
            }
            Some(f) if f.payload != a.payload || f.lsn != a.lsn => {
                return Err(format!(
                    "acknowledged event {} #{} changed (LSN {} -> {})",
                    a.task, a.seq, a.lsn, f.lsn
                ))
            }
            Some(_) => {}
        }
    }
    for (task, h) in &model.highest {
        let n = next.get(task).copied().unwrap_or(0);
        if n <= *h {
            return Err(format!(
                "task {task} would reissue seq {n} (acknowledged up to {h})"
            ));
        }
    }
    Ok(())
}

/// Flips a byte of a durable record that a valid record follows in the same segment; expects
/// recovery to refuse, naming the file, and then puts the byte back.
fn check_damage_refused(disk: &SimStorage, rng: &mut Rng, found: &[Found]) -> Result<(), String> {
    let files = SegmentFiles::on(Arc::new(disk.clone()));
    files.load(&wal_dir()).map_err(|e| e.to_string())?;
    let starts = files.starts();
    let segment_of = |lsn: u64| starts.iter().rev().find(|s| **s <= lsn).copied();
    // Synced log: below the synced-through mark (W7), or in any segment but the last (W6).
    let mark = read_mark(disk, &wal_dir()).map_err(|e| e.to_string())?;
    let last = starts.last().copied();
    let candidates: Vec<(u64, u64)> = found
        .windows(2)
        .filter(|w| segment_of(w[0].lsn) == segment_of(w[1].lsn) && w[1].lsn > w[0].lsn)
        .filter(|w| w[1].lsn <= mark || segment_of(w[0].lsn) != last)
        .filter_map(|w| Some((segment_of(w[0].lsn)?, w[0].lsn)))
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    let (start, lsn) = candidates[usize::try_from(rng.below(candidates.len() as u64)).unwrap_or(0)];
    let path = segment_path(&wal_dir(), start);
    let offset = lsn - start + 8;
    if !disk.flip(&path, offset, 0x5a) {
        return Ok(());
    }
    let outcome = open(disk);
    disk.flip(&path, offset, 0x5a);
    match outcome {
        Err(e) if e.contains(&path.display().to_string()) && e.contains("damaged") => Ok(()),
        Err(e) => Err(format!(
            "damage at {} offset {offset} refused without naming the file: {e}",
            path.display()
        )),
        Ok(_) => Err(format!(
            "damage at {} offset {offset} (valid records follow) was not refused",
            path.display()
        )),
    }
}

/// One simulated life of a log; `Err` says what broke. With `holes`, a file's unsynced writes
/// may reach the disk in any order, torn with holes; without, in order, the last one torn to a
/// prefix.
fn run(seed: u64, holes: bool) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let mut disk = SimStorage::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5151);
    disk.in_order(!holes);
    disk.sector_holes(holes);
    let mode = if rng.one_in(2) {
        Durability::Group
    } else {
        Durability::Event
    };
    let mut model = Model::default();
    let tasks: Vec<String> = (0..1 + rng.below(12)).map(|i| format!("t{i}")).collect();
    let rounds = 2 + rng.below(4);
    for round in 0..=rounds {
        let (found, next, _checkpoint, recovered) = open(&disk).map_err(|e| {
            format!("round {round}: the log does not start after a power loss: {e}")
        })?;
        check(&model, &found, &next).map_err(|e| format!("round {round}: {e}"))?;
        if rng.one_in(4) {
            check_damage_refused(&disk, &mut rng, &found)
                .map_err(|e| format!("round {round}: {e}"))?;
        }
        if round == rounds {
            return Ok(());
        }
        let files = SegmentFiles::on(Arc::new(disk.clone()));
        files
            .load(&wal_dir())
            .map_err(|e| format!("round {round}: loading: {e}"))?;
        let wal = match Wal::open(&wal_dir(), mode, recovered.end, files) {
            Ok(wal) => Arc::new(wal),
            Err(e) => return Err(format!("round {round}: opening the log: {e}")),
        };
        // Faults for this round.
        match rng.below(4) {
            0 => disk.crash_after(rng.below(120)),
            1 => disk.fail_sync(1 + rng.below(30), if rng.one_in(2) { EIO } else { ENOSPC }),
            2 => disk.fail_write(1 + rng.below(60), if rng.one_in(2) { EIO } else { ENOSPC }),
            _ => {}
        }
        let next = Arc::new(Mutex::new(next));
        let threads = if mode == Durability::Group && rng.one_in(3) {
            2 + rng.below(3)
        } else {
            1
        };
        let steps = 5 + rng.below(60);
        if threads == 1 {
            single(&wal, &disk, &mut rng, &tasks, &next, &mut model, steps);
        } else {
            concurrent(&wal, &mut rng, &tasks, &next, &mut model, threads, steps);
        }
        drop(wal);
        // Mostly a power loss; sometimes only the process dies, and the next power loss may
        // take what it wrote and never synced.
        disk = if rng.one_in(4) {
            disk.kill()
        } else {
            disk.power_loss()
        };
    }
    Ok(())
}

/// A round on one thread: deferred submissions, waits, flushes and retention in the order the
/// seed says. A failed call acknowledges nothing, and the round goes on calling, as an engine
/// that did not stop would: whatever the log reports durable after a failure must be.
fn single(
    wal: &Wal,
    disk: &SimStorage,
    rng: &mut Rng,
    tasks: &[String],
    next: &Mutex<BTreeMap<String, u64>>,
    model: &mut Model,
    steps: u64,
) {
    let mut deferred: Vec<Acked> = Vec::new();
    for _ in 0..steps {
        match rng.below(10) {
            0..=5 => {
                let task = &tasks[usize::try_from(rng.below(tasks.len() as u64)).unwrap_or(0)];
                let seq = {
                    let mut next = lock(next);
                    let n = next.entry(task.clone()).or_insert(0);
                    *n += 1;
                    *n - 1
                };
                let pad = "x".repeat(usize::try_from(rng.below(3000)).unwrap_or(0));
                let payload = format!("{{\"p\":{},\"pad\":\"{pad}\"}}", rng.next());
                let bytes = event_bytes(task, seq, payload.as_bytes());
                let wait = rng.one_in(3);
                let submitted = if wait {
                    wal.submit(&bytes, true)
                } else {
                    wal.submit_deferred(&bytes)
                };
                let Ok(lsn) = submitted else { continue };
                let a = Acked {
                    task: task.clone(),
                    seq,
                    payload: payload.into_bytes(),
                    lsn,
                };
                if wait {
                    // Everything submitted before it is durable too (W3).
                    for d in deferred.drain(..) {
                        model.ack(d);
                    }
                    model.ack(a);
                } else {
                    deferred.push(a);
                }
            }
            6..=7 => {
                if wal.flush_through(wal.submitted()).is_err() {
                    continue;
                }
                for d in deferred.drain(..) {
                    model.ack(d);
                }
            }
            _ => {
                // Retention: rotate, record the checkpoint, delete the segments before it.
                let Ok(lsn) = wal.rotate() else { continue };
                for d in deferred.drain(..) {
                    model.ack(d);
                }
                let record = encode_checkpoint(lsn, &lock(next));
                let data = Path::new(DATA);
                // From here the events before `lsn` may be gone: retention dropped them.
                model.acked.retain(|a| a.lsn >= lsn);
                if crate::storage::replace(
                    disk,
                    data,
                    &data.join("CHECKPOINT.tmp"),
                    &data.join("CHECKPOINT"),
                    &record,
                    true,
                )
                .is_err()
                {
                    continue;
                }
                // A failure leaves segments behind: they are archived, harmless.
                let _ = wal.delete_before(lsn, &BTreeSet::new());
            }
        }
    }
}

/// A round of concurrent appenders on the group commit: each owns some tasks and submits with
/// waiting; an event is acknowledged when its submission returned.
fn concurrent(
    wal: &Arc<Wal>,
    rng: &mut Rng,
    tasks: &[String],
    next: &Arc<Mutex<BTreeMap<String, u64>>>,
    model: &mut Model,
    threads: u64,
    steps: u64,
) {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = Arc::clone(wal);
            let next = Arc::clone(next);
            let acked = Arc::clone(&acked);
            let mine: Vec<String> = tasks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u64 % threads == t)
                .map(|(_, s)| s.clone())
                .collect();
            let seed = rng.next();
            std::thread::spawn(move || {
                let mut rng = Rng::new(seed);
                if mine.is_empty() {
                    return;
                }
                for _ in 0..steps {
                    let task = &mine[usize::try_from(rng.below(mine.len() as u64)).unwrap_or(0)];
                    let seq = {
                        let mut next = lock(&next);
                        let n = next.entry(task.clone()).or_insert(0);
                        *n += 1;
                        *n - 1
                    };
                    let payload = format!("{{\"c\":{}}}", rng.next());
                    let bytes = event_bytes(task, seq, payload.as_bytes());
                    let Ok(lsn) = wal.submit(&bytes, true) else {
                        return;
                    };
                    lock(&acked).push(Acked {
                        task: task.clone(),
                        seq,
                        payload: payload.into_bytes(),
                        lsn,
                    });
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("appender");
    }
    for a in lock(&acked).drain(..) {
        model.ack(a);
    }
}

fn runs() -> (u64, u64) {
    if let Some(seed) = std::env::var("TASKSTREAM_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return (seed, 1);
    }
    let runs = std::env::var("TASKSTREAM_SIM_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_RUNS);
    (0, runs)
}

/// Runs the seeds, three in four with holes in unsynced writes; panics naming the first
/// failures.
fn run_all() {
    let (first, n) = runs();
    let mut failures = Vec::new();
    for seed in first..first + n {
        if let Err(e) = run(seed, seed % 4 != 0) {
            failures.push(format!("seed {seed}: {e}"));
            if failures.len() >= 5 {
                break;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the simulated runs failed (replay one with TASKSTREAM_SIM_SEED):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn simulated_power_losses_and_faults_lose_no_acknowledged_event() {
    run_all();
}

#[test]
fn the_simulated_disk_keeps_only_what_was_synced_or_what_the_seed_keeps() {
    // Synced bytes and names always survive; unsynced ones survive in some seeds, not others.
    let mut kept_unsynced = 0;
    let mut dropped_unsynced = 0;
    for seed in 0..200 {
        let disk = SimStorage::new(seed);
        let dir = Path::new("/d");
        let f = disk.create(&dir.join("a")).expect("create");
        f.write_at(b"durable", 0).expect("write");
        f.sync_data().expect("sync");
        disk.sync_dir(dir).expect("sync dir");
        f.write_at(b"-unsynced", 7).expect("write");
        let after = disk.power_loss();
        let bytes = after
            .contents(&dir.join("a"))
            .expect("a synced name survives");
        assert!(bytes.starts_with(b"durable"), "seed {seed}: {bytes:?}");
        if bytes.len() > 7 {
            kept_unsynced += 1;
        } else {
            dropped_unsynced += 1;
        }
        assert!(f.write_at(b"x", 0).is_err(), "a dead process's file fails");
    }
    assert!(kept_unsynced > 0 && dropped_unsynced > 0);
}
