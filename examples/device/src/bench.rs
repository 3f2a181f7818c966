//! `scripts/firmware bench`: instead of the agent, the image measures the event path on the
//! board and prints the result on the UART. QEMU runs it with `-icount shift=0`, which advances
//! the emulated clock by 1 ns per instruction, so the figures count instructions (on a
//! Cortex-M3, about one cycle each), not the host's speed.
//!
//! Measured: appending a reading to a 32-event ring, and writing one
//! `notifications/tasks/event` (serialised by the core, then written to the UART's data
//! register byte by byte), each over many repetitions.

use taskstream_core::rpc::{self, EventNotification};
use taskstream_core::{EventRing, EventType, Millis, Payload, RetentionPolicy};

use crate::out::Out;

/// Repetitions of each measurement.
const ROUNDS: u64 = 2000;
const TASK_ID: &str = "0f9e8d7c6b5a49382716051423324150";

/// Nanoseconds of emulated time since boot: milliseconds from the SysTick count, the rest from
/// SysTick's current value (40 ns per tick of the 25 MHz clock).
fn ns() -> u64 {
    loop {
        let before = crate::now().0;
        let value = crate::systick_value();
        if crate::now().0 == before {
            let reload = u64::from(crate::board::CORE_HZ / 1000 - 1);
            return before * 1_000_000 + (reload - u64::from(value)) * 40;
        }
    }
}

fn report(out: &mut Out, what: &str, total_ns: u64, bytes: u64) {
    out.clear();
    out.s("bench ")
        .s(what)
        .s(": ")
        .u64(ROUNDS)
        .s(" in ")
        .u64(total_ns / 1000);
    out.s(" us emulated, ")
        .u64(total_ns / ROUNDS)
        .s(" ns (instructions) each");
    if bytes > 0 {
        out.s(", ").u64(bytes / ROUNDS).s(" bytes each");
    }
    if let Some(line) = out.message() {
        crate::uart_write(line);
        crate::uart_write(b"\n");
    }
}

pub(crate) fn run() -> ! {
    static mut RING: EventRing<32, 2048> = EventRing::new();
    static mut OUT: Out = Out::new();
    // SAFETY: the only references to RING and OUT, taken once; no interrupt handler uses them.
    #[allow(unsafe_code)]
    let (ring, out) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(RING),
            &mut *core::ptr::addr_of_mut!(OUT),
        )
    };
    let policy = RetentionPolicy::DEFAULT;
    let payload = br#"{"i":17,"reading":123456,"uptime_ms":4242}"#;

    let start = ns();
    for i in 0..ROUNDS {
        if let (Ok(ty), Ok(p)) = (
            EventType::new("dev.taskstream.sample"),
            Payload::new(core::hint::black_box(payload)),
        ) {
            let _ = ring.append(Millis(i), ty, p, &policy);
        }
    }
    let append_ns = ns() - start;

    let retained = ring.retained();
    let mut bytes = 0u64;
    let start = ns();
    for i in 0..ROUNDS {
        let Some(seq) = taskstream_core::Seq::new(retained.earliest().get() + i % 32) else {
            continue;
        };
        let Some(ev) = ring.get(seq) else {
            continue;
        };
        let note = EventNotification {
            task_id: TASK_ID,
            seq,
            event_type: ev.event_type,
            payload: ev.payload,
        };
        if let Ok(n) = rpc::write_event(&note, out.buf_mut()) {
            out.set_len(n);
            if let Some(line) = out.message() {
                crate::uart_write(line);
                crate::uart_write(b"\n");
                bytes += n as u64 + 1;
            }
        }
    }
    let write_ns = ns() - start;

    report(
        out,
        "ring append (validate type and payload, store)",
        append_ns,
        0,
    );
    report(
        out,
        "event written to the UART (serialise + UART)",
        write_ns,
        bytes,
    );
    crate::uart_write(b"bench done\n");
    exit_qemu()
}

/// Ends the emulation through ARM semihosting (`SYS_EXIT`, "application exit"); QEMU runs the
/// bench image with semihosting enabled. Without a debugger or QEMU this would halt the core.
fn exit_qemu() -> ! {
    loop {
        // SAFETY: the semihosting call reads r0 and r1 only.
        #[allow(unsafe_code)]
        unsafe {
            core::arch::asm!(
                "bkpt 0xab",
                in("r0") 0x18u32,
                in("r1") 0x20026u32,
                options(nostack)
            );
        }
    }
}
