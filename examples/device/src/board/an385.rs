//! ARM's MPS2 board with the AN385 image (Cortex-M3), as QEMU emulates it (`-M mps2-an385`):
//! UART0 is a CMSDK APB UART, its receive interrupt IRQ 0; the core clock is 25 MHz.

use super::{read, write};

const BASE: usize = 0x4000_4000;
const DATA: usize = BASE;
const STATE: usize = BASE + 0x04;
const CTRL: usize = BASE + 0x08;
const INTCLEAR: usize = BASE + 0x0c;
const BAUDDIV: usize = BASE + 0x10;
const STATE_TX_FULL: u32 = 1 << 0;
const STATE_RX_FULL: u32 = 1 << 1;
const CTRL_TX_EN: u32 = 1 << 0;
const CTRL_RX_EN: u32 = 1 << 1;
const CTRL_RX_INT_EN: u32 = 1 << 3;
const INT_RX: u32 = 1 << 1;

/// The core clock: 25 MHz.
pub(crate) const CORE_HZ: u32 = 25_000_000;
/// The UART's receive interrupt.
pub(crate) const UART_IRQ: u32 = 0;
/// The interrupts before the UART's, which the vector table fills with `halt`.
pub(crate) const IRQS_BEFORE_UART: usize = 0;

/// Enables the UART (transmitter, receiver and its receive interrupt).
pub(crate) fn uart_init() {
    // QEMU's CMSDK UART receives only with a divider of at least 16.
    write(BAUDDIV, 16);
    rx_interrupt(true);
}

/// Whether a received byte waits in the UART.
pub(crate) fn rx_ready() -> bool {
    read(STATE) & STATE_RX_FULL != 0
}

/// Takes the received byte; call only when [`rx_ready`].
pub(crate) fn rx_byte() -> u8 {
    read(DATA) as u8
}

/// Acknowledges the receive interrupt.
pub(crate) fn rx_ack() {
    write(INTCLEAR, INT_RX);
}

/// Lets the receive interrupt fire, or stops it.
pub(crate) fn rx_interrupt(on: bool) {
    let int = if on { CTRL_RX_INT_EN } else { 0 };
    write(CTRL, CTRL_TX_EN | CTRL_RX_EN | int);
}

/// Sends one byte, waiting while the transmit buffer is full.
pub(crate) fn tx_byte(b: u8) {
    while read(STATE) & STATE_TX_FULL != 0 {}
    write(DATA, u32::from(b));
}
