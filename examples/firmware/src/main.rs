//! A firmware-style program that links the whole of what a device needs from `taskstream-core`
//! to serve `tasks/stream` over a serial line: one event ring, the stream table, the line
//! framer, the JSON-RPC parser and the serialisers (events, results, errors). It exists to be
//! measured: `scripts/footprint` builds it for `thumbv7em-none-eabihf` with `opt-level = "z"`,
//! LTO and `panic = "abort"`, and reports flash (`.text` + `.rodata` + `.vector_table` +
//! `.data`'s load image) and static RAM (`.data` + `.bss`).
//!
//! There is no heap: no allocator is linked, and every buffer is a field of [`Device`], one
//! zero-initialised `static` (`.bss`). The "UART" is `black_box`: bytes given to it count as used, so nothing is
//! optimised away, and the input line passes through `black_box` so nothing is folded at
//! compile time.

#![no_std]
#![no_main]

use core::hint::black_box;
use core::mem::MaybeUninit;
use core::panic::PanicInfo;

use taskstream_core::frame::{FeedResult, LineReader};
use taskstream_core::resume::{decide, Lifecycle};
use taskstream_core::rpc::{self, Era, EventNotification, Message, RpcError};
use taskstream_core::streams::{Progress, Pump};
use taskstream_core::{EventRing, EventType, Millis, Payload, RetentionPolicy, StreamTable};

/// Events the device keeps for its one task.
const RING_EVENTS: usize = 32;
/// Bytes of event types and payloads the ring holds.
const RING_BYTES: usize = 4096;
/// Concurrent `tasks/stream` requests.
const STREAMS: usize = 4;
/// The longest request line accepted.
const LINE_BYTES: usize = 512;
/// The largest outgoing message.
const OUT_BYTES: usize = 1024;

/// The device's one task id, as the host knows it.
const TASK_ID: &str = "0f9e8d7c6b5a49382716051423324150";

/// A request as it would arrive on the serial line (split anywhere in real life).
static INPUT: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"tasks/stream","params":{"taskId":"0f9e8d7c6b5a49382716051423324150","after":1}}
"#;

/// A sensor reading as an event payload.
static READING: &[u8] = br#"{"i":0,"data":"temperature 21.5 C"}"#;

/// Everything the program keeps: one static, no heap.
struct Device {
    ring: EventRing<RING_EVENTS, RING_BYTES>,
    streams: StreamTable<u8, STREAMS>,
    line: [u8; LINE_BYTES],
    scratch: [u8; 256],
    out: [u8; OUT_BYTES],
    now: Millis,
}

/// Uninitialised, so it lives in `.bss` (zeroed RAM, no flash image); [`reset`] fills it in.
/// An initialised `static` would go to `.data` and cost its whole size in flash too.
static mut DEVICE: MaybeUninit<Device> = MaybeUninit::uninit();

/// The serial port: whatever is handed to it counts as sent.
fn uart_write(bytes: &[u8]) {
    black_box(bytes);
}

/// Writes an error answer.
fn answer_error(out: &mut [u8], id: Option<&taskstream_core::RequestId>, e: &RpcError<'_>) {
    if let Ok(n) = rpc::write_error(id, e, out) {
        uart_write(&out[..n]);
    }
}

/// One turn of the main loop: a sensor event, any complete request line, then the pump.
fn step(dev: &mut Device, input: &[u8]) {
    dev.now = Millis(dev.now.0.wrapping_add(10));
    let policy = RetentionPolicy::DEFAULT;
    if let (Ok(ty), Ok(payload)) = (
        EventType::new("dev.taskstream.reading"),
        Payload::new(black_box(READING)),
    ) {
        // A full ring evicts its oldest event; the stream table learns of it via `retained`.
        let _ = dev.ring.append(dev.now, ty, payload, &policy);
    }

    let mut reader = LineReader::new(&mut dev.line);
    let mut rest = input;
    loop {
        let line = match reader.feed(rest) {
            FeedResult::Line { line, remaining } => {
                rest = remaining;
                line
            }
            FeedResult::TooLong { remaining, .. } => {
                rest = remaining;
                answer_error(&mut dev.out, None, &RpcError::MESSAGE_TOO_LONG);
                continue;
            }
            FeedResult::NeedMore => break,
        };
        match rpc::parse(line, &mut dev.scratch) {
            Ok(Message::Request(r)) if r.method == rpc::method::TASKS_STREAM => {
                let params = match rpc::parse_stream_params(r.params.unwrap_or_default()) {
                    Ok(p) => p,
                    Err(e) => {
                        answer_error(&mut dev.out, Some(&r.id), &e.into());
                        continue;
                    }
                };
                if params.task_id.as_str() != TASK_ID {
                    answer_error(&mut dev.out, Some(&r.id), &RpcError::UNKNOWN_TASK);
                    continue;
                }
                match decide(params.after, dev.ring.retained(), Lifecycle::Running) {
                    Ok(start) => {
                        if dev.streams.open(r.id.clone(), 0, start).is_err() {
                            answer_error(&mut dev.out, Some(&r.id), &RpcError::STREAM_LIMIT);
                        }
                    }
                    Err(e) => {
                        answer_error(
                            &mut dev.out,
                            Some(&r.id),
                            &RpcError::from_resume(e, TASK_ID),
                        );
                    }
                }
            }
            Ok(_) => {}
            Err(e) => answer_error(&mut dev.out, None, &RpcError::from(&e)),
        }
    }

    let progress = Progress {
        retained: dev.ring.retained(),
        lifecycle: Lifecycle::Running,
    };
    while let Some(step) = dev.streams.poll(|_| Some(progress)) {
        match step {
            Pump::Event { seq, .. } => {
                let Some(ev) = dev.ring.get(seq) else {
                    continue;
                };
                let note = EventNotification {
                    task_id: TASK_ID,
                    seq,
                    event_type: ev.event_type,
                    payload: ev.payload,
                };
                if let Ok(n) = rpc::write_event(&note, &mut dev.out) {
                    uart_write(&dev.out[..n]);
                }
            }
            Pump::Complete { id, .. } => {
                if let Ok(n) = rpc::write_stream_result(&id, Era::Legacy, &mut dev.out) {
                    uart_write(&dev.out[..n]);
                }
            }
            Pump::Gone { id, earliest, .. } => {
                answer_error(
                    &mut dev.out,
                    Some(&id),
                    &RpcError::events_gone(TASK_ID, earliest),
                );
            }
        }
    }
}

/// The reset handler: the program's entry.
#[no_mangle]
pub extern "C" fn reset() -> ! {
    // SAFETY: the only reference to DEVICE ever made, taken once, on the one core, before
    // anything else runs; there are no interrupt handlers.
    #[allow(unsafe_code)]
    let slot = unsafe { &mut *core::ptr::addr_of_mut!(DEVICE) };
    let dev = slot.write(Device {
        ring: EventRing::new(),
        streams: StreamTable::new(STREAMS),
        line: [0; LINE_BYTES],
        scratch: [0; 256],
        out: [0; OUT_BYTES],
        now: Millis(0),
    });
    loop {
        step(dev, black_box(INPUT));
    }
}

/// The vector table's reset entry (the initial stack pointer is written by the linker script).
#[link_section = ".vector_table.reset"]
#[used]
static RESET_VECTOR: extern "C" fn() -> ! = reset;

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
