//! The `beehive` command-line tool.
//!
//! Today it inspects a database; `run` and the object commands arrive with the
//! engine and the plugin host.

use std::path::PathBuf;
use std::process::ExitCode;

use beehive::{GroupKind, Loads, RawClient, Store};
use clap::{Parser, Subcommand};

/// Beehive: an embedded, durable, self-healing control plane.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// The database file.
    #[arg(long, global = true, default_value = "beehive.db")]
    db: PathBuf,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print objects of a kind as JSON, one per line.
    Get {
        /// The kind, written `Kind` or `Kind.group`.
        kind: String,
        /// Only the object with this name.
        name: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Get { kind, name } => get(&cli.db, &kind, name.as_deref()),
    }
}

fn get(db: &std::path::Path, kind: &str, name: Option<&str>) -> Result<(), String> {
    if !db.exists() {
        return Err(format!("no database at {}", db.display()));
    }
    let store = Store::open(db).map_err(|e| e.to_string())?;
    let client = RawClient::new(&store, parse_kind(kind)?);
    let objects = match name {
        Some(name) => vec![
            client
                .get_by_name(name, Loads::none())
                .map_err(|e| e.to_string())?,
        ],
        None => client.list(Loads::none()).map_err(|e| e.to_string())?,
    };
    for object in &objects {
        println!("{}", beehive::to_json(object));
    }
    Ok(())
}

/// `Kind` is the core group; `Kind.group` names a group, split at the first dot.
fn parse_kind(text: &str) -> Result<GroupKind, String> {
    let (kind, group) = text.split_once('.').unwrap_or((text, ""));
    if kind.is_empty() {
        return Err(format!("invalid kind {text:?}: write Kind or Kind.group"));
    }
    Ok(GroupKind::new(group, kind))
}
