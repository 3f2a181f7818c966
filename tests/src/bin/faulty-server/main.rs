//! `faulty-server`: the suite's deliberately breakable server as a binary of its own, for the
//! suite's self-tests (`taskstream_conformance::faulty`).

fn main() {
    std::process::exit(taskstream_conformance::faulty::main_with_args(
        "faulty-server",
        std::env::args_os().skip(1),
    ));
}
