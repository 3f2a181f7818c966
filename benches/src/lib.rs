//! Criterion benchmarks for taskstream live in `benches/`.
