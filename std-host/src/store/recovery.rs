//! [`Store::open`]: take the data dir, replay the log into sled, rebuild the task table, and
//! settle what the previous process left: running tasks end as `failed` with a terminal status
//! event, retention is applied, and a checkpoint leaves a short log.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use taskstream_core::{record, Millis, Seq};

use super::engine::{Inner, Slot, SlotState};
use super::fsutil::{self, LockError};
use super::index::Index;
use super::layout;
use super::wal::{self, Recovered, Wal};
use super::{
    Durability, RecoveryReport, Store, StoreConfig, StoreError, TaskRecord, TaskStatus,
    RESTART_FAILURE_MESSAGE,
};

pub(crate) fn open(config: StoreConfig, now: Millis) -> Result<Store, StoreError> {
    let (index, wal, on_disk, lock, recovered, stale) = match &config.data_dir {
        None => (
            Index::open(None)?,
            None,
            None,
            None,
            Recovered::default(),
            0,
        ),
        Some(dir) => {
            fsutil::create_private_dir(dir).map_err(StoreError::io("creating", dir))?;
            let lock = match fsutil::lock_file(&dir.join("LOCK")) {
                Ok(file) => file,
                Err(LockError::Held) => return Err(StoreError::Locked { dir: dir.clone() }),
                Err(LockError::Io(e)) => {
                    return Err(StoreError::io("locking", &dir.join("LOCK"))(e));
                }
            };
            let sync = config.durability != Durability::None;
            let (generation, stale) = layout::open(dir, sync)?;
            let wal_dir = dir.join("wal");
            for d in [&generation.dir, &wal_dir] {
                fsutil::create_private_dir(d).map_err(StoreError::io("creating", d))?;
            }
            let index = Index::open(Some(&generation.dir))?;
            let checkpoint = index.checkpoint()?;
            let recovered = wal::recover(&wal_dir, checkpoint, sync, |rec, raw| {
                index.replay(rec, raw)
            })?;
            let wal = Wal::open(&wal_dir, config.durability, recovered.end)?;
            (
                index,
                Some(wal),
                Some((dir.clone(), generation)),
                Some(lock),
                recovered,
                stale,
            )
        }
    };
    let tasks = load_tasks(&index)?;
    let mut report = RecoveryReport {
        replayed_records: recovered.records,
        torn_tail: recovered.torn,
        discarded_bytes: recovered.discarded_bytes,
        wal_gap: recovered.gap,
        stale_index_dirs: stale,
        tasks: tasks.len(),
        failed_tasks: Vec::new(),
    };
    let running: Vec<String> = tasks
        .iter()
        .filter(|(_, slot)| slot_is_running(slot))
        .map(|(id, _)| id.clone())
        .collect();
    let inner = Arc::new(Inner::new(
        config.retention,
        config.durability,
        config.max_store_bytes,
        index,
        wal,
        on_disk,
        tasks,
    ));
    inner.enforce_count_limits()?;
    for id in running {
        inner
            .finish(
                &id,
                TaskStatus::Failed,
                Some(RESTART_FAILURE_MESSAGE.to_owned()),
                None,
                None,
                now,
            )
            .map_err(|e| match e {
                super::AppendError::Storage(e) => e,
                other => StoreError::Corrupt(format!("failing task {id:?}: {other:?}")),
            })?;
        report.failed_tasks.push(id);
    }
    report.failed_tasks.sort();
    inner.sweep(now);
    inner.checkpoint()?;
    let checkpointer = if inner.wal.is_some() {
        let inner = Arc::clone(&inner);
        Some(
            std::thread::Builder::new()
                .name("taskstream-checkpoint".to_owned())
                .spawn(move || inner.run_checkpointer())
                .map_err(|e| StoreError::Io {
                    context: "starting the checkpoint thread for",
                    path: config.data_dir.clone().unwrap_or_default(),
                    source: e,
                })?,
        )
    } else {
        None
    };
    Ok(Store {
        config,
        inner,
        checkpointer,
        report,
        _lock: lock,
    })
}

/// The sizes (type plus payload bytes) of the events `earliest .. next` of a task, for the
/// store-wide budget; a seq with no stored event counts 0.
fn event_sizes(
    index: &Index,
    id: &str,
    earliest: Seq,
    next: Seq,
) -> Result<VecDeque<u32>, StoreError> {
    let mut sizes = VecDeque::new();
    let mut expected = earliest;
    for raw in index.events(id, earliest, next) {
        let raw = raw?;
        let (rec, _) = record::decode_written(&raw).map_err(StoreError::Record)?;
        let Some(ev) = rec.event() else {
            return Err(StoreError::Corrupt(format!("an event of task {id:?}")));
        };
        while expected < ev.seq {
            sizes.push_back(0);
            expected = expected.next().unwrap_or(Seq::MAX);
        }
        let size = ev.event_type.len() + ev.payload.len();
        sizes.push_back(u32::try_from(size).unwrap_or(u32::MAX));
        expected = ev.seq.next().unwrap_or(Seq::MAX);
    }
    while expected < next {
        sizes.push_back(0);
        expected = expected.next().unwrap_or(Seq::MAX);
    }
    Ok(sizes)
}

fn slot_is_running(slot: &Arc<Slot>) -> bool {
    let st = super::lock(&slot.state);
    !st.record.status.is_terminal()
}

/// Rebuilds the task table from sled: each task's record, earliest and next seq.
fn load_tasks(index: &Index) -> Result<HashMap<String, Arc<Slot>>, StoreError> {
    let mut tasks = HashMap::new();
    for item in index.tasks() {
        let (id, json) = item?;
        let record: TaskRecord = serde_json::from_slice(&json)
            .map_err(|e| StoreError::Corrupt(format!("record of task {id:?}: {e}")))?;
        let floor = index.floor(&id)?;
        let (earliest, next) = match index.bounds(&id)? {
            None => (floor, floor),
            Some((first, last)) => {
                // 2^53 events cannot be reached; saturate rather than refuse to open.
                let next = last.next().unwrap_or(Seq::MAX).max(floor);
                (first.max(floor), next)
            }
        };
        let sizes = event_sizes(index, &id, earliest, next)?;
        let bytes = sizes.iter().copied().map(u64::from).sum();
        tasks.insert(
            id,
            Slot::new(SlotState {
                record,
                earliest,
                next,
                visible: true,
                removed: false,
                cache: None,
                sizes,
                bytes,
                record_bytes: super::TASK_OVERHEAD_BYTES + json.len() as u64,
            }),
        );
    }
    Ok(tasks)
}
