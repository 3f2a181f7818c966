//! Recovery's tests: damage refused, repairs that keep what they can, legacy data moved.
use super::*;
use crate::engine::tests::record;
use crate::{Store, DEFAULT_INDEX_CACHE_BYTES, DEFAULT_MAX_STORE_BYTES, STATUS_EVENT_TYPE};
use taskstream_core::RetentionPolicy;

fn config(dir: &Path) -> StoreConfig {
    StoreConfig {
        data_dir: Some(dir.to_owned()),
        durability: Durability::Group,
        retention: RetentionPolicy::DEFAULT,
        max_store_bytes: DEFAULT_MAX_STORE_BYTES,
        index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
    }
}

#[test]
fn an_index_that_does_not_open_is_rebuilt_when_no_checkpoint_relied_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = |payloads: &[&str]| {
        let store = Store::open(config(dir.path()), Millis(1)).unwrap();
        store.create_task(record("t"), Millis(1)).unwrap();
        for p in payloads {
            store
                .append("t", "dev.taskstream.tick", p.as_bytes(), Millis(2))
                .unwrap();
        }
        store
            .finish("t", TaskStatus::Completed, None, None, None, Millis(3))
            .unwrap();
    };
    write(&[r#"{"i":0}"#, r#"{"i":1}"#]);
    // sled's `conf` as a power loss at the first open can leave it (unsynced: zeros).
    let conf = dir.path().join("index").join("conf");
    let len = std::fs::metadata(&conf).unwrap().len();
    std::fs::write(&conf, vec![0u8; usize::try_from(len).unwrap()]).unwrap();
    // With the checkpoint record, a checkpoint relied on the index: damage, refused.
    let refused = Store::open(config(dir.path()), Millis(4)).err().unwrap();
    assert!(refused.is_damage(), "{refused}");
    assert!(
        refused.to_string().contains("cannot be opened"),
        "{refused}"
    );
    // Without it (the power loss came before the first checkpoint), built from the log.
    std::fs::remove_file(dir.path().join(checkpoint::FILE)).unwrap();
    let store = Store::open(config(dir.path()), Millis(4)).unwrap();
    let warnings = store.recovery().warnings.join("\n");
    assert!(warnings.contains("built from the log"), "{warnings}");
    for (seq, want) in [(1, br#"{"i":0}"#), (2, br#"{"i":1}"#)] {
        let got = store.event("t", Seq::new(seq).unwrap()).unwrap();
        assert_eq!(got.payload, want.to_vec(), "seq {seq}");
    }
}

#[test]
fn events_lost_from_the_log_are_refused_and_a_repaired_hole_is_not() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(config(dir.path()), Millis(1)).unwrap();
        store.create_task(record("t"), Millis(1)).unwrap();
        for i in 0..20 {
            store
                .append(
                    "t",
                    "dev.taskstream.tick",
                    format!("{{\"i\":{i}}}").as_bytes(),
                    Millis(2),
                )
                .unwrap();
        }
        store
            .finish("t", TaskStatus::Completed, None, None, None, Millis(3))
            .unwrap();
    }
    // Events 5 and 6 are damaged where they are kept: in the log, in a segment the
    // checkpoints kept because it holds retained events.
    let mut damaged = None;
    for entry in std::fs::read_dir(dir.path().join("wal")).unwrap() {
        let path = entry.unwrap().path();
        if wal::segment_start(&path).is_none() {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let mut at = 0;
        let mut hit = false;
        while at < bytes.len() {
            let (rec, used) = record::decode(&bytes[at..]).unwrap();
            let seq = rec.event().map(|e| e.seq.get());
            if matches!(rec, Record::Event(_)) && matches!(seq, Some(5 | 6)) {
                bytes[at + used - 6] ^= 0xFF;
                hit = true;
            }
            at += used;
        }
        if hit {
            std::fs::write(&path, &bytes).unwrap();
            damaged = Some(path);
        }
    }
    let damaged = damaged.expect("events 5 and 6 are in a kept segment");
    let err = Store::open(config(dir.path()), Millis(4))
        .err()
        .expect("refused");
    let shown = err.to_string();
    assert!(shown.contains("write-ahead log is damaged"), "{shown}");
    assert!(shown.contains("taskstream repair --data-dir"), "{shown}");
    // A repair goes on with the hole and marks it; later opens accept it.
    {
        let store = Store::repair(config(dir.path()), Millis(4)).unwrap();
        let repairs = store.recovery().repairs.join("\n");
        assert!(repairs.contains("t (2 events)"), "{repairs}");
        let mut out = Vec::new();
        let read = store.try_read_from("t", Seq::new(5).unwrap(), 10, &mut out);
        assert!(read.is_err(), "a read into the hole is an error: {out:?}");
        let after = store.event("t", Seq::new(7).unwrap()).unwrap();
        assert_eq!(after.payload, br#"{"i":6}"#.to_vec(), "the rest is kept");
        assert!(
            !damaged.exists(),
            "the repair moved what was retained out of the damaged segment, and deleted it"
        );
    }
    let store = Store::open(config(dir.path()), Millis(5)).unwrap();
    let last = store.event("t", Seq::new(21).unwrap()).unwrap();
    assert_eq!(last.event_type, STATUS_EVENT_TYPE);
    let first = store.event("t", Seq::new(1).unwrap()).unwrap();
    assert_eq!(first.payload, br#"{"i":0}"#.to_vec());
}

#[test]
fn empty_seqs_a_repair_skips_never_push_retained_events_out() {
    // A running task's events, then another task's, part of which is damaged: the repair
    // skips the seqs the first task may have used in the damaged bytes, and under a count
    // limit those empty seqs must not push its retained, acknowledged events out.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.retention.max_events = 40;
    let tick = |i: usize| format!("{{\"i\":{i}}}").into_bytes();
    {
        let store = Store::open(cfg.clone(), Millis(1)).unwrap();
        store.create_task(record("t"), Millis(1)).unwrap();
        for i in 0..30 {
            store
                .append("t", "dev.taskstream.tick", &tick(i), Millis(2))
                .unwrap();
        }
        store.create_task(record("u"), Millis(2)).unwrap();
        for i in 0..30 {
            store
                .append("u", "dev.taskstream.tick", &tick(i), Millis(2))
                .unwrap();
        }
    }
    // Events 5 to 24 of `u` damaged where the log keeps them, valid records after them.
    let mut hit = 0;
    for entry in std::fs::read_dir(dir.path().join("wal")).unwrap() {
        let path = entry.unwrap().path();
        if wal::segment_start(&path).is_none() {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let mut at = 0;
        let mut changed = false;
        while at < bytes.len() {
            let Ok((rec, used)) = record::decode(&bytes[at..]) else {
                break;
            };
            let seq = rec.event().map(|e| (e.task_id == "u", e.seq.get()));
            if matches!(rec, Record::Event(_)) && matches!(seq, Some((true, 5..=24))) {
                bytes[at + used - 6] ^= 0xFF;
                hit += 1;
                changed = true;
            }
            at += used;
        }
        if changed {
            std::fs::write(&path, &bytes).unwrap();
        }
    }
    assert_eq!(hit, 20, "the damaged events are in the log");
    assert!(
        Store::open(cfg.clone(), Millis(4)).is_err(),
        "damage is refused"
    );
    let check = |store: &Store| {
        let mut out = Vec::new();
        store.read_from("t", Seq::ZERO, 100, &mut out);
        let ticks: Vec<&[u8]> = out
            .iter()
            .filter(|e| e.event_type == "dev.taskstream.tick")
            .map(|e| &e.payload[..])
            .collect();
        assert_eq!(
            ticks.len(),
            30,
            "every acknowledged event of t is kept: {out:?}"
        );
        for (i, p) in ticks.iter().enumerate() {
            assert_eq!(*p, &tick(i)[..], "event {i}");
        }
        assert_eq!(out[0].seq, Seq::ZERO, "t's creation is kept too");
    };
    {
        let store = Store::repair(cfg.clone(), Millis(4)).unwrap();
        let repairs = store.recovery().repairs.join("\n");
        assert!(repairs.contains("damaged"), "{repairs}");
        check(&store);
    }
    // And at every later open, which enforces the count limit again.
    let store = Store::open(cfg, Millis(5)).unwrap();
    check(&store);
}

#[test]
fn events_an_earlier_version_kept_in_the_index_move_to_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let events: Vec<Vec<u8>> = (0..30)
        .map(|i| format!("{{\"i\":{i}}}").into_bytes())
        .collect();
    {
        let store = Store::open(config(dir.path()), Millis(1)).unwrap();
        store.create_task(record("t"), Millis(1)).unwrap();
        for p in &events {
            store
                .append("t", "dev.taskstream.tick", p, Millis(2))
                .unwrap();
        }
        store
            .finish("t", TaskStatus::Completed, None, None, None, Millis(3))
            .unwrap();
    }
    // As an earlier version left it: the events in the index's `events` tree, and the log
    // before the checkpoint deleted.
    {
        let mut raws = Vec::new();
        for entry in std::fs::read_dir(dir.path().join("wal")).unwrap() {
            let path = entry.unwrap().path();
            if wal::segment_start(&path).is_none() {
                continue;
            }
            let bytes = std::fs::read(path).unwrap();
            let mut at = 0;
            while at < bytes.len() {
                let (rec, used) = record::decode(&bytes[at..]).unwrap();
                if let Some(e) = rec.event() {
                    let mut raw = Vec::new();
                    crate::frame::encode_into(&Record::Event(*e), &mut raw).unwrap();
                    raws.push((e.seq, raw));
                }
                at += used;
            }
        }
        assert_eq!(raws.len(), 32, "creation, 30 events, end");
        let saved = checkpoint::read(dir.path()).unwrap().unwrap();
        for entry in std::fs::read_dir(dir.path().join("wal")).unwrap() {
            let path = entry.unwrap().path();
            if wal::segment_start(&path).unwrap() < saved.lsn {
                std::fs::remove_file(path).unwrap();
            }
        }
        let index = Index::open(
            Some(&dir.path().join("index")),
            crate::DEFAULT_INDEX_CACHE_BYTES,
            None,
        )
        .unwrap();
        let legacy = index.legacy_events().unwrap();
        for (seq, raw) in &raws {
            legacy
                .insert(&crate::index::legacy_event_key("t", *seq), raw)
                .unwrap();
        }
        index.flush(true).unwrap();
    }
    let check = |store: &Store| {
        let mut out = Vec::new();
        store.read_from("t", Seq::ZERO, 100, &mut out);
        assert_eq!(out.len(), 32);
        for (k, p) in events.iter().enumerate() {
            assert_eq!(&out[k + 1].payload, p, "seq {}", k + 1);
        }
        assert_eq!(out[31].event_type, STATUS_EVENT_TYPE);
    };
    {
        let store = Store::open(config(dir.path()), Millis(4)).unwrap();
        let warned = store.recovery().warnings.join("\n");
        assert!(warned.contains("moved 32 event(s)"), "{warned}");
        check(&store);
    }
    // Moved once: the index holds none any more, the log holds them all.
    let store = Store::open(config(dir.path()), Millis(5)).unwrap();
    assert!(
        store.recovery().warnings.is_empty(),
        "{:?}",
        store.recovery()
    );
    check(&store);
}
