//! Opening a store: take the data dir, replay the log into sled, rebuild the task table, and
//! settle what the previous process left: running tasks end as `failed` with a terminal status
//! event, retention is applied, and a checkpoint leaves a short log.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use taskstream_core::record::{self, Record};
use taskstream_core::{Millis, Seq};

use super::checkpoint::{self, Checkpoint};
use super::engine::{Engine, LiveTask, LiveTaskState};
use super::error::{AppendError, StoreError};
use super::events::EventTable;
use super::fsutil::{self, LockError};
use super::index::{index_error, Index};
use super::layout;
use super::model::{
    Durability, StoreConfig, TaskRecord, TaskStatus, REPAIR_FAILURE_MESSAGE,
    RESTART_FAILURE_MESSAGE,
};
use super::sync;
use super::wal::{self, Damage, Recovered, TornTail, Wal};

/// How [`open`] treats damage it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Refuse it ([`StoreError::Damaged`], [`StoreError::Wal`] with `WalError::Damaged`),
    /// changing nothing.
    Refuse,
    /// Keep every valid record, skip what is damaged, end every running task `failed` after
    /// every seq it may have used, and report it (`taskstream repair`).
    Repair,
}

/// What the log and the checkpoint record say the index must hold, checked after the replay.
struct Expected {
    checkpoint: Option<Checkpoint>,
    /// Tasks the replayed log removed.
    removed: HashSet<String>,
    /// The LSN of each task's last record replayed (from the checkpoint on).
    last_lsn: HashMap<String, u64>,
    /// The index directory in use.
    index_dir: PathBuf,
}

/// The least bytes an event record of a task with an id of `id_len` bytes takes: the frame,
/// the id, a five-byte type, a two-byte payload, and a byte each for the variant, the lengths,
/// the seq and the time.
fn min_event_record(id_len: usize) -> u64 {
    (record::OVERHEAD_BYTES + id_len + 5 + 2 + 5) as u64
}

/// The log a repair assumes lost when the log since the checkpoint is missing altogether: more
/// than a segment holds (a checkpoint is due after 64 MiB).
const UNKNOWN_HOLE_BYTES: u64 = 256 << 20;

/// How many seqs past its last recovered one a task with id `id` may have used in the damaged
/// stretches `damage`, when its last record replayed is at LSN `last` (`None`: none was). A
/// task's seqs rise with the log, so only the stretches after its last record can hold seqs
/// past it; one before that record holds none the task still could issue, and moving the
/// task's next seq past it would only leave empty seqs (which count toward the retention
/// limit, pushing retained events out).
fn seqs_in(damage: &[wal::Damage], id: &str, last: Option<u64>) -> u64 {
    damage
        .iter()
        .filter(|d| {
            let at = wal::segment_start(&d.segment).map_or(u64::MAX, |s| s + d.offset);
            last.is_none_or(|last| at > last)
        })
        .fold(0u64, |n, d| {
            let bytes = d.bytes.unwrap_or(UNKNOWN_HOLE_BYTES);
            n.saturating_add(bytes / min_event_record(id.len()) + 1)
        })
}

/// What opening the store found and did; the server logs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log records replayed into sled.
    pub replayed_records: u64,
    /// The torn or corrupt tail cut off the log, if any (expected after a crash mid-write).
    pub torn_tail: Option<TornTail>,
    /// Bytes of log cut off (the torn tail and any segment that did not follow on).
    pub discarded_bytes: u64,
    /// Whether log segments between the last checkpoint and the first remaining segment were
    /// missing (data written in that span is lost).
    pub wal_gap: bool,
    /// Index directories other than the one in use, deleted: what an index rebuild that was
    /// interrupted left (a half-built new one, or the old one it had switched away from).
    pub stale_index_dirs: usize,
    /// Tasks recovered.
    pub tasks: usize,
    /// Tasks that were running when the previous process stopped; each now ends as `failed`
    /// with a terminal status event.
    pub failed_tasks: Vec<String>,
    /// What is wrong with the data dir's files but harmless to go on with (loose modes that
    /// were repaired, a data dir others may write to, files of another owner); the server
    /// logs each.
    pub warnings: Vec<String>,
    /// What a repair found damaged and went past (empty after a plain open, which
    /// refuses damage instead).
    pub repairs: Vec<String>,
    /// The damaged stretches of log a repair skipped.
    pub damage: Vec<Damage>,
    /// Tasks the last checkpoint listed that a repair found the index no longer has: lost.
    pub lost_tasks: Vec<String>,
}

/// An opened store's parts, from which the crate root makes the store.
pub(crate) struct Opened {
    pub(crate) config: StoreConfig,
    pub(crate) engine: Arc<Engine>,
    pub(crate) checkpointer: Option<std::thread::JoinHandle<()>>,
    pub(crate) flusher: Option<std::thread::JoinHandle<()>>,
    pub(crate) applier: Option<std::thread::JoinHandle<()>>,
    pub(crate) report: RecoveryReport,
    /// The data dir lock, held for the life of the store.
    pub(crate) lock: Option<std::fs::File>,
}

pub(crate) fn open(config: StoreConfig, now: Millis, mode: Mode) -> Result<Opened, StoreError> {
    let repair = mode == Mode::Repair;
    let mut report = RecoveryReport::default();
    let (index, wal, on_disk, lock, recovered, expected) = match &config.data_dir {
        None => (
            Index::open(None, config.index_cache_bytes, None)?,
            None,
            None,
            None,
            Recovered::default(),
            None,
        ),
        Some(dir) => {
            fsutil::restrict_umask();
            fsutil::create_private_dir(dir).map_err(StoreError::io("creating", dir))?;
            let lock = match fsutil::lock_file(&dir.join("LOCK")) {
                Ok(file) => file,
                Err(LockError::Held) => return Err(StoreError::Locked { dir: dir.clone() }),
                Err(LockError::Io(e)) => {
                    return Err(StoreError::io("locking", &dir.join("LOCK"))(e));
                }
            };
            fsutil::check_data_dir(dir, &mut report.warnings)
                .map_err(StoreError::io("checking the modes in", dir))?;
            let sync = config.durability != Durability::None;
            let (generation, stale) = layout::open(dir, sync)?;
            report.stale_index_dirs = stale;
            let wal_dir = dir.join("wal");
            let saved = match checkpoint::read(dir) {
                Ok(c) => c,
                Err(e) if repair && e.is_damage() => {
                    report
                        .repairs
                        .push(format!("{e}; the index was not checked"));
                    None
                }
                Err(e) => return Err(e),
            };
            let files = wal::SegmentFiles::new();
            let table = Arc::new(EventTable::new(Arc::clone(&files)));
            let index = match open_index(&generation.dir, config.index_cache_bytes, &table) {
                Ok(index) => index,
                // An I/O error (a full disk, a failing device) is not damage.
                Err(e) if e.is_io() => return Err(e),
                // With no checkpoint record, no checkpoint has relied on the index: it holds
                // nothing the log does not (the log is replayed from its start, and recovery
                // refuses if that start is gone). sled writes its `conf` unsynced when it
                // creates an index, so a power loss at a data dir's first open can leave one
                // that does not open: that is no damage, and the index is built anew.
                Err(e) if repair || saved.is_none() => {
                    let aside = set_aside(dir, &generation.dir)?;
                    let what = format!(
                        "the index could not be opened ({e}); it was moved to {} and a new one \
                         built from the log",
                        aside.display()
                    );
                    if repair {
                        report.repairs.push(what);
                    } else {
                        report.warnings.push(format!(
                            "{what} (no checkpoint had relied on it, so nothing is lost)"
                        ));
                    }
                    open_index(&generation.dir, config.index_cache_bytes, &table)?
                }
                Err(e) => {
                    return Err(StoreError::damaged(
                        dir,
                        format!(
                            "the index in {} cannot be opened ({e})",
                            generation.dir.display()
                        ),
                    ))
                }
            };
            let mut checkpoint = index.checkpoint()?;
            if saved.is_none() && checkpoint > 0 {
                report.warnings.push(format!(
                    "the checkpoint record {} is missing, so the index could not be checked \
                     (a new one is written now)",
                    dir.join(checkpoint::FILE).display()
                ));
            }
            if let Some(saved) = &saved {
                if checkpoint < saved.lsn && repair {
                    report.repairs.push(format!(
                        "the index in {} was older than its last checkpoint (at log position \
                         {checkpoint}, the checkpoint record says {}); it was brought up to date \
                         from the log that is left",
                        generation.dir.display(),
                        saved.lsn
                    ));
                }
                if checkpoint < saved.lsn && !repair {
                    return Err(StoreError::damaged(
                        dir,
                        format!(
                            "the index in {} is older than its last checkpoint (it is at log \
                             position {checkpoint}, the checkpoint record {} says {}): it lost \
                             data",
                            generation.dir.display(),
                            dir.join(checkpoint::FILE).display(),
                            saved.lsn
                        ),
                    ));
                }
                // Replaying from the record's LSN covers a crash between a checkpoint's index
                // flush and its record (every record is a blind write).
                checkpoint = checkpoint.min(saved.lsn);
            }
            fsutil::create_private_dir(&wal_dir).map_err(StoreError::io("creating", &wal_dir))?;
            let mut removed = HashSet::new();
            let mut last_lsn = HashMap::new();
            let recovered = wal::recover(
                &**files.storage(),
                &wal_dir,
                checkpoint,
                sync,
                repair,
                |rec, raw, lsn, archived| {
                    if archived {
                        index.replay_archived(rec, raw, lsn);
                        return Ok(());
                    }
                    if let Record::Remove { task_id } = rec {
                        removed.insert((*task_id).to_owned());
                    }
                    if repair {
                        last_lsn.insert(rec.task_id().to_owned(), lsn);
                    }
                    index.replay(rec, raw, lsn)
                },
            )
            .map_err(|e| match e {
                StoreError::Wal(wal::WalError::Damaged(d)) => damage_with_cause(dir, &d),
                e => e,
            })?;
            index.settle_events()?;
            files.load(&wal_dir)?;
            let wal = Wal::open(&wal_dir, config.durability, recovered.end, files)?;
            migrate_legacy_events(&index, &wal, &mut report)?;
            if !recovered.damage.is_empty() {
                // The repair's retained events in damaged segments move out of them, so the
                // checkpoint below deletes those and no later open meets the damage again.
                let damaged: std::collections::BTreeSet<u64> = recovered
                    .damage
                    .iter()
                    .filter_map(|d| wal::segment_start(&d.segment))
                    .collect();
                if let Some(table) = index.table() {
                    table.relocate(
                        &damaged,
                        |bytes| wal.submit(bytes, false).map_err(StoreError::Wal),
                        || wal.flush_through(wal.submitted()).map_err(StoreError::Wal),
                    )?;
                }
            }
            let index_dir = generation.dir.clone();
            (
                index,
                Some(wal),
                Some((dir.clone(), generation)),
                Some(lock),
                recovered,
                Some(Expected {
                    checkpoint: saved,
                    removed,
                    last_lsn,
                    index_dir,
                }),
            )
        }
    };
    let mut holes = Vec::new();
    let tasks = load_tasks(&index, &mut holes)?;
    let mut unexplained = Vec::new();
    for (id, n) in holes {
        if !index.has_hole(&id)? {
            unexplained.push(format!("{id} ({n} events)"));
            if repair {
                index.mark_hole(&id)?;
            }
        }
    }
    if !unexplained.is_empty() {
        unexplained.sort();
        let what = format!(
            "the index{} lost events: {} task(s) are missing some of their retained events, \
             e.g. {}",
            expected
                .as_ref()
                .map(|e| format!(" in {}", e.index_dir.display()))
                .unwrap_or_default(),
            unexplained.len(),
            unexplained[0]
        );
        match &config.data_dir {
            Some(dir) if !repair => return Err(StoreError::damaged(dir, what)),
            _ => report.repairs.push(what),
        }
    }
    // Tasks the index lost, and the seq each running one must end after.
    let mut floors: HashMap<String, u64> = HashMap::new();
    if let (Some(expected), Some(dir)) = (&expected, &config.data_dir) {
        if let Some(saved) = &expected.checkpoint {
            let mut missing = Vec::new();
            let mut short = Vec::new();
            for (id, want) in &saved.tasks {
                if expected.removed.contains(id) {
                    continue;
                }
                match tasks.get(id) {
                    None => missing.push(id.clone()),
                    Some(slot) => {
                        let have = sync::lock(&slot.state).next.get();
                        if have < *want {
                            short.push(format!("{id} (seq {have} of {want})"));
                            // The one append under way at the checkpoint may have used `want`.
                            floors.insert(id.clone(), want.saturating_add(1));
                        }
                    }
                }
            }
            missing.sort();
            short.sort();
            if !missing.is_empty() || !short.is_empty() {
                let what = format!(
                    "the index in {} lost data its last checkpoint held: {} task(s) are missing{}{} \
                     and {} have fewer events{}{}",
                    expected.index_dir.display(),
                    missing.len(),
                    if missing.is_empty() { "" } else { ", e.g. " },
                    missing.first().map_or("", String::as_str),
                    short.len(),
                    if short.is_empty() { "" } else { ", e.g. " },
                    short.first().map_or("", String::as_str),
                );
                if !repair {
                    return Err(StoreError::damaged(dir, what));
                }
                report.repairs.push(what);
                report.lost_tasks = missing;
            }
        }
    }
    report.replayed_records = recovered.records;
    report.torn_tail = recovered.torn.clone();
    report.discarded_bytes = recovered.discarded_bytes;
    report.wal_gap = recovered.gap;
    report.tasks = tasks.len();
    for d in &recovered.damage {
        report.repairs.push(format!("skipped damaged log: {d}"));
    }
    report.damage = recovered.damage.clone();
    let running: Vec<String> = tasks
        .iter()
        .filter(|(_, slot)| slot_is_running(slot))
        .map(|(id, _)| id.clone())
        .collect();
    if repair {
        // Every seq a running task may have used in what was lost stays unused: its terminal
        // event comes after all of them (EV-08: no seq ever names two events).
        for id in &running {
            let Some(slot) = tasks.get(id) else { continue };
            let mut st = sync::lock(&slot.state);
            let last = expected.as_ref().and_then(|e| e.last_lsn.get(id).copied());
            let lost = seqs_in(&recovered.damage, id, last);
            let floor = floors.get(id).copied().unwrap_or(0);
            let target = st.next.get().max(floor).saturating_add(lost);
            let target = Seq::new(target).unwrap_or(Seq::MAX);
            if st.next < target {
                index.mark_hole(id)?;
            }
            while st.next < target {
                st.push_size(0);
                st.next = st.next.next().unwrap_or(Seq::MAX);
                if st.next == Seq::MAX {
                    break;
                }
            }
        }
    }
    let engine = Arc::new(Engine::new(&config, index, wal, on_disk, tasks));
    engine.enforce_count_limits()?;
    let message = if repair && !report.repairs.is_empty() {
        REPAIR_FAILURE_MESSAGE
    } else {
        RESTART_FAILURE_MESSAGE
    };
    for id in running {
        engine
            .finish(
                &id,
                TaskStatus::Failed,
                Some(message.to_owned()),
                None,
                None,
                now,
            )
            .map_err(|e| match e {
                AppendError::Storage(e) => e,
                other => StoreError::Corrupt(format!("failing task {id:?}: {other:?}")),
            })?;
        report.failed_tasks.push(id);
    }
    report.failed_tasks.sort();
    engine.sweep(now);
    engine.checkpoint()?;
    let checkpointer = if engine.wal.is_some() {
        let engine = Arc::clone(&engine);
        Some(
            std::thread::Builder::new()
                .name("taskstream-checkpoint".to_owned())
                .spawn(move || engine.run_checkpointer())
                .map_err(|e| StoreError::Io {
                    context: "starting the checkpoint thread for",
                    path: config.data_dir.clone().unwrap_or_default(),
                    source: e,
                })?,
        )
    } else {
        None
    };
    let flusher = if config.durability != Durability::Event && engine.wal.is_some() {
        let engine = Arc::clone(&engine);
        Some(
            std::thread::Builder::new()
                .name("taskstream-flush".to_owned())
                .spawn(move || engine.run_flusher())
                .map_err(|e| StoreError::Io {
                    context: "starting the flush thread for",
                    path: config.data_dir.clone().unwrap_or_default(),
                    source: e,
                })?,
        )
    } else {
        None
    };
    let applier = if config.durability != Durability::Event && engine.wal.is_some() {
        let engine = Arc::clone(&engine);
        Some(
            std::thread::Builder::new()
                .name("taskstream-apply".to_owned())
                .spawn(move || engine.run_applier())
                .map_err(|e| StoreError::Io {
                    context: "starting the apply thread for",
                    path: config.data_dir.clone().unwrap_or_default(),
                    source: e,
                })?,
        )
    } else {
        None
    };
    Ok(Opened {
        config,
        engine,
        checkpointer,
        flusher,
        applier,
        report,
        lock,
    })
}

/// Opens the index in `dir`, creating the directory if needed, with its events in `table`.
fn open_index(dir: &Path, cache_bytes: u64, table: &Arc<EventTable>) -> Result<Index, StoreError> {
    fsutil::create_private_dir(dir).map_err(StoreError::io("creating", dir))?;
    Index::open(Some(dir), cache_bytes, Some(Arc::clone(table)))
}

/// Moves the events of a data dir written by a version that kept them in sled into the log:
/// each record is logged again as it is (it is an `Event` record already) and placed there,
/// the log is made durable, and only then is sled's copy deleted. A crash before that leaves
/// both, and the next open moves them again (the later place of an event wins; the records
/// are the same).
fn migrate_legacy_events(
    index: &Index,
    wal: &Wal,
    report: &mut RecoveryReport,
) -> Result<(), StoreError> {
    let Some(legacy) = index.legacy_events() else {
        return Ok(());
    };
    let mut moved = 0u64;
    let mut keys = Vec::new();
    for item in legacy.entries() {
        let (key, raw) = item.map_err(|e| index_error("reading the old events of", e))?;
        let (rec, _) = record::decode(&raw).map_err(StoreError::Record)?;
        let lsn = wal.submit(&raw, false).map_err(StoreError::Wal)?;
        index.apply(&rec, &raw, lsn)?;
        keys.push(key);
        moved += 1;
    }
    if moved == 0 {
        return Ok(());
    }
    wal.flush_through(wal.submitted())
        .map_err(StoreError::Wal)?;
    legacy
        .remove_all(keys)
        .map_err(|e| index_error("deleting the old events of", e))?;
    report.warnings.push(format!(
        "moved {moved} event(s) from the index into the log, where this version keeps them"
    ));
    Ok(())
}

/// Moves a damaged index directory out of the way (to `damaged-index.<n>` in the data dir,
/// for the operator to inspect or delete); returns where it went.
fn set_aside(data_dir: &Path, index_dir: &Path) -> Result<PathBuf, StoreError> {
    let mut n = 0u32;
    loop {
        let aside = data_dir.join(format!("damaged-index.{n}"));
        if !aside.exists() {
            std::fs::rename(index_dir, &aside).map_err(StoreError::io("renaming", index_dir))?;
            return Ok(aside);
        }
        n += 1;
    }
}

/// The refusal for log damage found while the index says where the log must start: whether
/// the log or the index lost data, the operator's choices are the same.
fn damage_with_cause(data_dir: &Path, d: &wal::Damage) -> StoreError {
    StoreError::damaged(
        data_dir,
        format!(
            "the write-ahead log is damaged: {d}; this is not a torn write: records that were \
             durable are lost, and starting would re-use their seqs"
        ),
    )
}

/// The sizes (type plus payload bytes) of the events `earliest .. next` of a task, for the
/// store-wide budget; a seq with no stored event counts 0.
fn event_sizes(
    index: &Index,
    id: &str,
    earliest: Seq,
    next: Seq,
    missing: &mut u64,
) -> Result<VecDeque<u32>, StoreError> {
    let mut sizes = VecDeque::new();
    let mut expected = earliest;
    for raw in index.events(id, earliest, next, usize::MAX) {
        let raw = raw?;
        let (rec, _) = record::decode_written(&raw).map_err(StoreError::Record)?;
        let Some(ev) = rec.event() else {
            return Err(StoreError::Corrupt(format!("an event of task {id:?}")));
        };
        while expected < ev.seq {
            sizes.push_back(0);
            *missing += 1;
            expected = expected.next().unwrap_or(Seq::MAX);
        }
        let size = ev.event_type.len() + ev.payload.len();
        sizes.push_back(u32::try_from(size).unwrap_or(u32::MAX));
        expected = ev.seq.next().unwrap_or(Seq::MAX);
    }
    while expected < next {
        sizes.push_back(0);
        *missing += 1;
        expected = expected.next().unwrap_or(Seq::MAX);
    }
    Ok(sizes)
}

fn slot_is_running(slot: &Arc<LiveTask>) -> bool {
    let st = sync::lock(&slot.state);
    !st.record.status.is_terminal()
}

/// Rebuilds the task table from sled: each task's record, earliest and next seq. `holes` gets
/// every task whose retained seqs (from its retention floor to its next seq) are not all
/// stored, with how many are missing: the store never leaves such a hole itself (a truncation
/// deletes below the floor it sets), so it is lost data unless a repair left it.
fn load_tasks(
    index: &Index,
    holes: &mut Vec<(String, u64)>,
) -> Result<HashMap<String, Arc<LiveTask>>, StoreError> {
    let mut tasks = HashMap::new();
    for item in index.tasks() {
        let (id, json) = item?;
        let record: TaskRecord = serde_json::from_slice(&json)
            .map_err(|e| StoreError::Corrupt(format!("record of task {id:?}: {e}")))?;
        let floor = index.floor(&id)?;
        let mut missing = 0;
        let (earliest, next) = match index.bounds(&id)? {
            // Every event aged out (the floor is then past the last one).
            None => (floor, floor),
            Some((first, last)) => {
                // 2^53 events cannot be reached; saturate rather than refuse to open.
                let next = last.next().unwrap_or(Seq::MAX).max(floor);
                missing += first.distance_from(floor);
                (first.max(floor), next)
            }
        };
        let sizes = event_sizes(index, &id, earliest, next, &mut missing)?;
        if missing > 0 {
            holes.push((id.clone(), missing));
        }
        let bytes = sizes.iter().copied().map(u64::from).sum();
        let empty = sizes.iter().filter(|s| **s == 0).count() as u64;
        tasks.insert(
            id,
            LiveTask::new(LiveTaskState {
                record,
                earliest,
                next,
                visible: true,
                removed: false,
                cache: None,
                unapplied: VecDeque::new(),
                ahead: None,
                sizes,
                bytes,
                empty,
                record_bytes: super::model::TASK_OVERHEAD_BYTES + json.len() as u64,
            }),
        );
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests;
