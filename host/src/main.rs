//! The `beehive` command-line tool; see `beehive --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
