//! The `beehive` command line: `run` is the host; every other command reaches
//! it over its socket, or opens the database itself when no host runs.
//!
//! `flags` is what clap parses; `commands` runs a parsed command, through
//! the host's socket (`endpoint`, `protocol`) or on the database itself
//! (`handlers`, which the host's `server` also answers with); `run` is the
//! host's lifecycle.

mod backup;
mod commands;
mod completion;
mod diff;
mod edit;
mod endpoint;
mod explain;
mod failover;
mod failure;
mod flags;
mod flow_depth;
#[cfg(test)]
mod fuzz;
mod get_format;
mod handlers;
mod http_client;
mod jsonpath;
mod kube_shape;
mod manifest;
mod manifest_watch;
mod metrics_http;
mod object_view;
mod otlp;
mod output;
mod patch;
mod plugin_check;
mod plugin_limits;
mod plugin_mirror;
mod protocol;
mod readiness;
mod registry;
mod rollout;
mod run;
mod scaffold;
mod server;
mod startup;
mod top;
mod web;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use failure::Failure;
use flags::{Cli, LogFormat, LogLevel};

/// Parses the command line, runs it, and turns an error into one line on
/// stderr and the exit code of its kind (see `failure::Code`: 1 for most,
/// 3 not found, 4 conflict, 5 timeout, 6 unreachable).
fn main() -> ExitCode {
    one_malloc_arena();
    let cli = Cli::parse();
    init_logging(cli.log_level, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return fail(&Failure::from(format!(
                "cannot start the async runtime: {e}"
            )));
        }
    };
    let result = runtime.block_on(commands::execute(cli));
    // Tasks still running (a pass that outlived a stop's deadline) are
    // dropped at their next yield; nothing may hold the exit beyond this.
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(text) => write_output(&text),
        Err(failure) => fail(&failure),
    }
}

/// Has glibc's allocator keep one arena rather than one per thread (up to
/// eight per core): memory a thread frees then serves every thread, where
/// each arena kept its own high-water mark. Through a running host, a
/// million-object `apply` peaked at 109 MiB with the default and 83 MiB
/// with one, and converged as fast (`docs/adr/2026-12-07-one-malloc-arena.md`).
/// `MALLOC_ARENA_MAX` in the environment still decides, when set.
fn one_malloc_arena() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; called before
        // any thread starts.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Writes a command's output. A reader that stopped reading (`| head`) has
/// what it wanted: that ends the command with success, as for any filter.
fn write_output(text: &str) -> ExitCode {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(&Failure::from(format!("cannot write the output: {e}"))),
    }
}

fn fail(failure: &Failure) -> ExitCode {
    // An empty message is an exit code alone: `diff` has printed what it
    // found, and exits 1 as kubectl's does, with nothing to add.
    if failure.message.is_empty() {
        return ExitCode::from(failure.code.exit_code());
    }
    // A message may quote a plugin or a stored object: whatever it holds,
    // nothing reaches the terminal as a control sequence. Line breaks the
    // message itself makes stay.
    let lines: Vec<_> = failure
        .message
        .lines()
        .map(beehive::naming::escape)
        .collect();
    eprintln!("error: {}", lines.join("\n"));
    ExitCode::from(failure.code.exit_code())
}

fn init_logging(level: LogLevel, format: LogFormat) {
    let level = match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
        LogLevel::Trace => tracing::Level::TRACE,
    };
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
