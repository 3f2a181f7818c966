//! A model test of `group` mode's pipeline and its applier: random interleavings of pipelined
//! and waited appends, flushes, applications to the index (by the applier thread or the
//! test), checkpoints, index rebuilds, sweeps, count truncations, crashes and clean restarts,
//! against a model of what each task was given. After every step what is visible is a prefix
//! of what was appended, byte for byte, and the index holds every visible event before the
//! task's first unapplied one (so each is in the index or the unapplied set); after a crash (the data dir as a killed
//! process leaves it: the log's file and sled's, without the log's unflushed buffer) every
//! event that was visible is still there, and what recovery keeps beyond it is what was
//! appended at those seqs.

use std::collections::BTreeMap;
use std::path::Path;

use taskstream_core::{Millis, RetentionPolicy, Seq};

use crate::sync::{lock, lock_read, lock_write};
use crate::{
    Durability, Store, StoreConfig, StoredEvent, TaskRecord, TaskStatus, TaskView,
    DEFAULT_INDEX_CACHE_BYTES, DEFAULT_MAX_STORE_BYTES, STATUS_EVENT_TYPE,
};

const TICK: &str = "dev.taskstream.tick";
/// Small, so that most appends also truncate.
const MAX_EVENTS: u32 = 6;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Opens the store; without `flusher`, stops its flusher, so that pipelined appends wait
/// for a drain by a waiting append, a checkpoint, a sweep or the test (longer windows);
/// without `applier`, stops its applier likewise, so that published appends stay out of the
/// index until a checkpoint, a sweep, a rebuild or the test applies them.
fn open(dir: &Path, flusher: bool, applier: bool, durability: Durability) -> Store {
    let mut store = Store::open(
        StoreConfig {
            data_dir: Some(dir.to_owned()),
            durability,
            retention: RetentionPolicy {
                max_events: MAX_EVENTS,
                ..RetentionPolicy::DEFAULT
            },
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
        },
        Millis(1),
    )
    .expect("open");
    if !flusher {
        store.engine.stop_flusher();
        if let Some(t) = store.flusher.take() {
            t.join().expect("flusher");
        }
    }
    if !applier {
        store.engine.stop_applier();
        if let Some(t) = store.applier.take() {
            t.join().expect("applier");
        }
    }
    store
}

/// Every visible event of `id` before its first unapplied one is in the index, and the
/// unapplied ones run without a gap to the task's next seq.
fn check_index(store: &Store, id: &str, seed: u64, step: u32) {
    let _gate = lock_write(&store.engine.gate);
    let Some(slot) = store.engine.slot(id) else {
        return;
    };
    let st = lock(&slot.state);
    let start = st.unapplied.front().map_or(st.next, |p| p.seq);
    let tail: Vec<u64> = st.unapplied.iter().map(|p| p.seq.get()).collect();
    let want: Vec<u64> = (start.get()..st.next.get()).collect();
    assert_eq!(tail, want, "seed {seed} step {step}: {id}'s unapplied set");
    let from = st.earliest.min(start);
    let indexed: Vec<u64> = store
        .engine
        .index()
        .events(id, from, start, usize::MAX)
        .map(|raw| {
            let raw = raw.expect("index read");
            let (rec, _) = taskstream_core::record::decode(&raw).expect("record");
            rec.event().expect("an event").seq.get()
        })
        .collect();
    let want: Vec<u64> = (from.get()..start.get()).collect();
    assert_eq!(indexed, want, "seed {seed} step {step}: {id} in the index");
}

/// A working `emit` task of principal `local`, created at 1 ms (the store's unit tests share it).
pub(crate) fn record(id: &str) -> TaskRecord {
    TaskRecord {
        task_id: id.to_owned(),
        principal: "local".to_owned(),
        tool: "emit".to_owned(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: Millis(1),
        last_updated_at: Millis(1),
        ttl_ms: None,
        poll_interval_ms: 100,
        result: None,
        error: None,
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// What a task was given: its events by seq (type, payload), and whether it ended.
#[derive(Default)]
struct Model {
    events: Vec<(String, Vec<u8>)>,
    ended: bool,
}

fn visible(store: &Store, id: &str) -> Vec<StoredEvent> {
    let mut out = Vec::new();
    store
        .try_read_from(id, Seq::ZERO, 1 << 20, &mut out)
        .expect("read");
    out
}

/// What is visible is a gap-free run of what was appended, ending no later than the model.
fn check_visible(store: &Store, models: &BTreeMap<String, Model>, seed: u64, step: u32) {
    for (id, m) in models {
        // The flusher may publish between reading the task's range and reading its events:
        // both are taken again until the range did not move around the read (bounded).
        let view_of = || {
            store
                .task(id)
                .unwrap_or_else(|| panic!("seed {seed} step {step}: {id} gone"))
        };
        let range = |v: &TaskView| (v.retained.earliest().get(), v.retained.next().get());
        let mut tries = 0;
        let (view, got) = loop {
            let before = view_of();
            let got = visible(store, id);
            let after = view_of();
            tries += 1;
            if range(&before) == range(&after) || tries == 1000 {
                break (before, got);
            }
        };
        let next = view.retained.next().get();
        assert!(
            next as usize <= m.events.len(),
            "seed {seed} step {step}: {id} shows {next} of {}",
            m.events.len()
        );
        assert!(next - view.retained.earliest().get() <= u64::from(MAX_EVENTS));
        let want: Vec<u64> = (view.retained.earliest().get()..next).collect();
        let seqs: Vec<u64> = got.iter().map(|e| e.seq.get()).collect();
        assert_eq!(seqs, want, "seed {seed} step {step}: {id}");
        check_index(store, id, seed, step);
        for e in &got {
            let (ty, payload) = &m.events[e.seq.get() as usize];
            assert_eq!((&e.event_type, &e.payload), (ty, payload), "{id} {}", e.seq);
        }
    }
}

/// Takes the model to what a restart shows: events lost beyond what recovery kept (it must
/// keep every one that was visible, `seen`), running tasks ended `failed`.
fn recovered(store: &Store, models: &mut BTreeMap<String, Model>, seen: &BTreeMap<String, u64>) {
    for (id, m) in models.iter_mut() {
        let view = store.task(id).unwrap_or_else(|| panic!("{id} lost"));
        let got = visible(store, id);
        let next = view.retained.next().get() as usize;
        let kept = if m.ended { next } else { next - 1 };
        assert!(
            kept as u64 >= seen[id],
            "{id}: {kept} recovered, {} were visible",
            seen[id]
        );
        assert!(kept <= m.events.len(), "{id}: more recovered than appended");
        m.events.truncate(kept);
        if !m.ended {
            let last = got.last().expect("a status event");
            assert_eq!(last.event_type, STATUS_EVENT_TYPE);
            m.events
                .push((last.event_type.clone(), last.payload.clone()));
            m.ended = true;
        }
    }
}

#[test]
fn the_pipeline_keeps_index_and_log_equal_to_the_model() {
    for seed in 1..=16u64 {
        run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
}

fn run(seed: u64) {
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut dir = scratch.path().join("d0");
    let mut rng = Rng(seed | 1);
    let flusher = rng.below(2) == 0;
    let applier = rng.below(2) == 0;
    // `none` mode goes through the same pipeline (without the flush).
    let durability = if rng.below(4) == 0 {
        Durability::None
    } else {
        Durability::Group
    };
    let mut store = open(&dir, flusher, applier, durability);
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    let mut made = 0;
    let mut crashes = 0;
    for step in 0..300u32 {
        let running: Vec<String> = models
            .iter()
            .filter(|(_, m)| !m.ended)
            .map(|(id, _)| id.clone())
            .collect();
        let pick = |rng: &mut Rng| running[rng.below(running.len() as u64) as usize].clone();
        match rng.below(100) {
            r if r < 6 || running.is_empty() => {
                let id = format!("t{made}");
                made += 1;
                store.create_task(record(&id), Millis(1)).expect("create");
                models.insert(
                    id,
                    Model {
                        events: vec![(
                            STATUS_EVENT_TYPE.to_owned(),
                            br#"{"status":"working"}"#.to_vec(),
                        )],
                        ended: false,
                    },
                );
            }
            r if r < 70 => {
                let id = pick(&mut rng);
                let payload = format!(r#"{{"step":{step}}}"#).into_bytes();
                let waited = r >= 60;
                let seq = if waited {
                    store.append(&id, TICK, &payload, Millis(1))
                } else {
                    store.emit(&id, TICK, &payload, Millis(1))
                }
                .expect("append");
                let m = models.get_mut(&id).expect("model");
                assert_eq!(seq.get() as usize, m.events.len(), "{id}");
                m.events.push((TICK.to_owned(), payload));
                if waited {
                    let next = store.task(&id).expect("task").retained.next();
                    assert!(next > seq, "a waited append is visible");
                }
            }
            r if r < 75 => {
                let id = pick(&mut rng);
                let last = models[&id].events.len() as u64 - 1;
                store
                    .wait_durable(&id, Seq::new(last).expect("seq"))
                    .expect("wait");
                let next = store.task(&id).expect("task").retained.next().get();
                assert!(next > last, "wait_durable returned before {id} {last}");
            }
            r if r < 79 => {
                let id = pick(&mut rng);
                store
                    .finish(&id, TaskStatus::Completed, None, None, None, Millis(1))
                    .expect("finish");
                let m = models.get_mut(&id).expect("model");
                m.events.push((
                    STATUS_EVENT_TYPE.to_owned(),
                    br#"{"status":"completed"}"#.to_vec(),
                ));
                m.ended = true;
            }
            r if r < 81 => store.engine.drain().expect("drain"),
            r if r < 83 => store.engine.apply_unapplied().expect("apply"),
            r if r < 85 => store.checkpoint().expect("checkpoint"),
            r if r < 86 => store.rebuild_index().expect("rebuild"),
            r if r < 90 => {
                store.sweep(Millis(1));
            }
            r if r < 95 => {
                // A crash: the files as they are, with nothing in flight (no drain, no
                // checkpoint), and the log's unflushed buffer lost.
                crashes += 1;
                let next_dir = scratch.path().join(format!("d{}", crashes + made));
                let seen: BTreeMap<String, u64> = {
                    let _flushing = lock(&store.engine.flushing);
                    let _gate = lock_write(&store.engine.gate);
                    let seen = models
                        .keys()
                        .map(|id| {
                            let view = store.task(id).expect("task");
                            (id.clone(), view.retained.next().get())
                        })
                        .collect();
                    copy_dir(&dir, &next_dir);
                    seen
                };
                drop(store);
                dir = next_dir;
                store = open(&dir, flusher, applier, durability);
                recovered(&store, &mut models, &seen);
            }
            _ => {
                // A clean restart keeps everything appended.
                drop(store);
                store = open(&dir, flusher, applier, durability);
                let seen = models
                    .iter()
                    .map(|(id, m)| (id.clone(), m.events.len() as u64))
                    .collect();
                recovered(&store, &mut models, &seen);
            }
        }
        check_visible(&store, &models, seed, step);
    }
    // Everything appended is published by a close.
    drop(store);
    let store = open(&dir, flusher, applier, durability);
    for (id, m) in &models {
        let got = visible(&store, id);
        let last = got.last().expect("events");
        let n = if m.ended {
            m.events.len()
        } else {
            m.events.len() + 1
        };
        assert_eq!(last.seq.get() as usize + 1, n, "{id}");
    }
}

#[test]
fn in_memory_every_mode_appends_and_emits_are_visible_at_once() {
    for durability in [Durability::Group, Durability::Event, Durability::None] {
        let store = Store::open(
            StoreConfig {
                data_dir: None,
                durability,
                retention: RetentionPolicy::DEFAULT,
                max_store_bytes: DEFAULT_MAX_STORE_BYTES,
                index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
            },
            Millis(1),
        )
        .expect("open");
        store.create_task(record("t"), Millis(1)).expect("create");
        let a = store.emit("t", TICK, b"{}", Millis(1)).expect("emit");
        let b = store
            .append("t", TICK, br#"{"a":1}"#, Millis(1))
            .expect("append");
        assert_eq!((a.get(), b.get()), (1, 2), "{durability:?}");
        assert_eq!(visible(&store, "t").len(), 3, "{durability:?}");
    }
}

#[test]
fn unapplied_events_are_read_past_the_cache_and_their_set_is_bounded() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        StoreConfig {
            data_dir: Some(scratch.path().to_owned()),
            durability: Durability::Group,
            retention: RetentionPolicy {
                max_events: 1 << 20,
                ..RetentionPolicy::DEFAULT
            },
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
        },
        Millis(1),
    )
    .expect("open");
    let mut store = store;
    store.engine.stop_applier();
    if let Some(t) = store.applier.take() {
        t.join().expect("applier");
    }
    store.create_task(record("t"), Millis(1)).expect("create");
    // More than the read cache holds, none of it applied: the oldest are read from the
    // unapplied set, without a gap.
    let n = 3 * crate::cache::CACHE_EVENTS as u64;
    for i in 0..n {
        store
            .emit("t", TICK, format!(r#"{{"i":{i}}}"#).as_bytes(), Millis(1))
            .expect("emit");
    }
    store.engine.drain().expect("drain");
    assert!(lock(&store.engine.unapplied).items.len() as u64 > n - 1);
    let seqs =
        |store: &Store| -> Vec<u64> { visible(store, "t").iter().map(|e| e.seq.get()).collect() };
    assert_eq!(seqs(&store), (0..=n).collect::<Vec<_>>());
    let one = store
        .event("t", Seq::new(5).expect("seq"))
        .expect("event 5");
    assert_eq!(one.payload, br#"{"i":4}"#);
    // Half applied: the read joins the index and the set.
    {
        let _gate = lock_read(&store.engine.gate);
        let _one = lock(&store.engine.applying);
        store.engine.apply_batch().expect("apply");
    }
    assert_eq!(seqs(&store), (0..=n).collect::<Vec<_>>());
    store.engine.apply_unapplied().expect("apply");
    assert!(lock(&store.engine.unapplied).items.is_empty());
    assert_eq!(seqs(&store), (0..=n).collect::<Vec<_>>());
    // With nothing applying in the background, appenders apply once the set is full.
    let many = (super::MAX_UNAPPLIED + 2 * super::MAX_PENDING) as u64;
    for i in 0..many {
        store.emit("t", TICK, b"{}", Millis(1)).expect("emit");
        if i % 1024 == 0 {
            let held = lock(&store.engine.unapplied).items.len();
            assert!(held <= super::MAX_UNAPPLIED + super::MAX_PENDING, "{held}");
        }
    }
    store.engine.drain().expect("drain");
    let held = lock(&store.engine.unapplied).items.len();
    assert!(held <= super::MAX_UNAPPLIED + super::MAX_PENDING, "{held}");
    assert_eq!(
        store.task("t").expect("task").retained.next().get(),
        n + many + 1
    );
}
