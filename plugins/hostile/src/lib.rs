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
//! - `swap-dir`: renames `/data/inner` aside and makes a new, empty
//!   directory in its place (what a plugin granted a parent can do to a
//!   directory granted to another);
//! - `symlink` / `hard-link`: makes `/data/link` point at the spec's `path`
//!   (a symlink; a hard link to a file there);
//! - `list`: lists the directory at the spec's `path`;
//! - `write-bytes`: writes as many bytes as the spec's `path` says (a
//!   number) to `/data/NAME.bin`;
//! - `raw-fetch`: sends a GET through raw wasi:http, the spec's `path`
//!   taken as the authority verbatim (the SDK would refuse user info);
//! - `panic`: panics, so the host drops its instance;
//! - `store-OP`: one store call on another kind, named by the spec's `path`
//!   as `Kind.group NAME ID`: `create` (create-or-update `NAME`),
//!   `finalize` (the same, with a finalizer), `get`, `list`, `update` (object
//!   `ID`), `delete` (by `NAME`), `depend` (on object `ID`), `own` (creates an
//!   object of its own kind owned by object `ID`), `owned` (lists, through
//!   its own kind's client, what object `ID` owns), `until-denied` (writes
//!   `NAME-0`, `NAME-1`, ... until a write is refused); to show what a
//!   policy's `[store]` section grants.
//!
//! Anything else settles. It also declares spec schema version 1, and its
//! converter spins forever on an older spec whose `act` is `spin`.
//!
//! The operator's config key `registration` turns the registration itself
//! into the attack: `stuck` never returns from `describe`, and
//! `forged-kind` names a kind with a newline in it, in a 200 KiB group. The
//! config key `kind` renames the kind it serves, so two copies can load.
//! The config key `schema` replaces its spec schema with an attack on the
//! host's checker: `exponential` (51 levels of an `anyOf` whose two
//! branches both descend to the next level, so a check's work doubles with
//! each level of a spec nested under `a`) or `looping` (an `anyOf` that
//! refers back to the whole schema before reading anything).

use std::time::Duration;

use beehive_guest::{
    Action, Cadence, ClientOf, Controller, CreateOptions, Error, IfHeld, ObjectId, ObjectOf,
    Registration, Result,
};
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
            "swap-dir" => {
                std::fs::rename("/data/inner", "/data/was-inner").map_err(failed("rename"))?;
                std::fs::create_dir("/data/inner").map_err(failed("mkdir"))?;
                "swapped /data/inner".to_string()
            }
            "symlink" => {
                symlink_in_data(&object.spec.path, "link").map_err(failed("symlink"))?;
                format!("linked /data/link -> {}", object.spec.path)
            }
            "hard-link" => {
                std::fs::hard_link(&object.spec.path, "/data/link").map_err(failed("hard link"))?;
                format!("hard-linked /data/link to {}", object.spec.path)
            }
            "list" => {
                let entries = std::fs::read_dir(&object.spec.path).map_err(failed("list"))?;
                let mut names: Vec<String> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                format!("listed {}: {}", object.spec.path, names.join(" "))
            }
            "write-bytes" => {
                let bytes: usize = object.spec.path.parse().map_err(failed("size"))?;
                let file = format!("/data/{}.bin", object.meta.name);
                std::fs::write(&file, vec![b'x'; bytes]).map_err(failed("write"))?;
                format!("wrote {bytes} bytes to {file}")
            }
            "raw-fetch" => raw_fetch(&object.spec.path).map_err(Error::msg)?,
            "panic" => panic!("hostile: panicking on purpose"),
            act if act.starts_with("store-") => store_call(client, object, &act["store-".len()..])?,
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
            _ => {
                let kind = beehive_guest::config::get("kind").unwrap_or_else(|| "Hostile".into());
                let mut registration = greedy_registration(kind);
                match beehive_guest::config::get("schema").as_deref() {
                    Some("exponential") => registration.spec_schema = Some(exponential_schema(51)),
                    Some("looping") => {
                        registration.spec_schema =
                            Some(r##"{"anyOf": [{"$ref": "#"}, {"type": "string"}]}"##.into());
                    }
                    _ => {}
                }
                registration
            }
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
fn greedy_registration(kind: String) -> Registration {
    let every_millisecond = Duration::from_millis(1);
    Registration::new("test.dev", kind)
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

/// A schema of `levels` levels, each an `anyOf` of two branches that both
/// descend to the next level under `a`; the last level wants a string. A
/// value nested deeper than that fails both branches at every level, so
/// checking it visits 2^`levels` subschemas unless the checker stops it.
pub fn exponential_schema(levels: usize) -> String {
    let level = |i: usize| {
        let next = serde_json::json!({"$ref": format!("#/$defs/l{}", i + 1)});
        serde_json::json!({"anyOf": [
            {"type": "object", "properties": {"a": next}},
            {"type": "object", "properties": {"a": next}, "minProperties": 1},
        ]})
    };
    let mut defs: serde_json::Map<String, serde_json::Value> = (0..levels - 1)
        .map(|i| (format!("l{i}"), level(i)))
        .collect();
    defs.insert(
        format!("l{}", levels - 1),
        serde_json::json!({"type": "string"}),
    );
    serde_json::json!({"$ref": "#/$defs/l0", "$defs": defs}).to_string()
}

impl Hostile {
    fn act_of(spec: &serde_json::Value) -> Option<&str> {
        spec.get("act").and_then(|a| a.as_str())
    }
}

/// Turns an I/O error into the pass's failure, saying what was tried.
/// One store call on the kind the spec's `path` names (`Kind.group NAME
/// ID`), and what it returned, in words.
fn store_call(
    client: &ClientOf<'_, Hostile>,
    object: &ObjectOf<Hostile>,
    op: &str,
) -> Result<String> {
    let mut words = object.spec.path.split(' ');
    let kind = words.next().unwrap_or_default();
    let name = words.next().unwrap_or_default();
    let id: ObjectId = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let (kind_name, group) = kind.split_once('.').unwrap_or((kind, ""));
    let other = client.raw().kind_client(group, kind_name);
    let spec = serde_json::json!({ "name": name }).to_string();
    let put = |options: CreateOptions| other.put(name, spec.clone(), options, IfHeld::Update);
    Ok(match op {
        "create" => format!("put {}", put(CreateOptions::default())?.0.meta.label()),
        "finalize" => {
            let options = CreateOptions {
                finalizers: vec!["test.dev/hold".into()],
                ..CreateOptions::default()
            };
            format!("put {} with a finalizer", put(options)?.0.meta.label())
        }
        "get" => format!("got {}", other.get_by_name(name)?.spec),
        "list" => format!("listed {} objects", other.list(None, 100, None)?.0.len()),
        "update" => format!("updated {}", other.update(id, spec)?.meta.label()),
        "delete" => {
            other.delete_by_name(name)?;
            format!("deleted {name}")
        }
        "depend" => {
            client.add_dependency(id)?;
            format!("depends on {id}")
        }
        "own" => {
            let own = &object.meta.group_kind;
            let children = client.raw().kind_client(&own.group, &own.kind);
            let child = format!("{}-child", object.meta.name);
            let spec = r#"{"act":"behave"}"#.to_string();
            children.put(&child, spec, CreateOptions::owner(id), IfHeld::Update)?;
            format!("made {child}, owned by {id}")
        }
        "owned" => {
            // Asked through its own kind's client: which of its objects
            // object `ID` (of another kind) owns.
            let own = &object.meta.group_kind;
            let mine = client.raw().kind_client(&own.group, &own.kind);
            format!("{id} owns {} objects", mine.list_owned_objects(id)?.len())
        }
        "until-denied" => {
            // Writes NAME-0, NAME-1, ... a tenth of a second apart, as
            // long as it may: for an operator to revoke the grant under a
            // pass that is running.
            for written in 0..MAX_WRITES_UNTIL_DENIED {
                let each = format!("{name}-{written}");
                let spec = serde_json::json!({ "name": each }).to_string();
                let options = CreateOptions::default();
                if let Err(error) = other.put(&each, spec, options, IfHeld::Update) {
                    return Ok(format!("denied after {written} writes: {error}"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            format!("never denied in {MAX_WRITES_UNTIL_DENIED} writes")
        }
        other => return Err(Error::msg(format!("no store call {other:?}"))),
    })
}

/// How many writes `store-until-denied` makes at most: 40 s of them, within
/// the default wall-clock limit of a pass.
const MAX_WRITES_UNTIL_DENIED: u32 = 400;

fn failed<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> Error {
    move |error| Error::msg(format!("cannot {what}: {error}"))
}

/// A GET of `/health` at `authority` through raw wasi:http, reporting the
/// status or the error code the host gave.
#[cfg(target_arch = "wasm32")]
fn raw_fetch(authority: &str) -> Result<String, String> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, OutgoingRequest, Scheme};

    let request = OutgoingRequest::new(Fields::new());
    request
        .set_scheme(Some(&Scheme::Http))
        .map_err(|()| "bad scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|()| format!("authority {authority:?} refused by the guest bindings"))?;
    request
        .set_path_with_query(Some("/health"))
        .map_err(|()| "bad path")?;
    let pending = outgoing_handler::handle(request, None).map_err(|e| format!("refused: {e:?}"))?;
    pending.subscribe().block();
    match pending.get() {
        Some(Ok(Ok(response))) => Ok(format!("raw fetch HTTP {}", response.status())),
        Some(Ok(Err(code))) => Err(format!("raw fetch failed: {code:?}")),
        _ => Err("raw fetch: the response was lost".into()),
    }
}

/// Makes the symlink `/data/LINK` → `target` through raw wasi:filesystem
/// (std's wrapper is unstable on WASI).
#[cfg(target_arch = "wasm32")]
fn symlink_in_data(target: &str, link: &str) -> Result<(), String> {
    let (data, _) = wasip2::filesystem::preopens::get_directories()
        .into_iter()
        .find(|(_, path)| path == "/data")
        .ok_or("/data is not granted")?;
    data.symlink_at(target, link)
        .map_err(|code| format!("{code:?}"))
}

#[cfg(not(target_arch = "wasm32"))]
fn symlink_in_data(_target: &str, _link: &str) -> Result<(), String> {
    Err("raw wasi:filesystem exists only in a component".into())
}

#[cfg(not(target_arch = "wasm32"))]
fn raw_fetch(_authority: &str) -> Result<String, String> {
    Err("raw wasi:http exists only in a component".into())
}

fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

beehive_guest::export!(Hostile);
