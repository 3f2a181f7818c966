//! The per-connection stream table.
/// placeholder
pub struct StreamTable;
