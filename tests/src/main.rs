//! `taskstream-conformance`: the SEP-2694 conformance suite as a command of its own.

fn main() {
    let mut args = Vec::new();
    for arg in std::env::args_os().skip(1) {
        match arg.into_string() {
            Ok(word) => args.push(word),
            Err(bad) => {
                eprintln!("taskstream-conformance: argument {bad:?} is not UTF-8");
                std::process::exit(2);
            }
        }
    }
    std::process::exit(taskstream_conformance::main_with_args(&args));
}
