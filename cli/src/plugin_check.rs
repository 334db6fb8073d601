//! `beehive plugins check FILE`: what a plugin file is and what a host
//! would make of it, without a host or a store. It loads the plugin as a
//! host does (compiling it, asking it what it registers) under the limits
//! given as flags, so what it prints is what `beehive run` would serve.

use std::path::Path;
use std::time::Duration;

use beehive::plugin::{
    MAX_PLUGIN_BYTES, Plugin, Policy, Runtime, Shape, TRUST_FILE, Trust, initial_memory,
    signature_of,
};

use crate::endpoint::Paths;
use crate::failure::{Code, Failure};
use crate::plugin_limits::PluginLimitArgs;

/// The passes at once per kind a host gives a plugin that asks for none,
/// unless `--concurrency` says otherwise.
const HOST_DEFAULT_WORKERS: usize = 1;

/// Checks `file` under `limits` and the policy `policy` (or the one beside
/// it); the report, or why a host would refuse it (exit 7). Where the store
/// `paths` names exists, the compile goes into its host's plugin cache (the
/// default one), so that host serves the file without compiling it again.
pub async fn check(
    file: &Path,
    policy: Option<&Path>,
    limits: &PluginLimitArgs,
    paths: &Paths,
) -> Result<String, Failure> {
    let refused = |why: String| Failure::new(Code::Invalid, format!("{}: {why}", file.display()));
    let bytes = read(file).map_err(refused)?;
    let shape = Shape::of(&bytes).map_err(|why| refused(format!("not a plugin: {why}")))?;
    if let Some(problem) = shape.problem() {
        return Err(refused(problem));
    }
    let policy_file = policy.map_or_else(|| Policy::file_of(file), Path::to_path_buf);
    let plugin_dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let policy = Policy::read(&policy_file, std::slice::from_ref(&plugin_dir))
        .map_err(|e| Failure::new(Code::Invalid, e.to_string()))?;
    // Checked before anything compiles, as a host checks it.
    let signature = signature(file, &bytes, &plugin_dir, &policy).map_err(refused)?;
    // Tiered, a host's default: a large plugin is compiled by the baseline
    // compiler, in a fraction of the optimising compile's time, and its
    // host takes that code from the cache and optimises it behind. (The
    // compile this starts behind dies with the command.)
    let mut options = limits.runtime_options();
    if paths.is_postgres() || paths.db.exists() {
        options = options
            .cache_dir(crate::run::default_plugin_cache(paths))
            .cache_key(crate::run::plugin_cache_key(paths));
    }
    let runtime = Runtime::new(options).map_err(|e| Failure::from(e.to_string()))?;
    let plugin = runtime
        .load(file, policy)
        .await
        .map_err(|e| Failure::new(Code::Invalid, e.to_string()))?;
    let workers = limits.concurrency.unwrap_or(HOST_DEFAULT_WORKERS);
    let facts = Facts {
        file,
        bytes: &bytes,
        shape: &shape,
        signature: &signature,
    };
    Ok(report(&facts, &plugin, workers, &policy_file))
}

/// What the directory's trust makes of `file`'s signature: who signed it,
/// or that it is unsigned where nothing is trusted; an error where a host
/// would refuse it.
fn signature(file: &Path, bytes: &[u8], dir: &Path, policy: &Policy) -> Result<String, String> {
    let trust =
        Trust::of_directory(dir).map_err(|why| format!("the trust file is wrong: {why}"))?;
    let Some(trust) = trust else {
        return Ok(match signature_of(file).exists() {
            true => format!(
                "not checked: a signature is beside it, but no {TRUST_FILE} in its directory \
                 names the keys to check it against"
            ),
            false => "not signed (no {TRUST_FILE} in its directory: a host loads it unsigned)"
                .replace("{TRUST_FILE}", TRUST_FILE),
        });
    };
    let signer = trust
        .verify(file, bytes, &policy.trust)
        .map_err(|why| format!("refused: {why}"))?;
    Ok(match signer.signed_at {
        Some(at) => format!("signed by {signer}, at {at} (Unix time)"),
        None => format!("signed by {signer}"),
    })
}

/// The file's bytes, refused when it is not a regular file or too large.
pub(crate) fn read(file: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(file).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_PLUGIN_BYTES {
        return Err(format!(
            "{} bytes, more than a plugin may be ({MAX_PLUGIN_BYTES})",
            meta.len()
        ));
    }
    std::fs::read(file).map_err(|e| format!("cannot read: {e}"))
}

/// What the check read from the file itself.
struct Facts<'a> {
    file: &'a Path,
    bytes: &'a [u8],
    shape: &'a Shape,
    signature: &'a str,
}

fn report(facts: &Facts<'_>, plugin: &Plugin, host_workers: usize, policy_file: &Path) -> String {
    let registration = plugin.registration();
    let limits = plugin.limits();
    let cadence = &registration.cadence;
    let every = |d: Option<Duration>| d.map_or("the host's".to_string(), short);
    let schema = |version: u32, declared: bool| {
        format!(
            "version {version}{}",
            if declared { ", JSON Schema" } else { "" }
        )
    };
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let grants = crate::handlers::grants_of(plugin.policy());
    let Facts {
        file,
        bytes,
        shape,
        signature,
    } = facts;
    let rows: Vec<(&str, String)> = vec![
        ("File", file.display().to_string()),
        (
            "Size",
            format!(
                "{:.1} MB, sha256 {}",
                bytes.len() as f64 / 1e6,
                plugin.content_hash()
            ),
        ),
        (
            "Contract",
            format!(
                "{}, world {}{}",
                shape.contract().unwrap_or_default(),
                shape.world(),
                shape
                    .language
                    .map_or(String::new(), |language| format!(" ({language})"))
            ),
        ),
        ("Signature", signature.to_string()),
        ("Kind", registration.group_kind.to_string()),
        (
            "Finalizers",
            match registration.finalizers.is_empty() {
                true => "-".into(),
                false => registration.finalizers.join(", "),
            },
        ),
        (
            "Cadence",
            format!(
                "owed pass {}, full pass {}, individual pass {}, backoff cap {}, pass all at start: {}",
                every(cadence.owed_pass_interval),
                every(cadence.full_pass_interval),
                every(cadence.individual_pass_interval),
                every(cadence.max_retry_interval),
                cadence
                    .startup_full_pass
                    .map_or("the host's", |b| yes_no(b)),
            ),
        ),
        (
            "Spec",
            schema(registration.spec_version, registration.spec_schema),
        ),
        (
            "Status",
            schema(registration.status_version, registration.status_schema),
        ),
        ("Migrates", yes_no(registration.migrates).to_string()),
        ("Validates", yes_no(registration.validates).to_string()),
        ("Workers", plugin.workers(host_workers).to_string()),
        (
            "Limits",
            format!(
                "CPU {} a pass, wall {}, memory {} (it starts with {:.1}Mi), host calls {} a pass",
                short(limits.pass_deadline),
                short(limits.pass_wall_limit),
                mib(limits.memory as u64),
                initial_memory(bytes) as f64 / (1 << 20) as f64,
                limits.host_calls_per_pass
            ),
        ),
        (
            "Policy",
            match policy_file.exists() {
                true => policy_file.display().to_string(),
                false => format!("{} (none: no grants)", policy_file.display()),
            },
        ),
        (
            "Grants",
            match grants.is_empty() {
                true => "-".into(),
                false => grants.join(", "),
            },
        ),
    ];
    rows.iter()
        .map(|(key, value)| format!("{:<12}{}\n", format!("{key}:"), value))
        .collect()
}

fn short(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

fn mib(bytes: u64) -> String {
    format!("{}Mi", bytes >> 20)
}
