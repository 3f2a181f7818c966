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
