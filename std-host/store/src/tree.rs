//! One tree of the index: a sled tree (a data dir), or an ordered map in process memory
//! (`--in-memory`).
//!
//! An in-memory store used to be a sled "temporary" database on `/dev/shm`, which is memory
//! too: sled's log-structured file there grew to several times what it held (five times for a
//! million small events), so `--max-store-bytes` bounded memory only loosely, and a killed
//! server's payloads stayed in `/dev/shm` until reaped. A map holds each entry once, frees it
//! when it is removed, and never leaves the process.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use sled::IVec;

use super::sync::{lock_read, lock_write};

type Map = BTreeMap<Box<[u8]>, IVec>;
/// The bounds of a key range.
type KeyRange<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// A tree of the index.
#[derive(Clone)]
pub(crate) enum Tree {
    /// A sled tree.
    Sled(sled::Tree),
    /// An ordered map in process memory.
    Memory(Arc<RwLock<Map>>),
}

/// The range of keys `lo ..` up to `hi` (exclusive), or empty when `lo` is not below `hi`.
fn range<'a>(lo: &'a [u8], hi: Bound<&'a [u8]>) -> Option<KeyRange<'a>> {
    let empty = match hi {
        Bound::Excluded(hi) => lo >= hi,
        Bound::Included(hi) => lo > hi,
        Bound::Unbounded => false,
    };
    // `BTreeMap::range` panics on a start past the end; sled yields nothing.
    (!empty).then_some((Bound::Included(lo), hi))
}

/// The least key above every key that starts with `prefix` (none if there is no such key).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut succ = prefix.to_vec();
    while let Some(last) = succ.pop() {
        if last < u8::MAX {
            succ.push(last + 1);
            return Some(succ);
        }
    }
    None
}

impl Tree {
    /// An empty in-memory tree.
    pub(crate) fn memory() -> Tree {
        Tree::Memory(Arc::new(RwLock::new(Map::new())))
    }

    pub(crate) fn insert(&self, key: &[u8], value: &[u8]) -> Result<(), sled::Error> {
        match self {
            Tree::Sled(t) => t.insert(key, value).map(|_| ()),
            Tree::Memory(m) => {
                lock_write(m).insert(key.into(), IVec::from(value));
                Ok(())
            }
        }
    }

    pub(crate) fn remove(&self, key: &[u8]) -> Result<(), sled::Error> {
        match self {
            Tree::Sled(t) => t.remove(key).map(|_| ()),
            Tree::Memory(m) => {
                lock_write(m).remove(key);
                Ok(())
            }
        }
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<IVec>, sled::Error> {
        match self {
            Tree::Sled(t) => t.get(key),
            Tree::Memory(m) => Ok(lock_read(m).get(key).cloned()),
        }
    }

    /// The keys from `lo` up to `hi`.
    pub(crate) fn keys(&self, lo: &[u8], hi: Bound<&[u8]>) -> Result<Vec<IVec>, sled::Error> {
        let Some(bounds) = range(lo, hi) else {
            return Ok(Vec::new());
        };
        match self {
            Tree::Sled(t) => t.range::<&[u8], _>(bounds).keys().collect(),
            Tree::Memory(m) => Ok(lock_read(m)
                .range::<[u8], _>(bounds)
                .map(|(k, _)| IVec::from(&**k))
                .collect()),
        }
    }

    /// The keys that start with `prefix`.
    pub(crate) fn prefix_keys(&self, prefix: &[u8]) -> Result<Vec<IVec>, sled::Error> {
        match self {
            Tree::Sled(t) => t.scan_prefix(prefix).keys().collect(),
            Tree::Memory(m) => Ok(lock_read(m)
                .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, _)| IVec::from(&**k))
                .collect()),
        }
    }

    /// The first and the last key that start with `prefix`.
    pub(crate) fn prefix_bounds(
        &self,
        prefix: &[u8],
    ) -> Result<(Option<IVec>, Option<IVec>), sled::Error> {
        match self {
            Tree::Sled(t) => {
                let mut keys = t.scan_prefix(prefix).keys();
                let first = keys.next().transpose()?;
                let last = keys.next_back().transpose()?;
                Ok((first, last))
            }
            Tree::Memory(m) => {
                let map = lock_read(m);
                let succ = successor(prefix);
                let hi = succ.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
                let mut keys = map.range::<[u8], _>((Bound::Included(prefix), hi));
                let first = keys.next().map(|(k, _)| IVec::from(&**k));
                let last = keys.next_back().map(|(k, _)| IVec::from(&**k));
                Ok((first, last))
            }
        }
    }

    /// Removes every key of `keys` at once.
    pub(crate) fn remove_all(&self, keys: Vec<IVec>) -> Result<(), sled::Error> {
        match self {
            Tree::Sled(t) => {
                let mut batch = sled::Batch::default();
                for key in keys {
                    batch.remove(key);
                }
                t.apply_batch(batch)
            }
            Tree::Memory(m) => {
                let mut map = lock_write(m);
                for key in keys {
                    map.remove(&*key);
                }
                Ok(())
            }
        }
    }

    /// Inserts every entry of `entries` at once.
    pub(crate) fn insert_all(&self, entries: Vec<(IVec, IVec)>) -> Result<(), sled::Error> {
        match self {
            Tree::Sled(t) => {
                let mut batch = sled::Batch::default();
                for (k, v) in entries {
                    batch.insert(k, v);
                }
                t.apply_batch(batch)
            }
            Tree::Memory(m) => {
                let mut map = lock_write(m);
                for (k, v) in entries {
                    map.insert((*k).into(), v);
                }
                Ok(())
            }
        }
    }

    /// The values of the keys from `lo` up to `hi` (exclusive), in order, read lazily.
    pub(crate) fn values(&self, lo: &[u8], hi: &[u8]) -> Values {
        match self {
            Tree::Sled(t) => Values::Sled(Box::new(t.range(lo..hi))),
            Tree::Memory(m) => Values::Memory {
                map: Arc::clone(m),
                after: None,
                lo: lo.into(),
                hi: hi.into(),
            },
        }
    }

    /// Every entry, in key order.
    pub(crate) fn entries(&self) -> Entries {
        match self {
            Tree::Sled(t) => Entries::Sled(Box::new(t.iter())),
            // A snapshot: this is for opening and rebuilding, not for the hot path.
            Tree::Memory(m) => Entries::Memory(
                lock_read(m)
                    .iter()
                    .map(|(k, v)| (IVec::from(&**k), v.clone()))
                    .collect::<Vec<_>>()
                    .into_iter(),
            ),
        }
    }
}

/// The values of a key range, read one at a time.
pub(crate) enum Values {
    /// From sled.
    Sled(Box<sled::Iter>),
    /// From the map: each step looks up the key after the last one returned, so no lock is
    /// held between steps and a concurrent change is seen or not, as with sled.
    Memory {
        map: Arc<RwLock<Map>>,
        after: Option<Box<[u8]>>,
        lo: Box<[u8]>,
        hi: Box<[u8]>,
    },
}

impl Iterator for Values {
    type Item = Result<IVec, sled::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Values::Sled(it) => it.next().map(|r| r.map(|(_, v)| v)),
            Values::Memory { map, after, lo, hi } => {
                let start = match after {
                    Some(k) => Bound::Excluded(&**k),
                    None => Bound::Included(&**lo),
                };
                let empty = match start {
                    Bound::Included(s) => s >= &**hi,
                    Bound::Excluded(s) => s >= &**hi,
                    Bound::Unbounded => false,
                };
                if empty {
                    return None;
                }
                let map = lock_read(map);
                let (k, v) = map
                    .range::<[u8], _>((start, Bound::Excluded(&**hi)))
                    .next()?;
                let (k, v) = (k.clone(), v.clone());
                drop(map);
                *after = Some(k);
                Some(Ok(v))
            }
        }
    }
}

/// Every entry of a tree.
pub(crate) enum Entries {
    /// From sled.
    Sled(Box<sled::Iter>),
    /// A snapshot of the map.
    Memory(std::vec::IntoIter<(IVec, IVec)>),
}

impl Iterator for Entries {
    type Item = Result<(IVec, IVec), sled::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Entries::Sled(it) => it.next(),
            Entries::Memory(it) => it.next().map(Ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same operations on a sled tree and on a map give the same answers.
    #[test]
    fn the_map_answers_as_sled_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().path(dir.path()).open().expect("sled");
        let trees = [Tree::Sled(db.open_tree("t").expect("tree")), Tree::memory()];
        let answers: Vec<_> = trees
            .iter()
            .map(|t| {
                for (k, v) in [
                    (&b"a1"[..], &b"x"[..]),
                    (b"a2", b"y"),
                    (b"a\xff", b"z"),
                    (b"b", b"w"),
                ] {
                    t.insert(k, v).expect("insert");
                }
                t.insert_all(vec![(IVec::from(&b"a3"[..]), IVec::from(&b"v"[..]))])
                    .expect("insert_all");
                t.remove(b"a2").expect("remove");
                let mut out = vec![
                    format!("{:?}", t.get(b"a1").expect("get")),
                    format!("{:?}", t.get(b"a2").expect("get")),
                    format!("{:?}", t.keys(b"a", Bound::Excluded(b"a3")).expect("keys")),
                    format!("{:?}", t.keys(b"a3", Bound::Excluded(b"a1")).expect("keys")),
                    format!("{:?}", t.keys(b"a1", Bound::Excluded(b"a1")).expect("keys")),
                    format!("{:?}", t.prefix_keys(b"a").expect("prefix")),
                    format!("{:?}", t.prefix_bounds(b"a").expect("bounds")),
                    format!("{:?}", t.prefix_bounds(b"b").expect("bounds")),
                    format!("{:?}", t.prefix_bounds(b"c").expect("bounds")),
                ];
                // A value inserted behind a lazy read is not seen. (One inserted ahead of it
                // may be seen or not, by either.)
                let mut values = t.values(b"a", b"b");
                out.push(format!("{:?}", values.next()));
                t.insert(b"a0", b"early").expect("insert");
                out.push(format!("{:?}", values.collect::<Vec<_>>()));
                out.push(format!("{:?}", t.values(b"b", b"a").collect::<Vec<_>>()));
                t.remove_all(t.prefix_keys(b"a").expect("prefix"))
                    .expect("remove_all");
                out.push(format!("{:?}", t.entries().collect::<Vec<_>>()));
                out
            })
            .collect();
        assert_eq!(answers[0], answers[1]);
    }
}
