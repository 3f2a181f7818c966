//! `taskstream`: the stdio MCP server binary (placeholder until the server lands).

fn main() {
    eprintln!("taskstream: not yet built");
    std::process::exit(2);
}
