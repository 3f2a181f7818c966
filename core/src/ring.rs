//! Fixed-capacity event rings.
