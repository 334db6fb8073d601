//! The plugin limits `beehive run` enforces, as flags; `beehive plugins
//! check` takes the same ones to say what a plugin would get.

use std::collections::BTreeMap;
use std::time::Duration;

use beehive::plugin::{HttpLimits, LimitOverrides, Limits, RuntimeOptions};
use clap::Args;

/// Every `--plugin-*` ceiling, and the host's default workers per kind.
#[derive(Args, Debug)]
pub struct PluginLimitArgs {
    /// Guest CPU time one pass may use (time blocked in host calls does not
    /// count). A ceiling: a plugin may ask for less, never more.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub plugin_deadline: Duration,

    /// Wall-clock time one pass may take in all, host calls included; a
    /// pass still running then is cancelled and fails.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub plugin_wall_limit: Duration,

    /// Linear memory one plugin instance may grow to, e.g. `64MiB`.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub plugin_memory: usize,

    /// Linear memory all plugin instances together may hold.
    #[arg(long, value_name = "SIZE", default_value = "192MiB", value_parser = parse_size)]
    pub plugin_memory_budget: usize,

    /// The most passes at once a plugin's kind may run (and instances it may
    /// hold); a plugin asking for more gets this many.
    #[arg(long, value_name = "N", default_value = "16", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub plugin_concurrency: u32,

    /// Host calls one pass may make (WASI calls included); a pass that makes
    /// more fails.
    #[arg(long, value_name = "N", default_value = "10000")]
    pub plugin_host_calls: u64,

    /// The shortest cadence a plugin may ask for (owed, full and individual
    /// pass intervals, backoff cap).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub plugin_min_interval: Duration,

    /// How long a plugin's outbound HTTP connection may take to open (TLS
    /// included). A plugin's policy may set its own (`connect_timeout_ms`);
    /// a plugin's request may only ask for less.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    pub plugin_http_connect_timeout: Duration,

    /// How long a plugin's outbound request may wait for the response's
    /// first byte, and for each later one (policy: `first_byte_timeout_ms`).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub plugin_http_first_byte_timeout: Duration,

    /// The largest response body a plugin's request may read; the body
    /// ends with an error past it (policy: `max_response_bytes`).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size)]
    pub plugin_http_response_limit: usize,

    /// Outbound requests one plugin may have in flight; one more waits up to
    /// the connect timeout for a turn, then fails (policy:
    /// `max_concurrent_requests`).
    #[arg(long, value_name = "N", default_value = "8", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub plugin_http_concurrency: u32,

    /// Passes at once per kind, unless a plugin asks for its own number
    /// (default 1).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    /// The pass deadline ceiling of one plugin, `NAME=DURATION` (NAME is its
    /// file name without `.wasm`), instead of --plugin-deadline. Repeatable.
    /// Every --plugin-* limit is a ceiling: a plugin may ask for less in its
    /// registration, never more, and `beehive plugins` shows what applies.
    #[arg(long, value_name = "NAME=DURATION", value_parser = parse_named_duration)]
    pub plugin_deadline_for: Vec<(String, Duration)>,

    /// The memory cap of one plugin, `NAME=SIZE`. Repeatable.
    #[arg(long, value_name = "NAME=SIZE", value_parser = parse_named_size)]
    pub plugin_memory_for: Vec<(String, usize)>,

    /// The concurrency ceiling of one plugin, `NAME=N`. Repeatable.
    #[arg(long, value_name = "NAME=N", value_parser = parse_named_count)]
    pub plugin_concurrency_for: Vec<(String, usize)>,
}

impl PluginLimitArgs {
    /// A plugin runtime's options under these limits (no compiled cache).
    pub fn runtime_options(&self) -> RuntimeOptions {
        let mut per_plugin: BTreeMap<&str, LimitOverrides> = BTreeMap::new();
        for (name, deadline) in &self.plugin_deadline_for {
            per_plugin.entry(name).or_default().pass_deadline = Some(*deadline);
        }
        for (name, memory) in &self.plugin_memory_for {
            per_plugin.entry(name).or_default().memory = Some(*memory);
        }
        for (name, workers) in &self.plugin_concurrency_for {
            per_plugin.entry(name).or_default().concurrency = Some(*workers);
        }
        per_plugin.into_iter().fold(
            RuntimeOptions::new()
                .limits(Limits {
                    pass_deadline: self.plugin_deadline,
                    pass_wall_limit: self.plugin_wall_limit,
                    memory: self.plugin_memory,
                    concurrency: self.plugin_concurrency as usize,
                    min_interval: self.plugin_min_interval,
                    host_calls_per_pass: self.plugin_host_calls,
                    http: HttpLimits {
                        connect_timeout: self.plugin_http_connect_timeout,
                        first_byte_timeout: self.plugin_http_first_byte_timeout,
                        max_response_bytes: self.plugin_http_response_limit as u64,
                        max_concurrent_requests: self.plugin_http_concurrency as usize,
                    },
                    ..Limits::default()
                })
                .memory_budget(self.plugin_memory_budget),
            |options, (name, limits)| options.plugin_limits(name, limits),
        )
    }
}

/// Parses `64MiB`, `512KiB`, `1GiB`, `100MB` or a plain number of bytes.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits
        .parse()
        .map_err(|_| format!("invalid size {text:?}: write e.g. 64MiB"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => return Err(format!("invalid size unit {other:?}: use KiB, MiB or GiB")),
    };
    number
        .checked_mul(scale)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("invalid size {text:?}"))
}

fn split_named(text: &str) -> Result<(String, &str), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value)),
        _ => Err(format!(
            "{text:?}: write NAME=VALUE, NAME being the plugin file without .wasm"
        )),
    }
}

fn parse_named_duration(text: &str) -> Result<(String, Duration), String> {
    let (name, value) = split_named(text)?;
    let duration = humantime::parse_duration(value).map_err(|e| format!("{value:?}: {e}"))?;
    Ok((name, duration))
}

fn parse_named_count(text: &str) -> Result<(String, usize), String> {
    let (name, value) = split_named(text)?;
    match value.parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok((name, n)),
        _ => Err(format!("{value:?}: write a number from 1 to 1024")),
    }
}

fn parse_named_size(text: &str) -> Result<(String, usize), String> {
    let (name, value) = split_named(text)?;
    Ok((name, parse_size(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_named_limits_parse() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert_eq!(
            parse_named_duration("greeting=2s"),
            Ok(("greeting".into(), Duration::from_secs(2)))
        );
        assert!(parse_named_duration("=2s").is_err());
        assert_eq!(
            parse_named_size("greeting=1MiB"),
            Ok(("greeting".into(), 1 << 20))
        );
    }
}
