use std::fs;
use std::sync::Arc;

use taskstream_core::record::{EventRecord, Record, RecordError};
use taskstream_core::{Millis, Seq};

use super::*;
use crate::frame::encode_into;
use crate::storage::StdStorage;

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

/// A log directory `wal/` in a temporary directory, which also holds the mark file beside it.
struct WalDir {
    _root: tempfile::TempDir,
    path: PathBuf,
}

impl WalDir {
    fn path(&self) -> &Path {
        &self.path
    }
}

fn wal_tempdir() -> WalDir {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("wal");
    fs::create_dir(&path).unwrap();
    WalDir { _root: root, path }
}

/// Sets the synced-through mark (W7) of the log in `dir` back to `lsn`, as if no sync had
/// covered the log after it: the bytes from `lsn` on are an unsynced tail, which a power loss
/// may tear.
fn unsynced_from(dir: &Path, lsn: u64) {
    let mut bytes = vec![0; 528];
    bytes[..16].copy_from_slice(&encode_mark(lsn));
    bytes[512..].copy_from_slice(&encode_mark(lsn));
    fs::write(mark_path(dir), bytes).unwrap();
}

/// Recovers `dir` from `checkpoint`, returning (task, seq) of every record in order.
fn replay(dir: &Path, checkpoint: u64) -> (Vec<(String, u64)>, Recovered) {
    try_replay(dir, checkpoint, false).unwrap()
}

/// Like [`replay`], optionally repairing, reporting a refusal.
fn try_replay(
    dir: &Path,
    checkpoint: u64,
    repair: bool,
) -> Result<(Vec<(String, u64)>, Recovered), WalError> {
    try_replay_all(dir, checkpoint, repair).map(|(seen, _, recovered)| (seen, recovered))
}

/// Like [`try_replay`], also returning the records of archived segments (before the
/// checkpoint), each with its LSN checked against the segment.
#[allow(clippy::type_complexity)]
fn try_replay_all(
    dir: &Path,
    checkpoint: u64,
    repair: bool,
) -> Result<(Vec<(String, u64)>, Vec<(String, u64)>, Recovered), WalError> {
    let mut seen = Vec::new();
    let mut archived = Vec::new();
    let recovered = recover::<WalError>(
        &StdStorage,
        dir,
        checkpoint,
        true,
        repair,
        |rec: &Record<'_>, raw, lsn, archive| {
            let ev = rec.event().unwrap();
            assert_eq!(record::decode(raw).unwrap().0, *rec);
            let files = SegmentFiles::new();
            files.load(dir).unwrap();
            assert_eq!(
                files.read(lsn, raw.len()).unwrap().unwrap(),
                raw,
                "at its LSN"
            );
            let to = if archive { &mut archived } else { &mut seen };
            to.push((ev.task_id.to_owned(), ev.seq.get()));
            Ok(())
        },
    )?;
    Ok((seen, archived, recovered))
}

/// Writes events 0..n of task `a` into one segment; returns each record's offset and the
/// segment's path.
fn one_segment(dir: &Path, n: u64) -> (Vec<u64>, PathBuf) {
    let wal = Wal::open(dir, Durability::Event, 0, SegmentFiles::new()).unwrap();
    let mut offsets = Vec::new();
    for i in 0..n {
        offsets.push(wal.submitted());
        wal.submit(&event_bytes("a", i), true).unwrap();
    }
    drop(wal);
    (offsets, segment_path(dir, 0))
}

#[test]
fn a_bad_record_with_valid_records_after_it_is_damage_not_a_torn_tail() {
    let dir = wal_tempdir();
    let (offsets, path) = one_segment(dir.path(), 10);
    let pristine = fs::read(&path).unwrap();
    // One flipped bit in record 4's body, and (separately) record 4 zeroed whole.
    let at = usize::try_from(offsets[4]).unwrap();
    let end = usize::try_from(offsets[5]).unwrap();
    let mut flipped = pristine.clone();
    flipped[at + 9] ^= 0x10;
    let mut zeroed = pristine.clone();
    zeroed[at..end].fill(0);
    for (name, bytes) in [("flipped", flipped), ("zeroed", zeroed)] {
        fs::write(&path, &bytes).unwrap();
        match try_replay(dir.path(), 0, false) {
            Err(WalError::Damaged(d)) => {
                assert_eq!(d.segment, path, "{name}");
                assert_eq!(d.offset, offsets[4], "{name}");
                assert_eq!(d.bytes, Some(offsets[5] - offsets[4]), "{name}");
                let shown = WalError::Damaged(d).to_string();
                assert!(shown.contains("taskstream repair --data-dir"), "{shown}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(
            fs::read(&path).unwrap(),
            bytes,
            "{name}: refusing changes nothing"
        );
        // A repair keeps every valid record, before and after the damage.
        let (seen, recovered) = try_replay(dir.path(), 0, true).unwrap();
        let want: Vec<(String, u64)> = (0..10)
            .filter(|i| *i != 4)
            .map(|i| ("a".to_owned(), i))
            .collect();
        assert_eq!(seen, want, "{name}");
        assert_eq!(recovered.damage.len(), 1, "{name}");
        assert_eq!(recovered.end, pristine.len() as u64, "{name}");
        assert_eq!(recovered.torn, None, "{name}");
    }
}

#[test]
fn a_torn_tail_that_holds_a_record_in_its_payload_is_still_a_torn_tail() {
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Event, 0, SegmentFiles::new()).unwrap();
    wal.submit(&event_bytes("a", 0), true).unwrap();
    let before = wal.submitted();
    // A payload that carries the bytes of a whole valid record (as JSON-escaped text it would
    // not, but a record's body is not text): the tear cuts the outer record short.
    let inner = event_bytes("b", 7);
    let mut outer = event_bytes("a", 1);
    outer.extend_from_slice(&inner);
    let mut framed = Vec::new();
    // The outer frame claims a body long enough to hold the inner record.
    let rec = Record::Event(EventRecord {
        task_id: "a",
        seq: Seq::new(1).unwrap(),
        at: Millis(1),
        event_type: "dev.taskstream.tick",
        payload: br#"{"x":"................................................................................................................................"}"#,
    });
    encode_into(&rec, &mut framed).unwrap();
    // Put the inner record inside the outer one's payload bytes, then cut the outer one.
    let body_at = framed.len() - 4 - inner.len() - 10;
    framed[body_at..body_at + inner.len()].copy_from_slice(&inner);
    wal.submit(&framed[..framed.len() - 2], true).unwrap();
    drop(wal);
    unsynced_from(dir.path(), before);
    let (seen, recovered) = try_replay(dir.path(), 0, false).unwrap();
    assert_eq!(seen, expected("a", 1));
    assert_eq!(recovered.end, before);
    assert!(recovered.torn.is_some());
}

#[test]
fn a_missing_or_cut_segment_before_the_last_is_damage() {
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Event, 0, SegmentFiles::new()).unwrap();
    wal.submit(&event_bytes("a", 0), true).unwrap();
    let second = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 1), true).unwrap();
    let third = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 2), true).unwrap();
    drop(wal);
    let middle = segment_path(dir.path(), second);
    let saved = fs::read(&middle).unwrap();
    // Cut by one byte: the third segment no longer follows on.
    fs::write(&middle, &saved[..saved.len() - 1]).unwrap();
    match try_replay(dir.path(), 0, false) {
        Err(WalError::Damaged(d)) => assert_eq!(d.segment, middle),
        other => panic!("{other:?}"),
    }
    // Deleted: the log from `second` to `third` is missing.
    fs::remove_file(&middle).unwrap();
    match try_replay(dir.path(), 0, false) {
        Err(WalError::Damaged(d)) => {
            assert_eq!(d.segment, segment_path(dir.path(), third));
            assert_eq!(d.bytes, Some(third - second));
        }
        other => panic!("{other:?}"),
    }
    let (seen, recovered) = try_replay(dir.path(), 0, true).unwrap();
    assert_eq!(seen, [("a".to_owned(), 0), ("a".to_owned(), 2)]);
    assert_eq!(recovered.damage.len(), 1);
    // Every segment gone while the checkpoint is past 0.
    for (_, p) in list_segments(&StdStorage, dir.path()).unwrap() {
        fs::remove_file(p).unwrap();
    }
    match try_replay(dir.path(), third, false) {
        Err(WalError::Damaged(d)) => assert_eq!(d.bytes, None),
        other => panic!("{other:?}"),
    }
}

fn expected(task: &str, n: u64) -> Vec<(String, u64)> {
    (0..n).map(|i| (task.to_owned(), i)).collect()
}

#[test]
fn every_mode_reads_back_what_it_wrote() {
    for mode in [Durability::Event, Durability::Group, Durability::None] {
        let dir = wal_tempdir();
        let wal = Wal::open(dir.path(), mode, 0, SegmentFiles::new()).unwrap();
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
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Event, 0, SegmentFiles::new()).unwrap();
    for i in 0..3 {
        wal.submit(&event_bytes("a", i), true).unwrap();
    }
    let full = wal.submitted();
    drop(wal);
    let path = segment_path(dir.path(), 0);
    let pristine = fs::read(&path).unwrap();
    let last_len = event_bytes("a", 2).len() as u64;
    let previous_end = full - last_len;
    unsynced_from(dir.path(), previous_end);
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
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Group, 0, SegmentFiles::new()).unwrap();
    for i in 0..3 {
        wal.submit(&event_bytes("a", i), true).unwrap();
    }
    let full = wal.submitted();
    drop(wal);
    let path = segment_path(dir.path(), 0);
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(full - 5).unwrap();
    unsynced_from(dir.path(), full - event_bytes("a", 2).len() as u64);
    let (_, recovered) = replay(dir.path(), 0);
    let wal = Wal::open(
        dir.path(),
        Durability::Group,
        recovered.end,
        SegmentFiles::new(),
    )
    .unwrap();
    wal.submit(&event_bytes("a", 2), true).unwrap();
    wal.submit(&event_bytes("a", 3), true).unwrap();
    drop(wal);
    let (seen, recovered) = replay(dir.path(), 0);
    assert_eq!(seen, expected("a", 4));
    assert_eq!(recovered.torn, None);
}

#[test]
fn rotation_and_checkpoint_deletion_keep_the_suffix() {
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Event, 0, SegmentFiles::new()).unwrap();
    wal.submit(&event_bytes("a", 0), true).unwrap();
    wal.submit(&event_bytes("a", 1), false).unwrap();
    let first = wal.rotate().unwrap();
    assert_eq!(first, wal.submitted());
    // Rotating an empty segment is a no-op.
    assert_eq!(wal.rotate().unwrap(), first);
    wal.submit(&event_bytes("a", 2), true).unwrap();
    let second = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 3), true).unwrap();
    assert_eq!(list_segments(&StdStorage, dir.path()).unwrap().len(), 3);
    // A segment that holds a retained event is kept.
    wal.delete_before(second, &BTreeSet::from([first])).unwrap();
    assert_eq!(
        list_segments(&StdStorage, dir.path()).unwrap(),
        [
            (first, segment_path(dir.path(), first)),
            (second, segment_path(dir.path(), second))
        ]
    );
    assert!(wal.files.read(first, 1).unwrap().is_some());
    assert!(
        wal.files.read(0, 1).unwrap().is_none(),
        "gone from the readers too"
    );
    wal.delete_before(second, &BTreeSet::new()).unwrap();
    assert_eq!(
        list_segments(&StdStorage, dir.path()).unwrap(),
        [(second, segment_path(dir.path(), second))]
    );
    drop(wal);
    let (seen, recovered) = replay(dir.path(), second);
    assert_eq!(seen, [("a".to_owned(), 3)]);
    assert!(!recovered.gap);
}

#[test]
fn recovery_reads_segments_before_the_checkpoint_as_archived_and_keeps_them() {
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Event, 0, SegmentFiles::new()).unwrap();
    wal.submit(&event_bytes("a", 0), true).unwrap();
    let second = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 1), true).unwrap();
    let third = wal.rotate().unwrap();
    wal.submit(&event_bytes("a", 2), true).unwrap();
    // The middle segment held nothing retained and was deleted: archives need not follow on.
    wal.delete_before(third, &BTreeSet::from([0])).unwrap();
    drop(wal);
    let (seen, archived, recovered) = try_replay_all(dir.path(), third, false).unwrap();
    assert_eq!(seen, [("a".to_owned(), 2)]);
    assert_eq!(archived, [("a".to_owned(), 0)]);
    assert_eq!(recovered.torn, None);
    assert!(recovered.damage.is_empty());
    assert_eq!(
        list_segments(&StdStorage, dir.path()).unwrap(),
        [
            (0, segment_path(dir.path(), 0)),
            (third, segment_path(dir.path(), third))
        ],
        "nothing is deleted by recovery"
    );
    assert!(second < third);
}

#[test]
fn reads_of_many_runs_join_neighbours_and_stop_at_what_is_gone() {
    let dir = wal_tempdir();
    let files = SegmentFiles::new();
    let wal = Wal::open(dir.path(), Durability::None, 0, Arc::clone(&files)).unwrap();
    let mut runs = Vec::new();
    for i in 0..50 {
        let bytes = event_bytes("a", i);
        let at = wal.submit(&bytes, false).unwrap();
        runs.push((at, u32::try_from(bytes.len()).unwrap(), bytes));
    }
    let second = wal.rotate().unwrap();
    for i in 50..60 {
        let bytes = event_bytes("a", i);
        let at = wal.submit(&bytes, false).unwrap();
        runs.push((at, u32::try_from(bytes.len()).unwrap(), bytes));
    }
    // Every other one, across the rotation, and one past the end.
    let mut asked: Vec<(u64, u32)> = runs.iter().step_by(2).map(|(a, n, _)| (*a, *n)).collect();
    asked.push((wal.submitted() + 10, 5));
    let got = files.read_many(&asked).unwrap();
    for (k, (_, _, bytes)) in runs.iter().step_by(2).enumerate() {
        assert_eq!(got[k].as_deref(), Some(&bytes[..]), "run {k}");
    }
    assert_eq!(got.last().unwrap(), &None, "past the end");
    wal.delete_before(second, &BTreeSet::new()).unwrap();
    let got = files.read_many(&asked[..2]).unwrap();
    assert_eq!(got, [None, None], "a deleted segment is not read");
}

#[test]
fn group_commit_between_threads_keeps_each_threads_order() {
    let dir = wal_tempdir();
    let wal = Arc::new(Wal::open(dir.path(), Durability::Group, 0, SegmentFiles::new()).unwrap());
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
    // How many flushes this makes depends on the scheduler (the exact count the design
    // promises is `submissions_made_while_a_flush_runs_are_all_covered_by_the_next_one`):
    // here, that each flush is one write and one sync, and the order below.
    let stats = wal.stats();
    assert_eq!(stats.syncs, stats.writes, "{stats:?}");
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
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Group, 0, SegmentFiles::new()).unwrap();
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

#[test]
fn in_none_mode_deferred_submissions_are_written_once_per_flush_and_never_synced() {
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::None, 0, SegmentFiles::new()).unwrap();
    let first = wal.submit_deferred(&event_bytes("a", 0)).unwrap();
    let second = wal.submit_deferred(&event_bytes("a", 1)).unwrap();
    assert_eq!(first, 0);
    assert_eq!(second, event_bytes("a", 0).len() as u64, "LSNs run on");
    assert_eq!(wal.stats().writes, 0, "deferred: nothing written yet");
    wal.flush_through(wal.submitted()).unwrap();
    assert_eq!(wal.stats().writes, 1, "one write for the batch");
    assert_eq!(
        replay(dir.path(), 0).0,
        expected("a", 2),
        "written to the file"
    );
    // A plain submission is written at once in `none` mode, after what is still deferred.
    wal.submit_deferred(&event_bytes("a", 2)).unwrap();
    wal.submit(&event_bytes("a", 3), false).unwrap();
    assert_eq!(wal.stats().writes, 2);
    assert_eq!(wal.stats().syncs, 0, "none mode never syncs");
    drop(wal);
    assert_eq!(replay(dir.path(), 0).0, expected("a", 4));
}

/// Fails the log's next `fdatasync` with `EIO`.
fn fail_next_sync(wal: &Wal) {
    wal.fail_sync
        .store(wal.stats().syncs + 1, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_failed_sync_in_a_rotation_never_reports_the_rotated_bytes_durable() {
    // W3, W4, W6: a rotation writes what was deferred, syncs it, and only then moves `durable`;
    // a sync that fails leaves `durable` where it was and fails the log, so `flush_through`
    // of those bytes is an error, never a success.
    for mode in [Durability::Group, Durability::Event] {
        let dir = wal_tempdir();
        let wal = Wal::open(dir.path(), mode, 0, SegmentFiles::new()).unwrap();
        wal.submit(&event_bytes("a", 0), true).unwrap();
        let durable_before = lock(&wal.queue).durable;
        wal.submit_deferred(&event_bytes("a", 1)).unwrap();
        let end = wal.submitted();
        fail_next_sync(&wal);
        match wal.rotate() {
            Err(WalError::Io { context, .. }) => assert_eq!(context, "fdatasync of", "{mode:?}"),
            other => panic!("{mode:?}: {other:?}"),
        }
        assert_eq!(
            lock(&wal.queue).durable,
            durable_before,
            "{mode:?}: W3: durable moved past bytes no sync covered"
        );
        assert!(
            matches!(wal.flush_through(end), Err(WalError::Failed)),
            "{mode:?}: W3, W4: unsynced bytes reported durable"
        );
        assert!(matches!(
            wal.submit(&event_bytes("a", 2), true),
            Err(WalError::Failed)
        ));
        assert!(matches!(
            wal.submit_deferred(&event_bytes("a", 2)),
            Err(WalError::Failed)
        ));
        assert!(matches!(wal.rotate(), Err(WalError::Failed)), "W4: sticky");
        assert_eq!(
            list_segments(&StdStorage, dir.path()).unwrap().len(),
            1,
            "{mode:?}: W6: no new segment after a failed sync"
        );
    }
}

#[test]
fn a_failed_group_commit_sync_fails_its_waiter_and_every_later_submission() {
    // W3, W4 for the leader's flush.
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Group, 0, SegmentFiles::new()).unwrap();
    wal.submit(&event_bytes("a", 0), true).unwrap();
    let durable_before = lock(&wal.queue).durable;
    wal.submit_deferred(&event_bytes("a", 1)).unwrap();
    fail_next_sync(&wal);
    assert!(matches!(
        wal.submit(&event_bytes("a", 2), true),
        Err(WalError::Io { .. })
    ));
    assert_eq!(lock(&wal.queue).durable, durable_before, "W3");
    assert!(matches!(
        wal.flush_through(wal.submitted()),
        Err(WalError::Failed)
    ));
    assert!(matches!(
        wal.submit(&event_bytes("a", 3), true),
        Err(WalError::Failed)
    ));
}

#[test]
fn deferred_submissions_and_one_waiting_one_make_exactly_one_write_and_one_sync() {
    let dir = wal_tempdir();
    let wal = Wal::open(dir.path(), Durability::Group, 0, SegmentFiles::new()).unwrap();
    let n = 100;
    for i in 0..n {
        wal.submit_deferred(&event_bytes("a", i)).unwrap();
    }
    assert_eq!(wal.stats().writes, 0);
    wal.submit(&event_bytes("a", n), true).unwrap();
    let stats = wal.stats();
    assert_eq!((stats.writes, stats.syncs), (1, 1), "{stats:?}");
    drop(wal);
    assert_eq!(replay(dir.path(), 0).0, expected("a", n + 1));
}

/// Waits (bounded) until `cond` holds of the queue.
fn wait_for_queue(wal: &Wal, what: &str, cond: impl Fn(&Queue) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond(&lock(&wal.queue)) {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::yield_now();
    }
}

#[test]
fn submissions_made_while_a_flush_runs_are_all_covered_by_the_next_one() {
    // The design's promise (module docs, `group`): one flush for the leader's batch, and one
    // more for everything submitted while it ran, however many threads submitted it.
    let dir = wal_tempdir();
    let wal = Arc::new(Wal::open(dir.path(), Durability::Group, 0, SegmentFiles::new()).unwrap());
    let held = lock(&wal.segment);
    let leader = {
        let wal = Arc::clone(&wal);
        std::thread::spawn(move || wal.submit(&event_bytes("leader", 0), true).unwrap())
    };
    // The leader took batch 0 and waits for the segment.
    wait_for_queue(&wal, "the leader takes its batch", |q| {
        q.flushing && q.batch == 1
    });
    let followers = 12;
    let one = event_bytes("f00", 0).len() as u64;
    let handles: Vec<_> = (0..followers)
        .map(|t| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                wal.submit(&event_bytes(&format!("f{t:02}"), 0), true)
                    .unwrap()
            })
        })
        .collect();
    // Every follower appended and sleeps on its batch (both under the queue's lock).
    let first = event_bytes("leader", 0).len() as u64;
    wait_for_queue(&wal, "every follower submits", |q| {
        q.submitted == first + followers * one
    });
    drop(held);
    leader.join().unwrap();
    for h in handles {
        h.join().unwrap();
    }
    let stats = wal.stats();
    assert_eq!((stats.writes, stats.syncs), (2, 2), "{stats:?}");
    drop(wal);
    assert_eq!(replay(dir.path(), 0).0.len() as u64, followers + 1);
}

#[test]
fn a_failed_read_of_a_segment_is_a_log_error_naming_the_segment_file() {
    let dir = wal_tempdir();
    let path = segment_path(dir.path(), 0);
    fs::write(&path, event_bytes("a", 0)).unwrap();
    // Opened for writing only, so every read of it fails (EBADF).
    let unreadable = fs::OpenOptions::new().write(true).open(&path).unwrap();
    let files = SegmentFiles::new();
    files.insert(0, Arc::new(unreadable), &path);
    let one = files.read(0, 4).unwrap_err();
    let many = files.read_many(&[(0, 4), (8, 4)]).unwrap_err();
    for e in [one, many] {
        match &e {
            WalError::Io {
                context,
                path: named,
                ..
            } => {
                assert_eq!(*context, "reading");
                assert_eq!(named, &path);
            }
            other => panic!("{other:?}"),
        }
        let shown = crate::StoreError::from(e).to_string();
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert!(shown.contains("write-ahead log"), "{shown}");
        assert!(!shown.contains("sled"), "{shown}");
    }
}

#[test]
fn the_torn_tail_or_damage_table_over_every_combination_of_facts() {
    // `decide`, row by row. Columns: the facts about what follows the bad record (valid_after,
    // run_to_end_after; a run to the end starts with a valid record, so (None, Some) cannot
    // be), then the decision for damage without and with repair. R n / S n: refuse / skip
    // with damage up to n (`-`: the segment's end, 100). Every row is checked in the 8 cells
    // (last segment, below the synced-through mark, repair): in the last segment at or above
    // the mark the decision is C (cut the tail) whatever follows; elsewhere the row's.
    const END: usize = 100;
    let follows = [
        ("A", None, None),
        ("B", Some(20), None),
        ("C", Some(20), Some(20)),
        ("D", Some(20), Some(30)),
    ];
    let table: [(Header, [&str; 2]); 12] = [
        (Header::Unreadable, ["R-", "S-"]),
        (Header::Unreadable, ["R20", "S-"]),
        (Header::Unreadable, ["R20", "S20"]),
        (Header::Unreadable, ["R20", "S30"]),
        (Header::Whole(10), ["R-", "S-"]),
        (Header::Whole(10), ["R20", "S-"]),
        (Header::Whole(10), ["R20", "S20"]),
        (Header::Whole(10), ["R20", "S30"]),
        (Header::RunsPast, ["R-", "S-"]),
        (Header::RunsPast, ["R-", "S-"]),
        (Header::RunsPast, ["R20", "S20"]),
        (Header::RunsPast, ["R30", "S30"]),
    ];
    let show = |d: Decision| match d {
        Decision::CutTail => "C".to_owned(),
        Decision::Refuse { to, valid_follow } | Decision::Skip { to, valid_follow } => {
            let kind = if matches!(d, Decision::Refuse { .. }) {
                "R"
            } else {
                "S"
            };
            assert_eq!(valid_follow, to != END, "{d:?}");
            if to == END {
                format!("{kind}-")
            } else {
                format!("{kind}{to}")
            }
        }
    };
    let mut rows = 0;
    for (i, (header, damage)) in table.iter().enumerate() {
        let (name, valid_after, run_to_end_after) = follows[i % 4];
        for cell in 0..8u8 {
            let (last_segment, below_mark, repair) = (cell & 4 != 0, cell & 2 != 0, cell & 1 != 0);
            let facts = Facts {
                header: *header,
                valid_after,
                run_to_end_after,
                last_segment,
                below_mark,
                repair,
            };
            let got = show(decide(&facts, END));
            let want = if last_segment && !below_mark {
                "C"
            } else {
                damage[usize::from(repair)]
            };
            assert_eq!(
                got, want,
                "{header:?} {name} last={last_segment} below_mark={below_mark} repair={repair}"
            );
            // The promises the table keeps, stated apart from it: only the last segment's
            // unsynced tail is ever cut, and all of it is; a repair never refuses and a
            // refusal never skips.
            assert_eq!(got == "C", last_segment && !below_mark);
            assert_eq!(got.starts_with('R'), !repair && got != "C");
            rows += 1;
        }
    }
    assert_eq!(rows, 3 * 4 * 8, "every combination");
    // Where the search for what follows starts.
    assert_eq!(Header::Whole(10).skip(), 10);
    assert_eq!(Header::RunsPast.skip(), 1);
    assert_eq!(Header::Unreadable.skip(), 1);
}

#[test]
fn a_bad_records_header_is_read_with_the_cores_peek() {
    let whole = event_bytes("a", 0);
    let n = whole.len();
    let mut bad_crc = whole.clone();
    bad_crc[n - 1] ^= 1;
    assert_eq!(Header::of(&bad_crc), Header::Whole(n));
    assert_eq!(Header::of(&whole[..n - 1]), Header::RunsPast);
    let mut bad_magic = whole.clone();
    bad_magic[0] ^= 1;
    assert_eq!(Header::of(&bad_magic), Header::Unreadable);
    assert_eq!(Header::of(&whole[..3]), Header::Unreadable);
    let mut huge = whole;
    huge[3..7].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(Header::of(&huge), Header::RunsPast, "beyond the bound");
}
