//! A plugin that attacks the host around its sandbox, to show containment
//! holds. Its registration asks for far more than any operator allows (every
//! worker it can get, a 31-year CPU deadline, 1 ms cadences); each object's
//! spec `act` picks an attack for its pass:
//!
//! - `spin`: loops in guest code forever;
//! - `sleep`: blocks in a host call (WASI's poll) forever;
//! - `host-loop`: calls the host forever;
//! - `leak-clients`: makes kind clients and never drops them;
//! - `long-kind`: makes a kind client for a 1 MiB kind name;
//! - `huge-status`: writes a 5 MiB status;
//! - `touch-memory`: fills 48 MiB of memory, then settles;
//! - `forge-log`: logs a line with a newline and a terminal escape in it;
//! - `write-file`: writes `/out/NAME.txt` (granted by the operator, or not);
//! - `read`: reads the file at the spec's `path`, which may try to escape a
//!   granted directory (`..`, an absolute path, a symlink pointing out);
//! - `config`: reports the config value named by the spec's `path`;
//! - `fetch`: GETs the URL in the spec's `path` and reports the status and
//!   body size, or fails with the error; `fetch-timed` GETs it ten times
//!   and reports how many microseconds each took, as the plugin measured.
//!
//! Anything else settles. It also declares spec schema version 1, and its
//! converter spins forever on an older spec whose `act` is `spin`.
//!
//! The operator's config key `registration` turns the registration itself
//! into the attack: `stuck` never returns from `describe`, and
//! `forged-kind` names a kind with a newline in it, in a 200 KiB group.

use std::time::Duration;

use beehive_guest::{Action, Cadence, ClientOf, Controller, Error, ObjectOf, Registration, Result};
use serde::{Deserialize, Serialize};

/// The attack.
#[derive(Debug, Deserialize)]
pub struct Spec {
    /// Which one.
    pub act: String,
    /// The file `read` reads.
    #[serde(default)]
    pub path: String,
}

/// What a pass that got through reports.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Status {
    /// What happened.
    pub outcome: String,
    /// Filler, for `huge-status`.
    #[serde(default)]
    pub filler: String,
}

/// The controller.
#[derive(Default)]
pub struct Hostile;

const YEAR: Duration = Duration::from_secs(365 * 24 * 60 * 60);

impl Controller for Hostile {
    type Spec = Spec;
    type Status = Status;

    fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action> {
        let outcome = match object.spec.act.as_str() {
            "spin" => spin(),
            "sleep" => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            "host-loop" => loop {
                let _ = client.raw().has_incoming_edges();
            },
            "leak-clients" => loop {
                std::mem::forget(client.raw().kind_client("test.dev", "Leaked"));
            },
            "long-kind" => {
                let kind = "K".repeat(1 << 20);
                std::mem::forget(client.raw().kind_client("test.dev", &kind));
                "made a kind client for a 1 MiB kind".to_string()
            }
            "huge-status" => {
                let status = Status {
                    outcome: "huge".into(),
                    filler: "x".repeat(5 << 20),
                };
                client.update_status(&status)?;
                return Ok(Action::settled());
            }
            "touch-memory" => {
                let hoard = vec![7u8; 48 << 20];
                format!("touched {} MiB", std::hint::black_box(&hoard).len() >> 20)
            }
            "write-file" => {
                let file = format!("/out/{}.txt", object.meta.name);
                match std::fs::write(&file, "written by a plugin") {
                    Ok(()) => format!("wrote {file}"),
                    Err(error) => {
                        return Err(Error::msg(format!("cannot write {file}: {error}")));
                    }
                }
            }
            "read" => match std::fs::read_to_string(&object.spec.path) {
                Ok(text) => format!("read {}: {text}", object.spec.path),
                Err(error) => {
                    return Err(Error::msg(format!(
                        "cannot read {}: {error}",
                        object.spec.path
                    )));
                }
            },
            "config" => match beehive_guest::config::get(&object.spec.path) {
                Some(value) => format!("config {}: {value}", object.spec.path),
                None => return Err(Error::msg(format!("no config {}", object.spec.path))),
            },
            "fetch" => match beehive_guest::http::get(&object.spec.path) {
                Ok(response) => format!(
                    "fetched HTTP {} {} bytes",
                    response.status,
                    response.body.len()
                ),
                Err(error) => return Err(Error::msg(format!("fetch failed: {error}"))),
            },
            "fetch-timed" => {
                let mut times = Vec::new();
                for _ in 0..10 {
                    let started = std::time::Instant::now();
                    beehive_guest::http::get(&object.spec.path)?;
                    times.push(started.elapsed().as_micros().to_string());
                }
                times.join(" ")
            }
            "forge-log" => {
                beehive_guest::info!("ok\n2026-12-01T00:00:00Z ERROR forged by a plugin\x1b[2J");
                "logged".to_string()
            }
            other => format!("behaved ({other})"),
        };
        client.update_status(&Status {
            outcome,
            filler: String::new(),
        })?;
        Ok(Action::settled())
    }

    fn registration() -> Registration {
        match beehive_guest::config::get("registration").as_deref() {
            Some("stuck") => spin(),
            Some("forged-kind") => Registration::new("g".repeat(200 << 10), "Bad\nERROR forged"),
            _ => greedy_registration(),
        }
    }

    fn convert_spec(_from: u32, spec: serde_json::Value) -> Result<serde_json::Value, String> {
        match Hostile::act_of(&spec) {
            Some("spin") => spin(),
            _ => Ok(spec),
        }
    }
}

/// Far more than any operator allows: every worker, a 31-year CPU deadline,
/// 1 ms cadences.
fn greedy_registration() -> Registration {
    let every_millisecond = Duration::from_millis(1);
    Registration::new("test.dev", "Hostile")
        .concurrency(u32::MAX)
        .pass_deadline(31 * YEAR)
        .cadence(
            Cadence::new()
                .owed_pass_interval(every_millisecond)
                .full_pass_interval(every_millisecond)
                .individual_pass_interval(every_millisecond)
                .max_retry_interval(every_millisecond),
        )
        .schema_versions(1, 0)
}

impl Hostile {
    fn act_of(spec: &serde_json::Value) -> Option<&str> {
        spec.get("act").and_then(|a| a.as_str())
    }
}

fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

beehive_guest::export!(Hostile);
