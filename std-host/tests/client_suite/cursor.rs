//! The file cursor store: what a save promises, under concurrent readers and after a crash
//! in the middle of a save.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use taskstream_client::{CursorError, CursorStore, FileCursorStore};

fn files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn saves_survive_a_new_store_and_leave_no_temporary_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = FileCursorStore::open(dir.path()).expect("open");
    assert_eq!(store.load("task-a").expect("load"), None);
    store.save("task-a", 5).expect("save");
    store.save("task-a", 6).expect("save");
    store.save("task-b", 0).expect("save");
    let reopened = FileCursorStore::open(dir.path()).expect("reopen");
    assert_eq!(reopened.load("task-a").expect("load"), Some(6));
    assert_eq!(reopened.load("task-b").expect("load"), Some(0));
    assert_eq!(
        files(dir.path()),
        vec!["7461736b2d61.cursor", "7461736b2d62.cursor"],
        "one file per task, no leftovers"
    );
    store.clear("task-a").expect("clear");
    assert_eq!(reopened.load("task-a").expect("load"), None);
    assert!(matches!(
        store.save("task-a", 1 << 53),
        Err(CursorError::InvalidSeq { .. })
    ));
}

#[test]
fn a_concurrent_reader_sees_the_old_or_the_new_cursor_never_a_torn_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_owned();
    let done = Arc::new(AtomicBool::new(false));
    let writer_done = Arc::clone(&done);
    // Atomicity does not depend on fsync; without it the test runs in well under a second.
    let writer = std::thread::spawn(move || {
        let mut store = FileCursorStore::open(&path).expect("open").without_sync();
        for seq in 0..3000u64 {
            store.save("t", seq * 1_000_003).expect("save");
        }
        writer_done.store(true, Ordering::SeqCst);
    });
    let reader = FileCursorStore::open(dir.path()).expect("open");
    let mut last = 0;
    let mut reads = 0u64;
    loop {
        let finished = done.load(Ordering::SeqCst);
        if let Some(seq) = reader.load("t").expect("every read parses") {
            assert_eq!(seq % 1_000_003, 0, "a value the writer wrote");
            assert!(seq >= last, "cursors never go back: {seq} after {last}");
            last = seq;
            reads += 1;
        }
        if finished {
            break;
        }
    }
    writer.join().expect("writer");
    assert_eq!(last, 2999 * 1_000_003, "the final read sees the last save");
    assert!(reads > 0);
    assert_eq!(files(dir.path()), vec!["74.cursor"]);
}

#[test]
fn a_crash_mid_save_leaves_the_previous_cursor_and_corruption_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = FileCursorStore::open(dir.path()).expect("open");
    store.save("t", 41).expect("save");
    // A crash after the temporary file was written but before the rename.
    std::fs::write(dir.path().join("74.tmp.4242.7"), b"{\"taskId\":\"t\",\"se").expect("write");
    let after_crash = FileCursorStore::open(dir.path()).expect("reopen");
    assert_eq!(after_crash.load("t").expect("load"), Some(41));
    store.save("t", 42).expect("save after the crash");
    assert_eq!(after_crash.load("t").expect("load"), Some(42));

    // A cursor file that is not what the store writes is an error, never "no cursor".
    std::fs::write(dir.path().join("74.cursor"), b"{\"taskId\":\"t\",\"se").expect("write");
    assert!(matches!(
        after_crash.load("t"),
        Err(CursorError::Corrupt { .. })
    ));
    std::fs::write(
        dir.path().join("74.cursor"),
        b"{\"taskId\":\"u\",\"seq\":1}\n",
    )
    .expect("write");
    assert!(matches!(
        after_crash.load("t"),
        Err(CursorError::Corrupt { .. })
    ));
    std::fs::write(
        dir.path().join("74.cursor"),
        b"{\"taskId\":\"t\",\"seq\":-1}\n",
    )
    .expect("write");
    assert!(matches!(
        after_crash.load("t"),
        Err(CursorError::Corrupt { .. })
    ));
}
