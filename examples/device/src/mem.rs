//! The memory routines the compiler calls (`__aeabi_memcpy*`, `__aeabi_memclr*`,
//! `__aeabi_memset*`, `memcmp`),
//! as plain byte loops. `compiler_builtins` links speed-tuned versions (word copies with
//! unaligned heads and tails: about 1.3 KiB for `memcpy`, its aligned variants, `memclr4` and
//! `memcmp`); the agent copies a few hundred bytes per message and clears its statics once,
//! so the 1-byte loops cost it nothing it can measure and save the flash. Its definitions are
//! strong symbols and `compiler_builtins`' are weak, so these are the ones linked.
//!
//! The loops read and write through volatile accesses so that the optimiser cannot recognise
//! them as a copy or a fill and replace them with a call to themselves.
//!
//! On the Cortex-M0 (feature `microbit`), also the unsigned division the compiler calls
//! (`__aeabi_uidiv`, `__aeabi_uidivmod`), as a shift-and-subtract loop.

#![allow(unsafe_code, clippy::missing_safety_doc)]

use core::ptr::{read_volatile, write_volatile};

/// Copies `n` bytes from `src` to `dst` (the ranges do not overlap).
///
/// # Safety
/// As C's `memcpy`: both ranges valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memcpy(dst: *mut u8, src: *const u8, n: usize) {
    let mut i = 0;
    while i < n {
        // SAFETY: `i < n`, and both ranges are valid for `n` bytes (the caller's contract).
        unsafe { write_volatile(dst.add(i), read_volatile(src.add(i))) };
        i += 1;
    }
}

/// [`__aeabi_memcpy`] with both pointers 4-byte aligned.
///
/// # Safety
/// As [`__aeabi_memcpy`].
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memcpy4(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the same contract.
    unsafe { __aeabi_memcpy(dst, src, n) }
}

/// [`__aeabi_memcpy`] with both pointers 8-byte aligned.
///
/// # Safety
/// As [`__aeabi_memcpy`].
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memcpy8(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the same contract.
    unsafe { __aeabi_memcpy(dst, src, n) }
}

/// C's `memcpy`, for a call the compiler emits by that name.
///
/// # Safety
/// As C's `memcpy`.
#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the same contract.
    unsafe { __aeabi_memcpy(dst, src, n) };
    dst
}

/// Zeroes `n` bytes at `dst`.
///
/// # Safety
/// `dst` valid for writes of `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memclr(dst: *mut u8, n: usize) {
    let mut i = 0;
    while i < n {
        // SAFETY: `i < n`, and the range is valid for `n` bytes (the caller's contract).
        unsafe { write_volatile(dst.add(i), 0) };
        i += 1;
    }
}

/// [`__aeabi_memclr`] with `dst` 4-byte aligned.
///
/// # Safety
/// As [`__aeabi_memclr`].
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memclr4(dst: *mut u8, n: usize) {
    // SAFETY: the same contract.
    unsafe { __aeabi_memclr(dst, n) }
}

/// [`__aeabi_memclr`] with `dst` 8-byte aligned.
///
/// # Safety
/// As [`__aeabi_memclr`].
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memclr8(dst: *mut u8, n: usize) {
    // SAFETY: the same contract.
    unsafe { __aeabi_memclr(dst, n) }
}

/// Fills `n` bytes at `dst` with the low byte of `c`.
///
/// # Safety
/// `dst` valid for writes of `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memset(dst: *mut u8, n: usize, c: i32) {
    let mut i = 0;
    while i < n {
        // SAFETY: `i < n`, and the range is valid for `n` bytes (the caller's contract).
        unsafe { write_volatile(dst.add(i), c as u8) };
        i += 1;
    }
}

/// [`__aeabi_memset`] with `dst` 4-byte aligned.
///
/// # Safety
/// As [`__aeabi_memset`].
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memset4(dst: *mut u8, n: usize, c: i32) {
    // SAFETY: the same contract.
    unsafe { __aeabi_memset(dst, n, c) }
}

/// [`__aeabi_memset`] with `dst` 8-byte aligned.
///
/// # Safety
/// As [`__aeabi_memset`].
#[no_mangle]
pub unsafe extern "C" fn __aeabi_memset8(dst: *mut u8, n: usize, c: i32) {
    // SAFETY: the same contract.
    unsafe { __aeabi_memset(dst, n, c) }
}

/// Compares `n` bytes: negative, zero or positive as `a` sorts before, with or after `b`.
///
/// # Safety
/// As C's `memcmp`: both ranges valid for reads of `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        // SAFETY: `i < n`, and both ranges are valid for `n` bytes (the caller's contract).
        let (x, y) = unsafe { (read_volatile(a.add(i)), read_volatile(b.add(i))) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

/// [`memcmp`] answering only equal (zero) or not.
///
/// # Safety
/// As [`memcmp`].
#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the same contract.
    unsafe { memcmp(a, b, n) }
}

/// The Cortex-M0's unsigned division (it has no divide instruction): `(quotient, remainder)`
/// by shifting and subtracting, one quotient bit per turn, with no division of its own (which
/// would call itself). `compiler_builtins`' version (about 400 bytes, `u32_div_rem`) is tuned
/// for speed; the agent divides a handful of times per message (the digits of its numbers, an
/// ISO-8601 time), where 32 turns of a loop cost it nothing it can measure. A divisor of 0
/// gives `(u32::MAX, n)`; Rust checks every division for it before calling, so it never comes.
#[cfg(feature = "microbit")]
fn udivmod(n: u32, d: u32) -> (u32, u32) {
    let mut q = 0u32;
    let mut r = 0u32;
    let mut i = 32;
    while i > 0 {
        i -= 1;
        // `r < d` before the shift; a bit shifted out of `r` makes it larger than any `d`.
        let carry = r >> 31;
        r = (r << 1) | ((n >> i) & 1);
        if carry != 0 || r >= d {
            r = r.wrapping_sub(d);
            q |= 1 << i;
        }
    }
    (q, r)
}

/// `n / d`, the call the compiler emits for a 32-bit unsigned division on the Cortex-M0.
#[cfg(feature = "microbit")]
#[no_mangle]
pub extern "C" fn __aeabi_uidiv(n: u32, d: u32) -> u32 {
    udivmod(n, d).0
}

/// `n / d` and `n % d`, the quotient in `r0` and the remainder in `r1` (AEABI's
/// `__aeabi_uidivmod`, a 64-bit return value with the quotient in its low word).
#[cfg(feature = "microbit")]
#[no_mangle]
pub extern "C" fn __aeabi_uidivmod(n: u32, d: u32) -> u64 {
    let (q, r) = udivmod(n, d);
    (u64::from(r) << 32) | u64::from(q)
}
