//! Lock helpers: a poisoned lock (a thread panicked holding it) is taken as it is, since every
//! lock of the store guards state that a panic leaves consistent. The bottom of the store.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, poisoned or not.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Read-locks `m`, poisoned or not.
pub(crate) fn lock_read<T>(m: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Write-locks `m`, poisoned or not.
pub(crate) fn lock_write<T>(m: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}
