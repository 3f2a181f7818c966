//! Proof that the core never allocates: a counting global allocator wraps the system one, and
//! the hot paths (append with eviction, expiry, the resume decision, the pump, JSON validation
//! and compaction, serialising the stream messages, parsing a request, framing) run between
//! two readings of the counter. This file is its own test binary with no harness, so no other
//! test's allocations can be counted.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use taskstream_core::frame::{FeedResult, LineReader};
use taskstream_core::resume::{decide, Lifecycle};
use taskstream_core::streams::{Progress, Pump};
use taskstream_core::{
    json, rpc, EventRing, EventType, Millis, Payload, RequestId, RetentionPolicy, Seq, StreamTable,
};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

type Ring = EventRing<64, 4096>;

/// Everything the core does on a hot path, with no allocation allowed. Returns a checksum so
/// the optimiser cannot drop the work.
fn workload(ring: &mut Ring, table: &mut StreamTable<u8, 8>) -> u64 {
    let policy = RetentionPolicy::DEFAULT;
    let ty = EventType::new("dev.taskstream.tick").unwrap_or_else(|_| std::process::abort());
    let mut sum = 0u64;
    for i in 0..1000u64 {
        let text: &[u8] = if i % 2 == 0 {
            br#"{"i": 1, "data": "abcdefghijklmnopqrstuvwxyz"}"#
        } else {
            br#"{"nested":{"a":[1,2,{"b":null}],"c":"\u00e9\n"}}"#
        };
        let Ok(payload) = Payload::new(text) else {
            std::process::abort()
        };
        match ring.append(Millis(i), ty, payload, &policy) {
            Ok(a) => sum += a.seq.get() + a.evicted.map_or(0, |e| e.count),
            Err(_) => std::process::abort(),
        }
        let mut compact = [0u8; 128];
        sum += json::compact_into(text, &mut compact).map_or(0, |n| n as u64);
    }
    let expired = ring.expire(
        Millis(2000),
        &RetentionPolicy {
            max_event_age: Millis(1990),
            ..policy
        },
    );
    sum += expired.map_or(0, |e| e.count);
    let retained = ring.retained();
    for after in [
        None,
        Seq::new(0),
        Seq::new(950),
        Seq::new(998),
        Seq::new(5000),
    ] {
        sum += match decide(after, retained, Lifecycle::Running) {
            Ok(r) => r.first_seq().map_or(1, Seq::get),
            Err(_) => 2,
        };
    }
    let Ok(start) = decide(Seq::new(990), retained, Lifecycle::Terminal) else {
        std::process::abort()
    };
    if table.open(RequestId::Number(7), 0, start).is_err() {
        std::process::abort();
    }
    let progress = Progress {
        retained: ring.retained(),
        lifecycle: Lifecycle::Terminal,
    };
    while let Some(p) = table.poll(|_| Some(progress)) {
        match p {
            Pump::Event { seq, .. } => {
                sum += ring.get(seq).map_or(0, |e| e.payload.len() as u64);
            }
            Pump::Complete { .. } | Pump::Gone { .. } => sum += 1,
        }
    }
    sum += serialise_and_parse(ring);
    sum
}

/// The wire half: serialising events and results, parsing requests, framing lines.
fn serialise_and_parse(ring: &Ring) -> u64 {
    let mut sum = 0u64;
    let mut out = [0u8; 512];
    for event in ring.iter_from(ring.retained().earliest()) {
        let n = rpc::EventNotification {
            task_id: "0f9e8d7c6b5a49382716051423324150",
            seq: event.seq,
            event_type: event.event_type,
            payload: event.payload,
        };
        sum += rpc::write_event(&n, &mut out).map_or(0, |len| len as u64);
    }
    let id = RequestId::Number(42);
    sum += rpc::write_stream_result(&id, rpc::Era::Modern, &mut out).map_or(0, |n| n as u64);
    let gone = rpc::RpcError::events_gone("task-\"1\"", Seq::ZERO);
    sum += rpc::write_error(Some(&id), &gone, &mut out).map_or(0, |n| n as u64);

    let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks\\/stream\",\"params\":{\"taskId\":\"t-1\",\"after\":41}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\n";
    let mut line_buf = [0u8; 256];
    let mut reader = LineReader::new(&mut line_buf);
    let mut rest = input;
    loop {
        match reader.feed(rest) {
            FeedResult::Line { line, remaining } => {
                let mut scratch = [0u8; 256];
                match rpc::parse(line, &mut scratch) {
                    Ok(rpc::Message::Request(r)) => {
                        if let Some(params) = r.params {
                            if let Ok(p) = rpc::parse_stream_params(params) {
                                sum += p.after.map_or(0, Seq::get) + p.task_id.len() as u64;
                            }
                        }
                    }
                    Ok(rpc::Message::Notification(n)) => {
                        if let Some(params) = n.params {
                            sum += u64::from(rpc::parse_cancelled_params(params).is_ok());
                        }
                    }
                    Ok(_) | Err(_) => std::process::abort(),
                }
                rest = remaining;
            }
            FeedResult::TooLong { remaining, .. } => rest = remaining,
            FeedResult::NeedMore => break,
        }
    }
    sum
}

fn main() {
    // The counter must see an allocation when there is one, or a zero below would prove nothing.
    let probe = ALLOCATIONS.load(Ordering::SeqCst);
    let control = std::hint::black_box(vec![1u8; 16]);
    if ALLOCATIONS.load(Ordering::SeqCst) == probe || control.len() != 16 {
        println!("test result: FAILED. 0 passed; 1 failed (the counting allocator counts nothing)");
        std::process::exit(1);
    }
    drop(control);
    let mut ring = Box::new(Ring::new());
    let mut table = Box::new(StreamTable::<u8, 8>::new(8));
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let sum = workload(&mut ring, &mut table);
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    let allocations = after - before;
    println!("no_alloc: workload checksum {sum}, {allocations} allocations");
    if allocations != 0 || sum == 0 {
        println!("test result: FAILED. 0 passed; 1 failed");
        std::process::exit(1);
    }
    println!("test result: ok. 1 passed; 0 failed");
}
