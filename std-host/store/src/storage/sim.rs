//! A simulated disk for tests: deterministic, seeded, with power loss and I/O faults.
//!
//! Per file it keeps the durable bytes, the bytes the process sees, and the writes (and cuts)
//! not yet covered by a successful `sync_data`, in order; per directory the durable names and
//! the name changes (create, rename, remove) not yet covered by a successful `sync_dir`. A
//! [`SimStorage::power_loss`] then decides, with the seeded generator, what of the unsynced
//! state reached the platters, per file and per directory independently:
//! - none of it, all of it, a prefix of it, or a random subset of it (in any order: holes);
//! - any kept write may be torn: only its first sectors kept, at a 512 B or 4 KiB sector size,
//!   or (with [`SimStorage::sector_holes`]) a random subset of its sectors.
//!
//! Durable state always survives. A file whose name did not survive is gone. The generator
//! and every decision are a function of the seed and of the order of operations, so a failing
//! seed replays (the test runs one thread at a time where it needs that; see the sim test).
//!
//! Faults: [`SimStorage::fail_write`] / [`SimStorage::fail_sync`] fail the Nth write or sync
//! (counted from 1 over the whole disk) with an error number (EIO, ENOSPC); a failed write
//! changes nothing, a failed file sync may drop the file's unsynced writes from what can ever
//! reach the disk (the process still reads them), as Linux's writeback error handling can;
//! [`SimStorage::crash_after`] freezes the disk after N more changing operations, as a process
//! killed at that point would leave it: every later operation through this handle fails.
//!
//! A power loss returns a new handle (the restarted process); every file opened through an
//! older one fails with EIO from then on, as a dead process's would.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Storage, StorageFile};

/// A small deterministic generator (splitmix64).
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    /// True with probability `1 / n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

#[derive(Clone, Debug)]
enum FileOp {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Default)]
struct SimFile {
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<FileOp>,
}

#[derive(Clone, Debug)]
enum NameOp {
    Link(PathBuf, u64),
    Unlink(PathBuf),
    Rename { from: PathBuf, to: PathBuf, id: u64 },
}

struct State {
    epoch: u64,
    rng: Rng,
    next_id: u64,
    files: HashMap<u64, SimFile>,
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    name_ops: BTreeMap<PathBuf, Vec<NameOp>>,
    writes: u64,
    syncs: u64,
    fail_write: Option<(u64, i32)>,
    fail_sync: Option<(u64, i32)>,
    /// Changing operations left before the disk freezes.
    crash_after: Option<u64>,
    frozen: bool,
    sector_holes: bool,
    in_order: bool,
    power_losses: u64,
}

/// A simulated disk (see the module docs). Cloning shares the disk and the handle's epoch.
#[derive(Clone)]
pub(crate) struct SimStorage {
    state: Arc<Mutex<State>>,
    epoch: u64,
}

fn errno(n: i32) -> io::Error {
    io::Error::from_raw_os_error(n)
}

/// `EIO`.
pub(crate) const EIO: i32 = 5;
/// `ENOSPC`.
pub(crate) const ENOSPC: i32 = 28;

fn apply(data: &mut Vec<u8>, op: &FileOp) {
    match op {
        FileOp::Write {
            offset,
            data: bytes,
        } => {
            let at = usize::try_from(*offset).unwrap_or(usize::MAX);
            let end = at + bytes.len();
            if data.len() < end {
                data.resize(end, 0);
            }
            data[at..end].copy_from_slice(bytes);
        }
        FileOp::SetLen(len) => data.resize(usize::try_from(*len).unwrap_or(0), 0),
    }
}

impl SimStorage {
    /// An empty disk whose power losses follow `seed`.
    pub(crate) fn new(seed: u64) -> SimStorage {
        SimStorage {
            state: Arc::new(Mutex::new(State {
                epoch: 0,
                rng: Rng::new(seed),
                next_id: 0,
                files: HashMap::new(),
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                name_ops: BTreeMap::new(),
                writes: 0,
                syncs: 0,
                fail_write: None,
                fail_sync: None,
                crash_after: None,
                frozen: false,
                sector_holes: false,
                in_order: false,
                power_losses: 0,
            })),
            epoch: 0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fails the `n`th write from now (1 = the next) with error number `err`.
    pub(crate) fn fail_write(&self, n: u64, err: i32) {
        let mut s = self.lock();
        s.fail_write = Some((s.writes + n, err));
    }

    /// Fails the `n`th `sync_data` or `sync_dir` from now (1 = the next) with `err`.
    pub(crate) fn fail_sync(&self, n: u64, err: i32) {
        let mut s = self.lock();
        s.fail_sync = Some((s.syncs + n, err));
    }

    /// Freezes the disk after `n` more changing operations (writes, cuts, syncs, names).
    pub(crate) fn crash_after(&self, n: u64) {
        self.lock().crash_after = Some(n);
    }

    /// Whether a torn write may keep any subset of its sectors (holes inside one write), not
    /// only a prefix of them.
    pub(crate) fn sector_holes(&self, on: bool) {
        self.lock().sector_holes = on;
    }

    /// Whether a file's unsynced writes reach the disk in order only (a prefix of them, the
    /// last one kept perhaps torn to a prefix of its sectors): the assumption the log's
    /// recovery makes today. Off (the default), any subset survives.
    pub(crate) fn in_order(&self, on: bool) {
        self.lock().in_order = on;
    }

    /// The bytes of `path` the process sees now, if it is there.
    pub(crate) fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.lock();
        let id = s.names.get(path)?;
        s.files.get(id).map(|f| f.current.clone())
    }

    /// Flips the bits of `mask` in the byte at `offset` of `path`, durably (damage, as by the
    /// device; flipping again undoes it). False if there is no such durable byte.
    pub(crate) fn flip(&self, path: &Path, offset: u64, mask: u8) -> bool {
        let mut s = self.lock();
        let Some(id) = s.names.get(path).copied() else {
            return false;
        };
        let Some(f) = s.files.get_mut(&id) else {
            return false;
        };
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        if at >= f.durable.len() || f.durable != f.current {
            return false;
        }
        f.durable[at] ^= mask;
        f.current[at] ^= mask;
        true
    }

    /// Kills the process without a power loss: every write it made stays (in the page cache,
    /// still unsynced), and a later power loss may still lose it. Returns the handle of the
    /// restarted process; files opened before fail from now on.
    pub(crate) fn kill(&self) -> SimStorage {
        let mut s = self.lock();
        s.epoch += 1;
        s.fail_write = None;
        s.fail_sync = None;
        s.crash_after = None;
        s.frozen = false;
        SimStorage {
            state: Arc::clone(&self.state),
            epoch: s.epoch,
        }
    }

    /// Cuts the power: keeps all durable state and, as the seed decides, some of the unsynced
    /// state (see the module docs); returns the handle of the restarted process. Every file
    /// opened before fails from now on, and the faults and the freeze are cleared.
    pub(crate) fn power_loss(&self) -> SimStorage {
        let mut guard = self.lock();
        let s = &mut *guard;
        let holes = s.sector_holes;
        let in_order = s.in_order;
        let mut ids: Vec<u64> = s.files.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(f) = s.files.get_mut(&id) else {
                continue;
            };
            let pending = std::mem::take(&mut f.pending);
            let kept = if in_order {
                let n = pending.len() as u64;
                (0..usize::try_from(s.rng.below(n + 1)).unwrap_or(0)).collect()
            } else {
                choose(&mut s.rng, pending.len())
            };
            let last = kept.last().copied();
            let mut data = std::mem::take(&mut f.durable);
            for i in kept {
                let op = &pending[i];
                let may_tear = !in_order || Some(i) == last;
                match op {
                    FileOp::Write {
                        offset,
                        data: bytes,
                    } if may_tear && s.rng.one_in(3) => {
                        // Torn: some sectors of this write reached the disk.
                        let sector = if s.rng.one_in(2) { 512 } else { 4096 };
                        let first = (offset / sector) * sector;
                        let end = offset + bytes.len() as u64;
                        let sectors = (end - first).div_ceil(sector);
                        let subset = holes && !in_order && s.rng.one_in(2);
                        let prefix = s.rng.below(sectors + 1);
                        for k in 0..sectors {
                            let keep = if subset { s.rng.one_in(2) } else { k < prefix };
                            if !keep {
                                continue;
                            }
                            let lo = (first + k * sector).max(*offset);
                            let hi = (first + (k + 1) * sector).min(end);
                            let from = usize::try_from(lo - offset).unwrap_or(0);
                            let to = usize::try_from(hi - offset).unwrap_or(0);
                            apply(
                                &mut data,
                                &FileOp::Write {
                                    offset: lo,
                                    data: bytes[from..to].to_vec(),
                                },
                            );
                        }
                    }
                    op => apply(&mut data, op),
                }
            }
            f.durable = data.clone();
            f.current = data;
        }
        let dirs: Vec<PathBuf> = s.name_ops.keys().cloned().collect();
        for dir in dirs {
            let ops = s.name_ops.remove(&dir).unwrap_or_default();
            for i in choose(&mut s.rng, ops.len()) {
                match &ops[i] {
                    NameOp::Link(name, id) => {
                        s.durable_names.insert(name.clone(), *id);
                    }
                    NameOp::Unlink(name) => {
                        s.durable_names.remove(name);
                    }
                    NameOp::Rename { from, to, id } => {
                        if s.durable_names.get(from) == Some(id) {
                            s.durable_names.remove(from);
                        }
                        s.durable_names.insert(to.clone(), *id);
                    }
                }
            }
        }
        s.names = s.durable_names.clone();
        let live: std::collections::HashSet<u64> = s.names.values().copied().collect();
        s.files.retain(|id, _| live.contains(id));
        s.epoch += 1;
        s.fail_write = None;
        s.fail_sync = None;
        s.crash_after = None;
        s.frozen = false;
        s.power_losses += 1;
        SimStorage {
            state: Arc::clone(&self.state),
            epoch: s.epoch,
        }
    }

    /// Errors out if this handle's process is gone or the disk froze; else counts one
    /// changing operation toward [`crash_after`](Self::crash_after).
    fn live(s: &mut State, epoch: u64, changes: bool) -> io::Result<()> {
        if s.epoch != epoch || s.frozen {
            return Err(errno(EIO));
        }
        if changes {
            if let Some(n) = s.crash_after.as_mut() {
                if *n == 0 {
                    s.frozen = true;
                    return Err(errno(EIO));
                }
                *n -= 1;
            }
        }
        Ok(())
    }

    fn parent(path: &Path) -> PathBuf {
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

/// Which of `n` unsynced operations reach the disk, in order: none, all, a prefix, or a
/// random subset.
fn choose(rng: &mut Rng, n: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    match rng.below(4) {
        0 => Vec::new(),
        1 => (0..n).collect(),
        2 => (0..usize::try_from(rng.below(n as u64 + 1)).unwrap_or(0)).collect(),
        _ => (0..n).filter(|_| rng.one_in(2)).collect(),
    }
}

/// A file open through a [`SimStorage`] handle.
struct SimHandle {
    disk: SimStorage,
    id: u64,
    write: bool,
}

impl StorageFile for SimHandle {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.disk.lock();
        SimStorage::live(&mut s, self.disk.epoch, true)?;
        if !self.write {
            return Err(errno(9));
        }
        s.writes += 1;
        if let Some((n, e)) = s.fail_write {
            if n == s.writes {
                return Err(errno(e));
            }
        }
        let f = s.files.get_mut(&self.id).ok_or_else(|| errno(EIO))?;
        let op = FileOp::Write {
            offset,
            data: buf.to_vec(),
        };
        apply(&mut f.current, &op);
        f.pending.push(op);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut s = self.disk.lock();
        SimStorage::live(&mut s, self.disk.epoch, false)?;
        let f = s.files.get(&self.id).ok_or_else(|| errno(EIO))?;
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        if at >= f.current.len() {
            return Ok(0);
        }
        let n = buf.len().min(f.current.len() - at);
        buf[..n].copy_from_slice(&f.current[at..at + n]);
        Ok(n)
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.disk.lock();
        SimStorage::live(&mut s, self.disk.epoch, true)?;
        s.syncs += 1;
        if let Some((n, e)) = s.fail_sync {
            if n == s.syncs {
                // As Linux may after a failed writeback: the unsynced pages are marked clean
                // without reaching the disk (the process still reads them), so no later sync
                // writes them.
                if s.rng.one_in(2) {
                    if let Some(f) = s.files.get_mut(&self.id) {
                        f.pending.clear();
                    }
                }
                return Err(errno(e));
            }
        }
        let f = s.files.get_mut(&self.id).ok_or_else(|| errno(EIO))?;
        f.durable = f.current.clone();
        f.pending.clear();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let mut s = self.disk.lock();
        SimStorage::live(&mut s, self.disk.epoch, false)?;
        let f = s.files.get(&self.id).ok_or_else(|| errno(EIO))?;
        Ok(f.current.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.disk.lock();
        SimStorage::live(&mut s, self.disk.epoch, true)?;
        if !self.write {
            return Err(errno(9));
        }
        let f = s.files.get_mut(&self.id).ok_or_else(|| errno(EIO))?;
        let op = FileOp::SetLen(len);
        apply(&mut f.current, &op);
        f.pending.push(op);
        Ok(())
    }
}

impl Storage for SimStorage {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let mut s = self.lock();
        if let Some(id) = s.names.get(path).copied() {
            Self::live(&mut s, self.epoch, false)?;
            return Ok(Arc::new(SimHandle {
                disk: self.clone(),
                id,
                write: true,
            }));
        }
        Self::live(&mut s, self.epoch, true)?;
        let id = s.next_id;
        s.next_id += 1;
        s.files.insert(id, SimFile::default());
        s.names.insert(path.to_owned(), id);
        s.name_ops
            .entry(Self::parent(path))
            .or_default()
            .push(NameOp::Link(path.to_owned(), id));
        Ok(Arc::new(SimHandle {
            disk: self.clone(),
            id,
            write: true,
        }))
    }

    fn open(&self, path: &Path, write: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut s = self.lock();
        Self::live(&mut s, self.epoch, false)?;
        let id = *s
            .names
            .get(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(Arc::new(SimHandle {
            disk: self.clone(),
            id,
            write,
        }))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut s = self.lock();
        Self::live(&mut s, self.epoch, false)?;
        Ok(s.names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        Self::live(&mut s, self.epoch, true)?;
        let id = s
            .names
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.names.insert(to.to_owned(), id);
        s.name_ops
            .entry(Self::parent(to))
            .or_default()
            .push(NameOp::Rename {
                from: from.to_owned(),
                to: to.to_owned(),
                id,
            });
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        Self::live(&mut s, self.epoch, true)?;
        s.names
            .remove(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.name_ops
            .entry(Self::parent(path))
            .or_default()
            .push(NameOp::Unlink(path.to_owned()));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        Self::live(&mut s, self.epoch, true)?;
        s.syncs += 1;
        if let Some((n, e)) = s.fail_sync {
            if n == s.syncs {
                return Err(errno(e));
            }
        }
        for op in s.name_ops.remove(dir).unwrap_or_default() {
            match op {
                NameOp::Link(name, id) => {
                    s.durable_names.insert(name, id);
                }
                NameOp::Unlink(name) => {
                    s.durable_names.remove(&name);
                }
                NameOp::Rename { from, to, id } => {
                    if s.durable_names.get(&from) == Some(&id) {
                        s.durable_names.remove(&from);
                    }
                    s.durable_names.insert(to, id);
                }
            }
        }
        Ok(())
    }
}
