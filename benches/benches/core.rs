//! Core benchmarks: ring append by payload size (with `memcpy` of the same bytes as the bound
//! beside it), the resume decision, the pump, writing one event notification, parsing
//! `tasks/stream`, and decoding one stored log record (what every replayed event read from the
//! store costs: its CRC-32C and the re-validation of its payload, each shown alone beside it).
//! Throughput is reported in bytes/s.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use taskstream_core::record::{self, EventRecord, Record};
use taskstream_core::resume::{decide, Lifecycle, Retained};
use taskstream_core::streams::{Progress, Pump};
use taskstream_core::{json, rpc};
use taskstream_core::{
    EventRing, EventType, Millis, Payload, RequestId, RetentionPolicy, Seq, StreamTable,
};

const TYPE: &str = "dev.taskstream.tick";

fn payload_of(bytes: usize) -> Vec<u8> {
    // {"i":0,"data":"xxxx…"} of exactly `bytes` bytes.
    let overhead = r#"{"i":0,"data":""}"#.len();
    format!(r#"{{"i":0,"data":"{}"}}"#, "x".repeat(bytes - overhead)).into_bytes()
}

fn ring_append(c: &mut Criterion) {
    let policy = RetentionPolicy {
        max_events: u32::MAX,
        max_bytes: u32::MAX,
        max_payload_bytes: u32::MAX,
        ..RetentionPolicy::DEFAULT
    };
    let ty = EventType::new(TYPE).expect("valid type");
    let mut group = c.benchmark_group("ring_append");
    for size in [64usize, 1024, 16 * 1024] {
        let text = payload_of(size);
        group.throughput(Throughput::Bytes(size as u64));
        let mut ring: Box<EventRing<1024, { 1 << 20 }>> = Box::new(EventRing::new());
        group.bench_function(format!("{size}B"), |b| {
            b.iter(|| {
                let payload = Payload::new(black_box(&text)).expect("valid payload");
                black_box(ring.append(Millis(0), ty, payload, &policy).expect("fits"))
            })
        });
        // The bound: copying the same bytes, nothing else.
        let mut dst = vec![0u8; size];
        group.bench_function(format!("{size}B_memcpy"), |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&text));
                black_box(&dst);
            })
        });
    }
    group.finish();
}

fn resume_decision(c: &mut Criterion) {
    let retained = Retained::new(
        Seq::new(1000).expect("seq"),
        Seq::new(100_000).expect("seq"),
    )
    .expect("range");
    c.bench_function("resume_decide", |b| {
        b.iter(|| {
            black_box(decide(
                black_box(Seq::new(50_000)),
                black_box(retained),
                Lifecycle::Running,
            ))
        })
    });
}

fn pump(c: &mut Criterion) {
    let progress = Progress {
        retained: Retained::new(Seq::ZERO, Seq::new(1_000_000).expect("seq")).expect("range"),
        lifecycle: Lifecycle::Running,
    };
    let mut group = c.benchmark_group("pump");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("one_stream_per_event", |b| {
        b.iter_batched_ref(
            || {
                let mut t: StreamTable<u32, 16> = StreamTable::new(16);
                let start = decide(None, progress.retained, Lifecycle::Running).expect("start");
                t.open(RequestId::Number(1), 0, start).expect("open");
                t
            },
            |t| {
                for _ in 0..1000 {
                    match t.poll(|_| Some(progress)) {
                        Some(Pump::Event { seq, .. }) => {
                            black_box(seq);
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn serialise_event(c: &mut Criterion) {
    let payload = payload_of(300);
    let task_id = "0f9e8d7c6b5a49382716051423324150";
    let event = rpc::EventNotification {
        task_id,
        seq: Seq::new(12_345).expect("seq"),
        event_type: TYPE,
        payload: &payload,
    };
    let len = rpc::event_len(&event);
    let mut out = vec![0u8; len];
    let mut group = c.benchmark_group("serialise_event_300B");
    group.throughput(Throughput::Bytes(len as u64));
    group.bench_function("taskstream_splice", |b| {
        b.iter(|| black_box(rpc::write_event(black_box(&event), &mut out).expect("fits")))
    });
    // The same notification through serde_json, payload as a parsed value (the usual way).
    let value: serde_json::Value = serde_json::from_slice(&payload).expect("json");
    let mut sink = Vec::with_capacity(len * 2);
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            sink.clear();
            let msg = serde_json::json!({
                "jsonrpc": "2.0",
                "method": "notifications/tasks/event",
                "params": {
                    "seq": 12_345,
                    "taskId": task_id,
                    "type": TYPE,
                    "payload": &value,
                    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}},
                },
            });
            serde_json::to_writer(&mut sink, black_box(&msg)).expect("write");
            black_box(sink.len())
        })
    });
    group.bench_function("memcpy_bound", |b| {
        let src = out.clone();
        let mut dst = vec![0u8; len];
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    group.finish();
}

fn parse_stream_request(c: &mut Criterion) {
    let line = br#"{"jsonrpc":"2.0","id":17,"method":"tasks/stream","params":{"taskId":"0f9e8d7c6b5a49382716051423324150","after":41,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#;
    let mut group = c.benchmark_group("parse_tasks_stream");
    group.throughput(Throughput::Bytes(line.len() as u64));
    group.bench_function("taskstream_core", |b| {
        b.iter(|| {
            let mut scratch = [0u8; 256];
            match rpc::parse(black_box(line), &mut scratch) {
                Ok(rpc::Message::Request(r)) => {
                    black_box(rpc::parse_stream_params(r.params.unwrap_or_default()).is_ok())
                }
                _ => panic!("not a request"),
            }
        })
    });
    group.finish();
}

fn decode_record(c: &mut Criterion) {
    let payload = payload_of(300);
    let rec = Record::Event(EventRecord {
        task_id: "0f9e8d7c6b5a49382716051423324150",
        seq: Seq::new(12_345).expect("seq"),
        at: Millis(1_700_000_000_000),
        event_type: TYPE,
        payload: &payload,
    });
    let mut buf = vec![0u8; record::encoded_len(&rec).expect("len")];
    let bytes = record::encode(&rec, &mut buf).expect("encode").to_vec();
    let mut group = c.benchmark_group("record_decode_300B");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| black_box(record::decode(black_box(&bytes)).expect("decode")))
    });
    group.bench_function("decode_written", |b| {
        b.iter(|| black_box(record::decode_written(black_box(&bytes)).expect("decode")))
    });
    group.bench_function("crc32c_alone", |b| {
        b.iter(|| black_box(record::crc32c(black_box(&bytes))))
    });
    group.bench_function("payload_validation_alone", |b| {
        b.iter(|| black_box(json::validate_object(black_box(&payload)).expect("valid")))
    });
    group.bench_function("memcpy_bound", |b| {
        let mut dst = vec![0u8; bytes.len()];
        b.iter(|| {
            dst.copy_from_slice(black_box(&bytes));
            black_box(&dst);
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    ring_append,
    resume_decision,
    pump,
    serialise_event,
    parse_stream_request,
    decode_record
);
criterion_main!(benches);
