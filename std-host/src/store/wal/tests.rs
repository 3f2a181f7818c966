use std::sync::Arc;

use taskstream_core::record::{EventRecord, Record, RecordError};
use taskstream_core::{Millis, Seq};

use super::*;
use crate::store::index::encode_into;

fn event_bytes(task: &str, seq: u64) -> Vec<u8> {
    let payload = format!(r#"{{"i":{seq}}}"#);
    let rec = Record::Event(EventRecord {
        task_id: task,
        seq: Seq::new(seq).unwrap(),
        at: Millis(seq),
        event_type: "dev.taskstream.tick",
        payload: payload.as_bytes(),
    });
    let mut out = Vec::new();
    encode_into(&rec, &mut out).unwrap();
    out
}

/// Recovers `dir` from `checkpoint`, returning (task, seq) of every record in order.
fn replay(dir: &Path, checkpoint: u64) -> (Vec<(String, u64)>, Recovered) {
    let mut seen = Vec::new();
    let recovered = recover::<WalError>(dir, checkpoint, true, |rec, raw| {
        let ev = rec.event().unwrap();
        assert_eq!(record::decode(raw).unwrap().0, *rec);
        seen.push((ev.task_id.to_owned(), ev.seq.get()));
        Ok(())
    })
    .unwrap();
    (seen, recovered)
}

fn expected(task: &str, n: u64) -> Vec<(String, u64)> {
    (0..n).map(|i| (task.to_owned(), i)).collect()
}

#[test]
fn every_mode_reads_back_what_it_wrote() {
    for mode in [Durability::Event, Durability::Group, Durability::None] {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), mode, 0).unwrap();
        for i in 0..10 {
            wal.submit(&event_bytes("a", i), true).unwrap();
        }
        let stats = wal.stats();
        let end = wal.submitted();
        drop(wal);
        let expected_syncs = if mode == Durability::None { 0 } else { 10 };
        assert_eq!(stats.syncs, expected_syncs, "{mode:?}");
        let (seen, recovered) = replay(dir.path(), 0);
        assert_eq!(seen, expected("a", 10), "{mode:?}");
        assert_eq!(recovered.end, end);
        assert_eq!(recovered.torn, None);
    }
}

#[test]
fn a_torn_tail_at_every_offset_of_the_last_record_recovers_to_the_previous_record() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Durability::Event, 0).unwrap();
    for i in 0..3 {
        wal.submit(&event_bytes("a", i), true).unwrap();
    }
    let full = wal.submitted();
    drop(wal);
    let path = segment_path(dir.path(), 0);
    let pristine = fs::read(&path).unwrap();
    let last_len = event_bytes("a", 2).len() as u64;
    let previous_end = full - last_len;
    for cut in previous_end..full {
        fs::write(&path, &pristine[..usize::try_from(cut).unwrap()]).unwrap();
        let (seen, recovered) = replay(dir.path(), 0);
        assert_eq!(seen, expected("a", 2), "cut at {cut}");
        assert_eq!(recovered.end, previous_end, "cut at {cut}");
        assert_eq!(fs::metadata(&path).unwrap().len(), previous_end);
        let torn = recovered.torn.clone();
        if cut == previous_end {
            assert_eq!(torn, None);
        } else {
            let torn = torn.unwrap();
            assert_eq!(torn.offset, previous_end);
            assert!(matches!(
                torn.error,
                RecordError::Truncated { .. } | RecordError::BadMagic
            ));
            assert_eq!(recovered.discarded_bytes, cut - previous_end);
        }
    }
    // A flipped bit anywhere in the last record cuts it off the same way.
    for bit in 0..last_len * 8 {
        let mut bytes = pristine.clone();
        let at = usize::try_from(previous_end + bit / 8).unwrap();
        bytes[at] ^= 1 << (bit % 8);
        fs::write(&path, &bytes).unwrap();
        let (seen, recovered) = replay(dir.path(), 0);
        assert_eq!(seen, expected("a", 2), "bit {bit}");
        assert_eq!(recovered.end, previous_end);
    }
}

#[test]
fn the_log_goes_on_after_a_recovered_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Durability::Group, 0).unwrap();
    for i in 0..3 {
        wal.submit(&event_bytes("a", i), true).unwrap();
    }
    let full = wal.submitted();
    drop(wal);
    let path = segment_path(dir.path(), 0);
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(full - 5).unwrap();
    let (_, recovered) = replay(dir.path(), 0);
    let wal = Wal::open(dir.path(), Durability::Group, recovered.end).unwrap();
    wal.submit(&event_bytes("a", 2), true).unwrap();
    wal.submit(&event_bytes("a", 3), true).unwrap();
    drop(wal);
    let (seen, recovered) = replay(dir.path(), 0);
    assert_eq!(seen, expected("a", 4));
    assert_eq!(recovered.torn, None);
}

#[test]
fn rotation_and_checkpoint_deletion_keep_the_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Durability::Event, 0).unwrap();
    wal.submit(&event_bytes("a", 0), true).unwrap();
    wal.submit(&event_bytes("a", 1), false).unwrap();
    let first = wal.rotate().unwrap();
    assert_eq!(first, wal.submitted());
    // Rotating an empty segment is a no-op.
    assert_eq!(wal.rotate().unwrap(), first);
    wal.submit(&event_bytes("a", 2), true).unwrap();
    let second = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 3), true).unwrap();
    assert_eq!(list_segments(dir.path()).unwrap().len(), 3);
    wal.delete_before(second).unwrap();
    assert_eq!(
        list_segments(dir.path()).unwrap(),
        [(second, segment_path(dir.path(), second))]
    );
    drop(wal);
    let (seen, recovered) = replay(dir.path(), second);
    assert_eq!(seen, [("a".to_owned(), 3)]);
    assert!(!recovered.gap);
}

#[test]
fn recovery_deletes_segments_before_the_checkpoint_and_after_a_tear() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Durability::Event, 0).unwrap();
    wal.submit(&event_bytes("a", 0), true).unwrap();
    let second = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 1), true).unwrap();
    let third = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 2), true).unwrap();
    drop(wal);
    let third_len = fs::metadata(segment_path(dir.path(), third)).unwrap().len();
    // Tear the middle segment: the third no longer follows on and goes too.
    let middle = segment_path(dir.path(), second);
    let len = fs::metadata(&middle).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&middle)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let (seen, recovered) = replay(dir.path(), second);
    assert_eq!(seen, []);
    assert_eq!(recovered.end, second);
    assert!(recovered.torn.is_some());
    assert_eq!(recovered.discarded_bytes, (len - 1) + third_len);
    assert_eq!(
        list_segments(dir.path()).unwrap(),
        [(second, middle.clone())],
        "the segment before the checkpoint and the one after the tear are gone"
    );
}

#[test]
fn group_commit_shares_flushes_between_threads_and_keeps_each_threads_order() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Arc::new(Wal::open(dir.path(), Durability::Group, 0).unwrap());
    let threads = 8;
    let per_thread = 50;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    wal.submit(&event_bytes(&format!("t{t}"), i), true).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = wal.stats();
    assert!(
        stats.syncs <= threads * per_thread,
        "at most one flush per record: {stats:?}"
    );
    assert_eq!(stats.syncs, stats.writes);
    drop(wal);
    let (seen, _) = replay(dir.path(), 0);
    assert_eq!(seen.len() as u64, threads * per_thread);
    for t in 0..threads {
        let task = format!("t{t}");
        let mine: Vec<u64> = seen
            .iter()
            .filter(|(id, _)| *id == task)
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(mine, (0..per_thread).collect::<Vec<_>>());
    }
}

#[test]
fn writes_without_waiting_are_ordered_and_flushed_by_the_next_wait() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Durability::Group, 0).unwrap();
    wal.submit(&event_bytes("a", 0), false).unwrap();
    wal.submit(&event_bytes("a", 1), false).unwrap();
    assert_eq!(
        wal.stats().writes,
        0,
        "nothing written before a durable submission"
    );
    wal.submit(&event_bytes("a", 2), true).unwrap();
    assert_eq!(wal.stats().syncs, 1);
    drop(wal);
    assert_eq!(replay(dir.path(), 0).0, expected("a", 3));
}
