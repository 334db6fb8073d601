//! What the operator grants a plugin beyond its sandbox, from the policy
//! file beside it: `NAME.toml` next to `NAME.wasm`. No file means no grants.
//!
//! ```toml
//! # plugins/render.toml
//! [files."/out"]              # the path the plugin sees
//! path = "/srv/rendered"      # the host directory behind it
//! access = "read-write"       # or "read-only" (the default)
//!
//! [http]
//! allow = ["127.0.0.1:8080", "*.example.com", "https://api.github.com"]
//! connect_timeout_ms = 2000           # these four override the host's
//! first_byte_timeout_ms = 5000        # --plugin-http-* defaults for this
//! max_response_bytes = 1048576        # plugin
//! max_concurrent_requests = 4
//!
//! [store]                             # kinds beyond its own (always read-write)
//! read = ["Config.example.dev"]        # get, list, follow edges, depend on, own from
//! write = ["*.render.example.dev"]     # create, update, delete (and read)
//!
//! [config]
//! region = "eu-west-1"                 # a plain value
//! token = { env = "RENDER_TOKEN" }     # from the host's environment
//! password = { file = "/etc/render/pw" }  # from a file (trailing newline dropped)
//! ```
//!
//! Config values are read when the plugin loads and are never logged or
//! shown: only their keys and where they come from are.
//!
//! Unknown sections and keys are errors, so a typo never grants less (or
//! more) than the operator meant silently.
//!
//! The adversary is the plugin granted the directory, and anyone who can
//! rename things inside a grant. So a grant is checked once and then held
//! by handle ([`DirHandle`]); and refused when it is, lies in or holds
//! `/proc`, `/sys` or `/dev` (where every plugin's `{ env = … }` secrets can
//! be read back), when it holds a place [`OffLimits`] names (the plugin
//! directory, the database's directory, the compiled cache and its key: a
//! plugin must not rewrite its own code, policy, native code or the store),
//! when two grants of one policy overlap (a plugin holding both could swap
//! the inner one for a link), and when it is read-write on the store's
//! filesystem without `allow_store_filesystem = true` (nothing meters what
//! a plugin writes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use beehive_types::{KindPattern, StoreGrants};
use serde::Deserialize;

use crate::naming::MAX_DOCUMENT_BYTES;
use crate::operator_file::{self, MAX_POLICY_BYTES};
use crate::plugin::Error;
use crate::plugin::granted_dir::DirHandle;
use crate::plugin::http::{HostPattern, HttpLimits};

/// The grants of one plugin, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Directories the plugin sees, by the path it sees them at.
    pub files: Vec<FileGrant>,
    /// Named values the plugin may read, by key.
    pub config: BTreeMap<String, ConfigValue>,
    /// Where the plugin may send HTTP requests, and how they are bounded.
    pub http: HttpGrant,
    /// The kinds besides its own the plugin may read and write.
    pub store: StoreGrants,
    /// Whose signatures this plugin may carry, of the keys the directory's
    /// trust file names (`[trust]`).
    pub trust: TrustOverride,
}

/// A plugin's own say over the directory's trust file (`[trust]` in its
/// policy file).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustOverride {
    /// The names of the trusted keys whose signatures it may carry; `None`
    /// is every key of the trust file.
    pub keys: Option<Vec<String>>,
    /// Whether a validly signed build older than the one serving may
    /// replace it (a rollback the operator asks for).
    pub allow_rollback: bool,
}

/// The outbound HTTP a plugin is granted. No hosts means every request is
/// denied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpGrant {
    /// The destinations it may reach.
    pub allow: Vec<HostPattern>,
    /// This plugin's own connect timeout, instead of the host's.
    pub connect_timeout: Option<Duration>,
    /// This plugin's own first-byte timeout, instead of the host's.
    pub first_byte_timeout: Option<Duration>,
    /// This plugin's own response size cap, instead of the host's.
    pub max_response_bytes: Option<u64>,
    /// This plugin's own cap on requests in flight, instead of the host's.
    pub max_concurrent_requests: Option<usize>,
}

impl HttpGrant {
    /// The host-wide `limits` with this plugin's overrides applied.
    pub(crate) fn over(&self, limits: HttpLimits) -> HttpLimits {
        HttpLimits {
            connect_timeout: self.connect_timeout.unwrap_or(limits.connect_timeout),
            first_byte_timeout: self.first_byte_timeout.unwrap_or(limits.first_byte_timeout),
            max_response_bytes: self.max_response_bytes.unwrap_or(limits.max_response_bytes),
            max_concurrent_requests: self
                .max_concurrent_requests
                .unwrap_or(limits.max_concurrent_requests),
        }
    }
}

/// One config value and where it came from. Its `Debug` and `Display`
/// never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigValue {
    value: String,
    /// `value`, `env:NAME` or `file:PATH`.
    pub source: String,
}

impl ConfigValue {
    /// The value, for the plugin that asks for it.
    pub(crate) fn reveal(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for ConfigValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConfigValue({}, <hidden>)", self.source)
    }
}

/// One directory granted to a plugin: the directory found at `host_path`
/// when the policy was checked, held open for as long as the grant lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileGrant {
    /// Where the plugin sees it, e.g. `/out`.
    pub guest_path: String,
    /// The host directory, canonical.
    pub host_path: PathBuf,
    /// Whether the plugin may only read it.
    pub read_only: bool,
    pub(crate) handle: Arc<DirHandle>,
}

/// The places no grant may reach, and the filesystem a read-write grant
/// may share only when the operator says so.
#[derive(Clone, Debug, Default)]
pub(crate) struct OffLimits {
    /// Directories and files no grant may hold: the plugin directory, the
    /// database's, the compiled-code cache and its key.
    pub(crate) places: Vec<PathBuf>,
    /// The device of the store's directory, for a SQLite store.
    pub(crate) store_device: Option<u64>,
}

/// Where the kernel shows itself and the host's own process (its
/// environment, where `{ env = … }` secrets come from; its memory; its
/// open files) and devices: no grant may hold one or lie inside one.
const SYSTEM_PLACES: [&str; 3] = ["/proc", "/sys", "/dev"];

impl std::fmt::Display for FileGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let access = if self.read_only { "ro" } else { "rw" };
        write!(
            f,
            "{}={}:{access}",
            self.guest_path,
            self.host_path.display()
        )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    files: BTreeMap<String, FileEntry>,
    #[serde(default)]
    config: BTreeMap<String, ConfigEntry>,
    #[serde(default)]
    http: Option<HttpEntry>,
    #[serde(default)]
    store: Option<StoreEntry>,
    #[serde(default)]
    trust: Option<TrustEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustEntry {
    keys: Option<Vec<String>>,
    #[serde(default)]
    allow_rollback: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreEntry {
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpEntry {
    #[serde(default)]
    allow: Vec<String>,
    connect_timeout_ms: Option<u64>,
    first_byte_timeout_ms: Option<u64>,
    max_response_bytes: Option<u64>,
    max_concurrent_requests: Option<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ConfigEntry {
    Value(String),
    Source(ConfigSource),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum ConfigSource {
    Env(String),
    File(PathBuf),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    path: PathBuf,
    #[serde(default)]
    access: Access,
    /// A read-write grant on the store's filesystem is unmetered there.
    #[serde(default)]
    allow_store_filesystem: bool,
}

#[derive(Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Access {
    #[default]
    ReadOnly,
    ReadWrite,
}

/// `error` in one line, with where in `text` it is when the parser knows
/// (its own rendering spans several lines, with a caret under the spot).
fn toml_problem(text: &str, error: &toml::de::Error) -> String {
    let Some(before) = error.span().and_then(|span| text.get(..span.start)) else {
        return error.message().to_string();
    };
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}: {}", error.message())
}

impl Policy {
    /// Reads and checks the policy file `file`, as a host would, for a
    /// check without one: no grant may reach the places `off_limits` names
    /// (a host adds its plugin directory, its database's directory and its
    /// compiled cache) or the system's. A missing file grants nothing.
    ///
    /// # Errors
    /// [`Error::Policy`] naming the file and what is wrong with it.
    pub fn read(file: &Path, off_limits: &[PathBuf]) -> Result<Policy, Error> {
        let off_limits = OffLimits {
            places: off_limits.to_vec(),
            store_device: None,
        };
        Policy::read_checked(file, &off_limits)
    }

    /// [`Policy::read`] against everything a host keeps off limits.
    pub(crate) fn read_checked(file: &Path, off_limits: &OffLimits) -> Result<Policy, Error> {
        let text = match operator_file::read_text(file, MAX_POLICY_BYTES) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Policy::default()),
            Err(e) => {
                return Err(Error::Policy {
                    path: file.to_path_buf(),
                    message: format!("cannot read: {e}"),
                });
            }
        };
        Policy::parse(&text, off_limits).map_err(|message| Error::Policy {
            path: file.to_path_buf(),
            message,
        })
    }

    /// Parses and checks a policy file's text; no grant may reach what
    /// `off_limits` names.
    ///
    /// # Errors
    /// What is wrong, in one line.
    pub(crate) fn parse(text: &str, off_limits: &OffLimits) -> Result<Policy, String> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| toml_problem(text, &e))?;
        let files: Vec<FileGrant> = file
            .files
            .into_iter()
            .map(|(guest_path, entry)| grant(guest_path, entry, off_limits))
            .collect::<Result<_, _>>()?;
        refuse_overlaps(&files)?;
        let config = file
            .config
            .into_iter()
            .map(|(key, entry)| Ok((key.clone(), config_value(&key, entry)?)))
            .collect::<Result<_, String>>()?;
        let http = file.http.map(http_grant).transpose()?.unwrap_or_default();
        let store = file.store.map(store_grant).transpose()?.unwrap_or_default();
        let trust = file
            .trust
            .map(|t| TrustOverride {
                keys: t.keys,
                allow_rollback: t.allow_rollback,
            })
            .unwrap_or_default();
        Ok(Policy {
            files,
            config,
            http,
            store,
            trust,
        })
    }

    /// The policy file of the plugin in `wasm`: `NAME.toml` beside it.
    pub fn file_of(wasm: &Path) -> PathBuf {
        wasm.with_extension("toml")
    }
}

/// The most kind patterns one verb of `[store]` may list: a policy is read
/// by a person, and each pattern is tried on every denied call.
const MAX_STORE_PATTERNS: usize = 256;

fn store_grant(entry: StoreEntry) -> Result<StoreGrants, String> {
    let patterns = |verb: &str, texts: Vec<String>| -> Result<Vec<KindPattern>, String> {
        if texts.len() > MAX_STORE_PATTERNS {
            return Err(format!(
                "store.{verb}: {} patterns; at most {MAX_STORE_PATTERNS}",
                texts.len()
            ));
        }
        texts
            .iter()
            .map(|text| text.parse().map_err(|e| format!("store.{verb}: {e}")))
            .collect()
    };
    Ok(StoreGrants {
        read: patterns("read", entry.read)?,
        write: patterns("write", entry.write)?,
    })
}

fn http_grant(entry: HttpEntry) -> Result<HttpGrant, String> {
    let allow = entry
        .allow
        .iter()
        .map(|pattern| pattern.parse().map_err(|e| format!("http.allow: {e}")))
        .collect::<Result<_, String>>()?;
    let positive = |name: &str, value: Option<u64>| match value {
        Some(0) => Err(format!("http.{name} must be above zero")),
        _ => Ok(value),
    };
    let millis = |name: &str, value| positive(name, value).map(|v| v.map(Duration::from_millis));
    Ok(HttpGrant {
        allow,
        connect_timeout: millis("connect_timeout_ms", entry.connect_timeout_ms)?,
        first_byte_timeout: millis("first_byte_timeout_ms", entry.first_byte_timeout_ms)?,
        max_response_bytes: positive("max_response_bytes", entry.max_response_bytes)?,
        max_concurrent_requests: positive(
            "max_concurrent_requests",
            entry.max_concurrent_requests.map(|n| n as u64),
        )?
        .map(|n| n as usize),
    })
}

fn config_value(key: &str, entry: ConfigEntry) -> Result<ConfigValue, String> {
    let (value, source) = match entry {
        ConfigEntry::Value(value) => (value, "value".to_string()),
        ConfigEntry::Source(ConfigSource::Env(name)) => {
            let value = std::env::var(&name)
                .map_err(|_| format!("config.{key}: the host's environment has no {name}"))?;
            (value, format!("env:{name}"))
        }
        ConfigEntry::Source(ConfigSource::File(path)) => {
            let text = operator_file::read_text(&path, MAX_DOCUMENT_BYTES as u64)
                .map_err(|e| format!("config.{key}: {}: {e}", path.display()))?;
            let value = text.strip_suffix('\n').unwrap_or(&text).to_string();
            (value, format!("file:{}", path.display()))
        }
    };
    if value.len() > MAX_DOCUMENT_BYTES {
        return Err(format!("config.{key}: the value is larger than 1 MiB"));
    }
    Ok(ConfigValue { value, source })
}

/// Refuses two grants where one directory holds the other: through the
/// outer one a plugin could move the inner one away and put anything in its
/// place.
fn refuse_overlaps(files: &[FileGrant]) -> Result<(), String> {
    for (i, outer) in files.iter().enumerate() {
        for inner in files.iter().skip(i + 1) {
            let (outer, inner) = if inner.host_path.starts_with(&outer.host_path) {
                (outer, inner)
            } else if outer.host_path.starts_with(&inner.host_path) {
                (inner, outer)
            } else {
                continue;
            };
            return Err(format!(
                "files.{:?}: {} lies inside files.{:?} ({}); grants may not overlap",
                inner.guest_path,
                inner.host_path.display(),
                outer.guest_path,
                outer.host_path.display()
            ));
        }
    }
    Ok(())
}

fn grant(
    guest_path: String,
    entry: FileEntry,
    off_limits: &OffLimits,
) -> Result<FileGrant, String> {
    let guest_ok = guest_path.starts_with('/')
        && guest_path.len() > 1
        && !guest_path
            .split('/')
            .any(|part| part == ".." || part == ".");
    if !guest_ok {
        return Err(format!(
            "files.{guest_path:?}: the path a plugin sees must be absolute, like \"/out\", \
             without . or .. parts"
        ));
    }
    let host_path = entry
        .path
        .canonicalize()
        .map_err(|e| format!("files.{guest_path:?}: {}: {e}", entry.path.display()))?;
    if !host_path.is_dir() {
        return Err(format!(
            "files.{guest_path:?}: {} is not a directory",
            host_path.display()
        ));
    }
    let refused = |why: String| format!("files.{guest_path:?}: {why}");
    if let Some(system) = SYSTEM_PLACES
        .iter()
        .map(Path::new)
        .find(|s| host_path.starts_with(s) || s.starts_with(&host_path))
    {
        return Err(refused(format!(
            "{} is or holds {}, which no plugin may be granted",
            host_path.display(),
            system.display()
        )));
    }
    if let Some(held) = off_limits.places.iter().find(|p| p.starts_with(&host_path)) {
        return Err(refused(format!(
            "{} holds {}, which no plugin may reach",
            host_path.display(),
            held.display()
        )));
    }
    let handle = DirHandle::open(&host_path).map_err(refused)?;
    let read_only = matches!(entry.access, Access::ReadOnly);
    let shares_store = off_limits.store_device == Some(handle.device());
    if !read_only && shares_store && !entry.allow_store_filesystem {
        return Err(refused(format!(
            "{} is on the store's filesystem, and nothing meters what a plugin writes there; \
             grant a directory on a filesystem of its own (a sized tmpfs, a volume with a quota), \
             or set allow_store_filesystem = true",
            host_path.display()
        )));
    }
    Ok(FileGrant {
        guest_path,
        host_path,
        read_only,
        handle: Arc::new(handle),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_grant_is_checked_and_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let text = format!(
            "[files.\"/out\"]\npath = {:?}\naccess = \"read-write\"\n",
            out.display().to_string()
        );
        let policy = Policy::parse(&text, &OffLimits::default()).unwrap();
        assert_eq!(policy.files.len(), 1);
        assert_eq!(policy.files[0].guest_path, "/out");
        assert!(!policy.files[0].read_only);
        assert_eq!(policy.files[0].host_path, out.canonicalize().unwrap());
    }

    #[test]
    fn config_values_come_from_the_file_the_environment_or_a_file_and_stay_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("pw");
        std::fs::write(&secret, "hunter2\n").unwrap();
        let text = format!(
            "[config]\nregion = \"eu\"\nhome = {{ env = \"HOME\" }}\npw = {{ file = {:?} }}\n",
            secret.display().to_string()
        );
        let policy = Policy::parse(&text, &OffLimits::default()).unwrap();
        assert_eq!(policy.config["region"].reveal(), "eu");
        assert_eq!(policy.config["pw"].reveal(), "hunter2");
        assert_eq!(policy.config["home"].source, "env:HOME");
        assert!(!format!("{policy:?}").contains("hunter2"));
        let missing = Policy::parse(
            "[config]\nx = { env = \"NO_SUCH_VARIABLE_HERE\" }\n",
            &OffLimits::default(),
        );
        assert!(missing.unwrap_err().contains("NO_SUCH_VARIABLE_HERE"));
    }

    #[test]
    fn an_http_grant_names_hosts_and_may_override_the_limits() {
        let text = "[http]\nallow = [\"127.0.0.1:8080\", \"*.example.com\"]\n\
                    connect_timeout_ms = 250\nmax_response_bytes = 1024\n";
        let policy = Policy::parse(text, &OffLimits::default()).unwrap();
        let shown: Vec<String> = policy.http.allow.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["127.0.0.1:8080", "*.example.com"]);
        let limits = policy.http.over(HttpLimits::default());
        assert_eq!(limits.connect_timeout, Duration::from_millis(250));
        assert_eq!(limits.max_response_bytes, 1024);
        assert_eq!(
            limits.first_byte_timeout,
            HttpLimits::default().first_byte_timeout
        );
    }

    #[test]
    fn a_store_grant_names_kinds_to_read_and_write() {
        let text = "[store]\nread = [\"Config.example.dev\"]\nwrite = [\"*.render.dev\"]\n";
        let policy = Policy::parse(text, &OffLimits::default()).unwrap();
        assert_eq!(
            policy.store.describe(),
            ["write:*.render.dev", "read:Config.example.dev"]
        );
        assert_eq!(
            Policy::parse("", &OffLimits::default()).unwrap().store,
            StoreGrants::default()
        );
    }

    #[test]
    fn mistakes_and_overreach_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{:?}", dir.path().display().to_string());
        let cases = [
            (format!("[files.\"out\"]\npath = {path}\n"), "absolute"),
            (format!("[files.\"/a/../b\"]\npath = {path}\n"), "absolute"),
            (
                "[files.\"/x\"]\npath = \"/no/such/dir\"\n".to_string(),
                "/no/such/dir",
            ),
            (
                format!("[files.\"/x\"]\npath = {path}\naccess = \"all\"\n"),
                "unknown variant",
            ),
            (
                "[http]\nallowed_hosts = [\"example.com\"]\n".to_string(),
                "line 2, column 1: unknown field",
            ),
            (
                "files = \n[http\n".to_string(),
                "line 2, column 6: unclosed table",
            ),
            (
                "[http]\nallow = [\"example.com/path\"]\n".to_string(),
                "http.allow",
            ),
            (
                "[http]\nallow = []\nconnect_timeout_ms = 0\n".to_string(),
                "above zero",
            ),
            (
                "[store]\nwrite = [\"Greet*.example.dev\"]\n".to_string(),
                "store.write: \"Greet*.example.dev\" is not a kind pattern",
            ),
            (
                "[store]\nlist = [\"A.b\"]\n".to_string(),
                "unknown field `list`",
            ),
        ];
        for (text, expected) in cases {
            let error = Policy::parse(&text, &OffLimits::default()).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let inside = dir.path().join("plugins");
        std::fs::create_dir(&inside).unwrap();
        let error = Policy::parse(
            &format!("[files.\"/all\"]\npath = {path}\n"),
            &OffLimits {
                places: vec![inside.canonicalize().unwrap()],
                store_device: None,
            },
        )
        .unwrap_err();
        assert!(error.contains("no plugin may reach"), "{error}");
    }

    /// Fuzz target: policy files assembled from lines an operator writes
    /// (and breaks), in any order, with stray bytes. Each must parse or be
    /// refused with a message: never a panic, never a grant of a place off
    /// limits. `BEEHIVE_FUZZ_CASES` sets the budget (1,000 by default).
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn lines(grant: &str, secret: &str) -> Vec<String> {
            [
                "[files.\"/out\"]",
                "[files.\"/\"]",
                "[files.\"/a/../b\"]",
                &format!("path = {grant:?}"),
                "path = \"/proc/self\"",
                "path = \"/dev\"",
                "path = \"\"",
                "access = \"read-write\"",
                "access = \"read-only\"",
                "access = \"sideways\"",
                "allow_store_filesystem = true",
                "[http]",
                "allow = [\"127.0.0.1:8080\", \"*.example.com\", \"https://x\", \"*\", \"\"]",
                "connect_timeout_ms = 0",
                "max_response_bytes = 18446744073709551615",
                "max_concurrent_requests = -1",
                "[store]",
                "read = [\"Config.example.dev\", \"*\", \"*.*.x\", \"\"]",
                "write = [\"*.render.example.dev\", \"Bad Kind\"]",
                "[config]",
                "region = \"eu\"",
                "token = { env = \"HOME\" }",
                &format!("pw = {{ file = {secret:?} }}"),
                "fifo = { file = \"/dev/zero\" }",
                "x = { env = \"A\", file = \"b\" }",
                "[[files]]",
                "= =",
                "[config",
                "\"unterminated",
            ]
            .map(str::to_string)
            .to_vec()
        }

        fn cases() -> u32 {
            std::env::var("BEEHIVE_FUZZ_CASES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1000)
        }

        #[test]
        fn fuzz_the_policy_parser_never_panics_nor_grants_what_is_off_limits() {
            let dir = tempfile::tempdir().unwrap();
            let grant = dir.path().join("grant");
            std::fs::create_dir(&grant).unwrap();
            let secret = dir.path().join("secret");
            std::fs::write(&secret, "s3cret\n").unwrap();
            let pool = lines(&grant.display().to_string(), &secret.display().to_string());
            let off_limits = OffLimits {
                places: vec![dir.path().join("plugins")],
                store_device: None,
            };
            let line = prop_oneof![
                4 => prop::sample::select(pool),
                1 => prop::collection::vec(any::<char>(), 0..12).prop_map(|c| c.into_iter().collect()),
            ];
            let config = ProptestConfig {
                cases: cases(),
                failure_persistence: None,
                ..ProptestConfig::default()
            };
            proptest!(config, |(chosen in prop::collection::vec(line, 0..24))| {
                let text = chosen.join("\n");
                if let Ok(policy) = Policy::parse(&text, &off_limits) {
                    for file in &policy.files {
                        prop_assert!(file.host_path.starts_with(&grant), "{text}");
                    }
                    prop_assert!(!format!("{policy:?}").contains("s3cret"), "{text}");
                }
            });
        }
    }
}
