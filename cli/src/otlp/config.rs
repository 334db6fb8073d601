//! Where spans go and how many wait: `--otlp-endpoint` and the standard
//! `OTEL_*` variables, read once at start. A value that makes no sense is
//! refused with the variable's name, never guessed at.

use std::time::Duration;

use beehive::trace::Sampler;

/// The most spans the queue may be set to hold.
pub const MAX_QUEUE: usize = 65_536;

/// Everything the exporter needs.
#[derive(Clone, Debug)]
pub struct OtlpConfig {
    /// Where traces are posted.
    pub endpoint: Endpoint,
    /// The resource every span is reported under: `service.name` first.
    pub resource: Vec<(String, String)>,
    /// Which traces are recorded.
    pub sampler: Sampler,
    /// The most finished spans waiting; past it, spans are dropped and
    /// counted (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048).
    pub queue: usize,
    /// The most spans in one request (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`,
    /// default 512).
    pub batch: usize,
    /// How long a span may wait for others to share its request
    /// (`OTEL_BSP_SCHEDULE_DELAY`, default 1000 ms).
    pub delay: Duration,
    /// How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, default
    /// 10 s): past it, its spans are dropped and counted.
    pub timeout: Duration,
}

/// An OTLP/HTTP traces endpoint, split as a request needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Plain HTTP rather than TLS.
    pub plain: bool,
    /// `host:port`.
    pub authority: String,
    /// The path traces are posted to (`/v1/traces` below a base URL).
    pub path: String,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.plain { "http" } else { "https" };
        write!(f, "{scheme}://{}{}", self.authority, self.path)
    }
}

impl OtlpConfig {
    /// The configuration `flag` (`--otlp-endpoint`) and the environment
    /// (`env` reads a variable) name; `None` when no endpoint is named, or
    /// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` says not to.
    ///
    /// # Errors
    /// A sentence naming the flag or variable whose value is refused.
    pub fn resolve(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpConfig>, String> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let endpoint = match (flag, set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
            (Some(url), _) => Some(Endpoint::parse(url, true, "--otlp-endpoint")?),
            (None, Some(url)) => Some(Endpoint::parse(
                &url,
                false,
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            )?),
            (None, None) => match set("OTEL_EXPORTER_OTLP_ENDPOINT") {
                Some(url) => Some(Endpoint::parse(&url, true, "OTEL_EXPORTER_OTLP_ENDPOINT")?),
                None => None,
            },
        };
        let Some(endpoint) = endpoint else {
            return Ok(None);
        };
        match set("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") if flag.is_none() => return Ok(None),
            Some(other) => {
                return Err(format!(
                    "OTEL_TRACES_EXPORTER={other:?}: this host exports traces only over OTLP (`otlp`, or `none` for no traces)"
                ));
            }
        }
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol
            && protocol.trim() != "http/protobuf"
        {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={protocol:?}: this host speaks OTLP over HTTP with protobuf (`http/protobuf`); point it at the collector's HTTP port (4318)"
            ));
        }
        let sampler_name = set("OTEL_TRACES_SAMPLER");
        let sampler = match sampler_name {
            Some(name) => Sampler::from_name(&name, set("OTEL_TRACES_SAMPLER_ARG").as_deref())
                .map_err(|e| format!("OTEL_TRACES_SAMPLER: {e}"))?,
            None => Sampler::default(),
        };
        let queue = number(&set, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1..=MAX_QUEUE)?;
        let batch = number(&set, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1..=queue)?;
        let delay = millis(&set, "OTEL_BSP_SCHEDULE_DELAY", 1000)?;
        let timeout = match set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            Some(_) => millis(&set, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10_000)?,
            None => millis(&set, "OTEL_EXPORTER_OTLP_TIMEOUT", 10_000)?,
        };
        if timeout.is_zero() {
            return Err("OTEL_EXPORTER_OTLP_TIMEOUT must be more than 0 ms".into());
        }
        Ok(Some(OtlpConfig {
            endpoint,
            resource: resource(&set)?,
            sampler,
            queue,
            batch,
            delay,
            timeout,
        }))
    }
}

impl Endpoint {
    /// Reads `url`; a `base` URL has `/v1/traces` added to its path, as
    /// OpenTelemetry adds it to `OTEL_EXPORTER_OTLP_ENDPOINT`.
    fn parse(url: &str, base: bool, named: &str) -> Result<Endpoint, String> {
        let refuse = |why: &str| format!("{named} {url:?}: {why}");
        let uri: hyper::Uri = url
            .trim()
            .parse()
            .map_err(|e| refuse(&format!("not a URL ({e})")))?;
        let plain = match uri.scheme_str() {
            Some("http") => true,
            Some("https") => false,
            _ => return Err(refuse("give an http:// or https:// URL")),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| refuse("the URL names no host"))?;
        if authority.as_str().contains('@') {
            return Err(refuse("user information in the URL is refused"));
        }
        if uri.query().is_some() {
            return Err(refuse("a query is refused"));
        }
        let port = authority.port_u16().unwrap_or(if plain { 80 } else { 443 });
        let path = uri.path();
        let path = if base {
            format!("{}/v1/traces", path.trim_end_matches('/'))
        } else {
            path.to_string()
        };
        Ok(Endpoint {
            plain,
            authority: format!("{}:{port}", authority.host()),
            path,
        })
    }
}

/// `service.name` (from `OTEL_SERVICE_NAME`, else `OTEL_RESOURCE_ATTRIBUTES`,
/// else `beehive`), then the other resource attributes as given.
fn resource(set: &impl Fn(&str) -> Option<String>) -> Result<Vec<(String, String)>, String> {
    let mut attributes = Vec::new();
    if let Some(list) = set("OTEL_RESOURCE_ATTRIBUTES") {
        for pair in list.split(',').filter(|p| !p.trim().is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!(
                    "OTEL_RESOURCE_ATTRIBUTES: {pair:?} is not key=value"
                ));
            };
            let value = percent_decoded(value.trim()).ok_or_else(|| {
                format!("OTEL_RESOURCE_ATTRIBUTES: {value:?} is not percent-encoded UTF-8")
            })?;
            attributes.push((key.trim().to_string(), value));
        }
    }
    let named = set("OTEL_SERVICE_NAME").map(|v| v.trim().to_string());
    let given = attributes
        .iter()
        .position(|(k, _)| k == "service.name")
        .map(|at| attributes.remove(at).1);
    let service = named.or(given).unwrap_or_else(|| "beehive".to_string());
    attributes.insert(0, ("service.name".to_string(), service));
    Ok(attributes)
}

fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = text.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn number(
    set: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, String> {
    let Some(text) = set(name) else {
        return Ok(default.min(*range.end()));
    };
    match text.trim().parse::<usize>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!(
            "{name}={text:?}: give a whole number from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

fn millis(
    set: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: u64,
) -> Result<Duration, String> {
    let Some(text) = set(name) else {
        return Ok(Duration::from_millis(default));
    };
    match text.trim().parse::<u64>() {
        Ok(ms) if ms <= 600_000 => Ok(Duration::from_millis(ms)),
        _ => Err(format!(
            "{name}={text:?}: give milliseconds, from 0 to 600000"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(flag: Option<&str>, vars: &[(&str, &str)]) -> Result<Option<OtlpConfig>, String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OtlpConfig::resolve(flag, |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn no_endpoint_means_no_exporter() {
        assert!(
            resolve(None, &[("OTEL_SERVICE_NAME", "x")])
                .unwrap()
                .is_none()
        );
        let disabled = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert!(resolve(None, &disabled).unwrap().is_none());
    }

    #[test]
    fn a_base_url_gets_the_traces_path_and_a_traces_url_is_kept() {
        let flag = resolve(Some("http://127.0.0.1:4318"), &[])
            .unwrap()
            .unwrap();
        assert_eq!(flag.endpoint.to_string(), "http://127.0.0.1:4318/v1/traces");
        let base = resolve(
            None,
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example/otlp/")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            base.endpoint.to_string(),
            "https://otel.example:443/otlp/v1/traces"
        );
        let exact = resolve(
            None,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(exact.endpoint.to_string(), "http://c:4318/custom");
    }

    #[test]
    fn the_resource_names_the_service_first() {
        let config = resolve(
            Some("http://127.0.0.1:4318"),
            &[(
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod,service.name=ignored,team=a%20b",
            )],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            config.resource[0],
            ("service.name".into(), "ignored".into())
        );
        assert!(config.resource.contains(&("team".into(), "a b".into())));
        let named = resolve(
            Some("http://127.0.0.1:4318"),
            &[
                ("OTEL_SERVICE_NAME", "plane"),
                ("OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            named.resource,
            [("service.name".to_string(), "plane".to_string())]
        );
    }

    #[test]
    fn nonsense_is_refused_naming_the_variable() {
        let url = Some("http://127.0.0.1:4318");
        for (vars, named) in [
            (
                vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                vec![("OTEL_TRACES_SAMPLER", "often")],
                "OTEL_TRACES_SAMPLER",
            ),
            (
                vec![("OTEL_BSP_MAX_QUEUE_SIZE", "0")],
                "OTEL_BSP_MAX_QUEUE_SIZE",
            ),
            (
                vec![
                    ("OTEL_BSP_MAX_QUEUE_SIZE", "10"),
                    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "11"),
                ],
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                vec![("OTEL_RESOURCE_ATTRIBUTES", "novalue")],
                "OTEL_RESOURCE_ATTRIBUTES",
            ),
            (
                vec![("OTEL_TRACES_EXPORTER", "zipkin")],
                "OTEL_TRACES_EXPORTER",
            ),
        ] {
            let error = resolve(url, &vars).unwrap_err();
            assert!(error.contains(named), "{error}");
        }
        for bad in [
            "127.0.0.1:4318",
            "ftp://x",
            "http://u:p@x:1",
            "http://x:1/?token=1",
        ] {
            let error = resolve(Some(bad), &[]).unwrap_err();
            assert!(error.contains("--otlp-endpoint"), "{error}");
        }
    }
}
