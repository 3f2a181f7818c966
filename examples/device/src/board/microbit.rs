//! The BBC micro:bit (Nordic nRF51822, Cortex-M0), as QEMU emulates it (`-M microbit`): UART0
//! at 0x4000_2000 with the nRF51 register interface (tasks STARTRX / STARTTX, events RXDRDY /
//! TXDRDY, one-byte RXD / TXD registers), its interrupt IRQ 2; the core clock is 16 MHz.

use super::{read, write};

const BASE: usize = 0x4000_2000;
const TASKS_STARTRX: usize = BASE;
const TASKS_STARTTX: usize = BASE + 0x008;
const EVENTS_RXDRDY: usize = BASE + 0x108;
const EVENTS_TXDRDY: usize = BASE + 0x11c;
const INTENSET: usize = BASE + 0x304;
const INTENCLR: usize = BASE + 0x308;
const ENABLE: usize = BASE + 0x500;
const PSELTXD: usize = BASE + 0x50c;
const PSELRXD: usize = BASE + 0x514;
const RXD: usize = BASE + 0x518;
const TXD: usize = BASE + 0x51c;
const BAUDRATE: usize = BASE + 0x524;
/// `INTEN`'s RXDRDY bit.
const INT_RXDRDY: u32 = 1 << 2;
/// `ENABLE`'s value that enables the UART.
const ENABLE_UART: u32 = 4;
/// The micro:bit's pins to its USB interface chip: P0.24 transmits, P0.25 receives.
const PIN_TX: u32 = 24;
const PIN_RX: u32 = 25;
/// `BAUDRATE`'s value for 115 200 baud.
const BAUD_115200: u32 = 0x01d7_e000;

/// The core clock: 16 MHz.
pub(crate) const CORE_HZ: u32 = 16_000_000;
/// UART0's interrupt.
pub(crate) const UART_IRQ: u32 = 2;
/// The interrupts before the UART's (POWER_CLOCK, RADIO), which the vector table fills with
/// `halt`.
pub(crate) const IRQS_BEFORE_UART: usize = 2;

/// Enables the UART, starts its receiver and transmitter and its RXDRDY interrupt.
pub(crate) fn uart_init() {
    write(PSELTXD, PIN_TX);
    write(PSELRXD, PIN_RX);
    write(BAUDRATE, BAUD_115200);
    write(ENABLE, ENABLE_UART);
    write(TASKS_STARTTX, 1);
    write(TASKS_STARTRX, 1);
    rx_interrupt(true);
}

/// Whether a received byte waits in the UART.
pub(crate) fn rx_ready() -> bool {
    read(EVENTS_RXDRDY) != 0
}

/// Takes the received byte; call only when [`rx_ready`]. The event is cleared first: the UART
/// raises it again if more bytes wait behind this one.
pub(crate) fn rx_byte() -> u8 {
    write(EVENTS_RXDRDY, 0);
    read(RXD) as u8
}

/// The RXDRDY event is the interrupt's level: [`rx_byte`] clears it.
pub(crate) fn rx_ack() {}

/// Lets the receive interrupt fire, or stops it (the event stays pending, so enabling it again
/// with bytes waiting fires at once).
pub(crate) fn rx_interrupt(on: bool) {
    write(if on { INTENSET } else { INTENCLR }, INT_RXDRDY);
}

/// Sends one byte and waits until the UART has taken it (TXDRDY).
pub(crate) fn tx_byte(b: u8) {
    write(EVENTS_TXDRDY, 0);
    write(TXD, u32::from(b));
    while read(EVENTS_TXDRDY) == 0 {}
}
