//! The firmware MCP agent: `taskstream-core` on a microcontroller, serving MCP with SEP-2694
//! task event streams over the board's UART, as a stdio MCP server would over its pipes.
//!
//! Two boards, as QEMU emulates them, chosen when the image is built (`scripts/firmware
//! --board`): ARM's MPS2 with the AN385 image (`mps2-an385`, Cortex-M3, `thumbv7m-none-eabi`,
//! a CMSDK APB UART), the default, and the BBC micro:bit (`microbit`, nRF51822, Cortex-M0,
//! `thumbv6m-none-eabi`, the nRF51 UART; feature `microbit`). [`board`] holds what differs:
//! the UART's registers, the core clock, the interrupt numbers. On both, the UART carries
//! newline-delimited JSON-RPC and SysTick gives the time (1 ms ticks of the core clock);
//! `scripts/firmware run` starts the image with the UART on stdin/stdout.
//!
//! There is no heap: no allocator is linked, every buffer is a `static` of fixed size, and the
//! event rings, the stream table, the line framer, the parser and the stream serialisers are
//! the core's. This file is the board-independent rest: start-up, the vector table, the two
//! interrupt handlers (SysTick counts milliseconds; the UART's receive interrupt moves bytes
//! into a FIFO) and the main loop. Nothing uses an atomic read-modify-write, which the
//! Cortex-M0 lacks: each atomic has one writer. [`agent`] is the MCP agent, which knows nothing
//! of the board.

#![no_std]
#![no_main]
// The bench image runs a measurement instead of the agent, which it does not use.
#![cfg_attr(feature = "bench", allow(dead_code, unused_imports))]

mod agent;
#[cfg(feature = "bench")]
mod bench;
mod mem;
mod out;
mod params;

use core::cell::UnsafeCell;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use taskstream_core::frame::{FeedResult, LineReader};
use taskstream_core::Millis;

/// The longest request line accepted; a longer one is answered -32600 and skipped.
const LINE_BYTES: usize = 512;
/// Bytes the receive interrupt can hold before the main loop takes them.
const RX_FIFO_BYTES: usize = 128;

/// The board: its UART, clock and interrupt numbers. One module per board, the same functions
/// in each; the rest of the program knows no register.
#[cfg_attr(not(feature = "microbit"), path = "board/an385.rs")]
#[cfg_attr(feature = "microbit", path = "board/microbit.rs")]
mod board;

/// SysTick and the NVIC, the same on the Cortex-M0 and M3.
pub(crate) mod scs {
    pub(crate) const SYST_CSR: usize = 0xE000_E010;
    pub(crate) const SYST_RVR: usize = 0xE000_E014;
    pub(crate) const SYST_CVR: usize = 0xE000_E018;
    pub(crate) const NVIC_ISER0: usize = 0xE000_E100;
}

fn read(addr: usize) -> u32 {
    // SAFETY: `addr` is one of the memory-mapped registers named above, 4-byte aligned.
    #[allow(unsafe_code)]
    unsafe {
        core::ptr::read_volatile(addr as *const u32)
    }
}

fn write(addr: usize, value: u32) {
    // SAFETY: as in `read`.
    #[allow(unsafe_code)]
    unsafe {
        core::ptr::write_volatile(addr as *mut u32, value)
    }
}

/// Milliseconds since boot, counted by the SysTick handler.
static MILLIS: AtomicU32 = AtomicU32::new(0);
/// The upper half of the millisecond count (it wraps after 49 days).
static MILLIS_HIGH: AtomicU32 = AtomicU32::new(0);

/// The board's clock: milliseconds since boot.
pub(crate) fn now() -> Millis {
    loop {
        let high = MILLIS_HIGH.load(Ordering::Acquire);
        let low = MILLIS.load(Ordering::Acquire);
        if MILLIS_HIGH.load(Ordering::Acquire) == high {
            return Millis((u64::from(high) << 32) | u64::from(low));
        }
    }
}

/// SysTick's current count: a reading of the board that changes with every core cycle, the
/// "sensor" of the `sample` tool, and the seed of task ids.
pub(crate) fn systick_value() -> u32 {
    read(scs::SYST_CVR)
}

/// Timing jitter: SysTick's count at every byte received, folded together by the receive
/// interrupt. The board has no random number generator; the arrival times of a peer's bytes,
/// at 40 ns resolution, are the unpredictable input it has. Task ids are drawn from it.
static JITTER: AtomicU32 = AtomicU32::new(0);

/// The jitter gathered so far.
pub(crate) fn jitter() -> u32 {
    JITTER.load(Ordering::Relaxed)
}

/// A single-producer (the receive interrupt), single-consumer (the main loop) byte FIFO.
struct RxFifo {
    buf: UnsafeCell<[u8; RX_FIFO_BYTES]>,
    /// Bytes pushed, ever (wrapping); written only by the interrupt.
    head: AtomicUsize,
    /// Bytes taken, ever (wrapping); written only by the main loop.
    tail: AtomicUsize,
}

// SAFETY: one producer writes only the slot at `head` before publishing it, one consumer reads
// only slots below `head` before releasing them with `tail`; there is a single core.
#[allow(unsafe_code)]
unsafe impl Sync for RxFifo {}

static RX: RxFifo = RxFifo {
    buf: UnsafeCell::new([0; RX_FIFO_BYTES]),
    head: AtomicUsize::new(0),
    tail: AtomicUsize::new(0),
};

impl RxFifo {
    /// In the interrupt: moves bytes from the UART while there is room. When the FIFO is full
    /// the byte stays in the UART, which holds the line (QEMU stops feeding it): nothing is lost.
    fn fill_from_uart(&self) -> bool {
        let tail = self.tail.load(Ordering::Acquire);
        let mut head = self.head.load(Ordering::Relaxed);
        while board::rx_ready() {
            if head.wrapping_sub(tail) >= RX_FIFO_BYTES {
                return false;
            }
            let byte = board::rx_byte();
            // SAFETY: the slot at `head` is not visible to the consumer until `head` moves.
            #[allow(unsafe_code)]
            unsafe {
                (*self.buf.get())[head % RX_FIFO_BYTES] = byte;
            }
            head = head.wrapping_add(1);
            self.head.store(head, Ordering::Release);
        }
        true
    }

    /// In the main loop: copies out what has arrived, at most `dst.len()` bytes.
    fn take(&self, dst: &mut [u8]) -> usize {
        let head = self.head.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut n = 0;
        while tail != head && n < dst.len() {
            // SAFETY: slots below `head` were published by the producer and are not rewritten
            // until `tail` passes them.
            #[allow(unsafe_code)]
            let byte = unsafe { (*self.buf.get())[tail % RX_FIFO_BYTES] };
            if let Some(d) = dst.get_mut(n) {
                *d = byte;
            }
            n += 1;
            tail = tail.wrapping_add(1);
        }
        self.tail.store(tail, Ordering::Release);
        n
    }

    fn is_empty(&self) -> bool {
        self.head.load(Ordering::Acquire) == self.tail.load(Ordering::Acquire)
    }
}

/// Writes bytes to the UART, waiting for it to take each.
pub(crate) fn uart_write(bytes: &[u8]) {
    for &b in bytes {
        board::tx_byte(b);
    }
}

fn board_init() {
    board::uart_init();
    write(scs::NVIC_ISER0, 1 << board::UART_IRQ);
    write(scs::SYST_RVR, board::CORE_HZ / 1000 - 1);
    write(scs::SYST_CVR, 0);
    // Core clock, interrupt on wrap, enabled.
    write(scs::SYST_CSR, 0b111);
}

/// After the main loop took bytes: moves what waits in the UART into the FIFO (the interrupt
/// may have stopped on a full FIFO, and the UART raises it only for a newly received byte),
/// then lets the interrupt go on.
fn refill() {
    // SAFETY: interrupts are masked while this context is the FIFO's producer.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::asm!("cpsid i", options(nostack, preserves_flags));
    }
    if RX.fill_from_uart() {
        board::rx_interrupt(true);
    }
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::asm!("cpsie i", options(nostack, preserves_flags));
    }
}

/// Sleeps until an interrupt, unless input is already waiting (checked with interrupts
/// masked, so a byte arriving in between still wakes the core).
pub(crate) fn idle() {
    // SAFETY: masking and unmasking interrupts and waiting for one touch no memory.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::asm!("cpsid i", options(nostack, preserves_flags));
        if RX.is_empty() {
            core::arch::asm!("wfi", options(nostack, preserves_flags));
        }
        core::arch::asm!("cpsie i", options(nostack, preserves_flags));
    }
}

/// The request line buffer, lent to the core's line reader.
static mut LINE: [u8; LINE_BYTES] = [0; LINE_BYTES];

/// The main loop: input lines to the agent, then its timers, then its streams; sleep when idle.
#[cfg(not(feature = "bench"))]
fn run() -> ! {
    // SAFETY: the only reference to LINE ever made, taken once before the loop.
    #[allow(unsafe_code)]
    let line_buf = unsafe { &mut *core::ptr::addr_of_mut!(LINE) };
    let mut reader = LineReader::new(line_buf);
    let agent = agent::Agent::take();
    agent.seed(systick_value());
    let mut chunk = [0u8; 64];
    loop {
        let n = RX.take(&mut chunk);
        if n > 0 {
            refill();
        }
        let mut input = chunk.get(..n).unwrap_or_default();
        loop {
            match reader.feed(input) {
                FeedResult::Line { line, remaining } => {
                    input = remaining;
                    agent.handle_line(line, now());
                }
                FeedResult::TooLong { remaining, .. } => {
                    input = remaining;
                    agent.line_too_long();
                }
                FeedResult::NeedMore => break,
            }
        }
        let busy = agent.step(now());
        if n == 0 && !busy {
            idle();
        }
    }
}

#[cfg(feature = "bench")]
fn run() -> ! {
    bench::run()
}

extern "C" {
    static _stack_top: u32;
    static mut __sbss: u32;
    static mut __ebss: u32;
    static mut __sdata: u32;
    static mut __edata: u32;
    static __sidata: u32;
}

/// The reset handler: zeroes `.bss`, copies `.data`, starts the board and the main loop.
#[no_mangle]
pub extern "C" fn reset() -> ! {
    // SAFETY: runs first, before any static is used; the linker script defines the symbols
    // as word-aligned bounds of `.bss` and `.data` and of `.data`'s load image.
    #[allow(unsafe_code)]
    unsafe {
        let mut p = core::ptr::addr_of_mut!(__sbss);
        while p < core::ptr::addr_of_mut!(__ebss) {
            core::ptr::write_volatile(p, 0);
            p = p.add(1);
        }
        let mut d = core::ptr::addr_of_mut!(__sdata);
        let mut s = core::ptr::addr_of!(__sidata);
        while d < core::ptr::addr_of_mut!(__edata) {
            core::ptr::write_volatile(d, core::ptr::read(s));
            d = d.add(1);
            s = s.add(1);
        }
    }
    paint_stack();
    board_init();
    run()
}

/// What the free RAM between `.bss` and the stack is filled with at boot.
const STACK_PAINT: u32 = 0xa5a5_a5a5;

/// Fills the RAM below the stack pointer (down to the end of `.bss`) with [`STACK_PAINT`], so
/// that [`stack_use`] can tell how deep the stack has ever grown.
fn paint_stack() {
    let sp: usize;
    // SAFETY: reads the stack pointer; the words written lie between the end of `.bss` and
    // 64 bytes below the stack pointer, memory nothing uses yet.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
        let mut p = core::ptr::addr_of_mut!(__ebss);
        while (p as usize) + 64 < sp {
            core::ptr::write_volatile(p, STACK_PAINT);
            p = p.add(1);
        }
    }
}

/// `(peak, room)`: the most stack ever used since boot, and the RAM the stack has (from the
/// top of RAM down to the end of `.bss`), in bytes.
pub(crate) fn stack_use() -> (usize, usize) {
    let top = core::ptr::addr_of!(_stack_top) as usize;
    // SAFETY: reads words between the end of `.bss` and the top of RAM, all of them RAM.
    #[allow(unsafe_code)]
    unsafe {
        let bottom = core::ptr::addr_of!(__ebss);
        let mut p = bottom;
        while (p as usize) < top && core::ptr::read_volatile(p) == STACK_PAINT {
            p = p.add(1);
        }
        (top - p as usize, top - bottom as usize)
    }
}

extern "C" fn systick() {
    let low = MILLIS.load(Ordering::Relaxed).wrapping_add(1);
    if low == 0 {
        // A load and a store, not `fetch_add`: the Cortex-M0 has no atomic read-modify-write,
        // and this handler is the counter's only writer.
        let high = MILLIS_HIGH.load(Ordering::Relaxed).wrapping_add(1);
        MILLIS_HIGH.store(high, Ordering::Release);
    }
    MILLIS.store(low, Ordering::Release);
}

extern "C" fn uart_rx() {
    board::rx_ack();
    let mixed = JITTER.load(Ordering::Relaxed).rotate_left(7) ^ systick_value();
    JITTER.store(mixed.wrapping_mul(0x9e37_79b9), Ordering::Relaxed);
    if !RX.fill_from_uart() {
        // Full: stop the interrupt until the main loop has taken bytes.
        board::rx_interrupt(false);
    }
}

/// A fault or an unexpected interrupt: stop here (a debugger, or the test's timeout, sees it).
extern "C" fn halt() {
    loop {
        core::hint::spin_loop();
    }
}

/// The vector table's reset entry (the initial stack pointer is written by the linker script).
#[link_section = ".vector_table.reset"]
#[used]
static RESET_VECTOR: extern "C" fn() -> ! = reset;

/// Exceptions 2..=15, then the interrupts up to the UART's (those before it halt). The
/// Cortex-M0 reserves the M3's MemManage, BusFault, UsageFault and DebugMonitor entries; they
/// are never taken there.
#[link_section = ".vector_table.exceptions"]
#[used]
static EXCEPTIONS: [Option<extern "C" fn()>; 15 + board::IRQS_BEFORE_UART] = [
    Some(halt), // NMI
    Some(halt), // HardFault
    Some(halt), // MemManage
    Some(halt), // BusFault
    Some(halt), // UsageFault
    None,
    None,
    None,
    None,
    Some(halt), // SVCall
    Some(halt), // DebugMonitor
    None,
    Some(halt), // PendSV
    Some(systick),
    #[cfg(feature = "microbit")]
    Some(halt), // POWER_CLOCK
    #[cfg(feature = "microbit")]
    Some(halt), // RADIO
    Some(uart_rx),
];

/// A broken invariant of the program itself (never input from outside): stop, as on a fault,
/// rather than go on from a state the protocol's rules do not cover.
pub(crate) fn defect() -> ! {
    loop {
        core::hint::spin_loop();
    }
}

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
