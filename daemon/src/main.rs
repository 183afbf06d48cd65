//! The `gevod` binary: everything is in [`cli`] and the library.

mod cli;

fn main() {
    cli::main();
}
