//! `taskstream-conformance`: the SEP-2694 conformance suite as a command of its own.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(taskstream_conformance::main_with_args(&args));
}
