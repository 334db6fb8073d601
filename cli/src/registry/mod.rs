//! `beehive plugins push FILE REF` and `beehive plugins pull REF`: plugins
//! as OCI artifacts, in the CNCF layout for Wasm (a config of media type
//! `application/vnd.wasm.config.v0+json` and one `application/wasm`
//! layer), each with its minisign signature stored beside it as an
//! artifact of its own, tagged `sha256-HEX.minisig` after the plugin's
//! manifest digest.
//!
//! The distribution protocol's few calls are written here over hyper
//! (already in the tree): `oci-client` would add 44 crates to a fresh
//! build, aws-lc-sys (a C library) among them, against a test command
//! within its 15 minutes by under a minute.
//!
//! The adversary is the registry: a pull checks the manifest against the
//! digest asked for, the layer against the manifest's digest and size,
//! the signature the same way, and all of it against the plugin
//! directory's trust before a byte is written; each body is capped before
//! it is read; nothing partial is left (files are written under hidden
//! names and renamed, signature first).

mod reference;

use std::path::{Path, PathBuf};

use beehive::plugin::{MAX_PLUGIN_BYTES, Policy, TRUST_FILE, Trust, signature_of};
use serde_json::json;
use sha2::{Digest, Sha256};

pub use reference::Reference;
use reference::is_sha256;

use crate::failure::{Code, Failure};
use crate::http_client::{self, Answer, Request};

/// How long one registry call may take, from connecting to the body's end,
/// unless `plugins pull --timeout` says otherwise.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The config media type of a Wasm artifact (the CNCF TAG Runtime's layout).
const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// A Wasm component's layer.
const WASM_LAYER: &str = "application/wasm";
/// An OCI image manifest.
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The empty config of the signature's artifact.
const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
/// A minisign signature's layer.
const SIGNATURE_LAYER: &str = "application/vnd.beehive.minisign.signature";

/// The most bytes a manifest or config may have.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// The most bytes a signature may have.
const MAX_SIGNATURE_BYTES: u64 = 4096;

/// Where a registry call went wrong, as a failure of the command.
fn failed(message: impl Into<String>) -> Failure {
    Failure::new(Code::Unreachable, message.into())
}

fn refused(message: impl Into<String>) -> Failure {
    Failure::new(Code::Invalid, message.into())
}

fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// Credentials for the registry: `BEEHIVE_REGISTRY_AUTH=USER:PASSWORD`, sent
/// as HTTP basic auth. Never printed.
fn authorization() -> Option<String> {
    let credentials = std::env::var("BEEHIVE_REGISTRY_AUTH").ok()?;
    Some(format!("Basic {}", base64(credentials.as_bytes())))
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A registry of one reference, spoken to one request at a time.
struct Registry<'a> {
    reference: &'a Reference,
    /// How long each call may take.
    timeout: std::time::Duration,
}

impl Registry<'_> {
    async fn call(
        &self,
        method: hyper::Method,
        target: String,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        cap: u64,
    ) -> Result<Answer, Failure> {
        let mut headers = headers;
        if let Some(auth) = authorization() {
            headers.push(("authorization", auth));
        }
        http_client::send(Request {
            method,
            target,
            headers,
            body,
            cap,
            authority: &self.reference.registry,
            plain: self.reference.is_loopback(),
            timeout: self.timeout,
        })
        .await
        .map_err(failed)
    }

    fn repo(&self) -> &str {
        &self.reference.repository
    }

    /// Uploads `bytes` as a blob unless the registry has it; its digest.
    async fn put_blob(&self, bytes: &[u8]) -> Result<String, Failure> {
        let digest = sha256(bytes);
        let target = format!("/v2/{}/blobs/{digest}", self.repo());
        let held = self
            .call(hyper::Method::HEAD, target, Vec::new(), Vec::new(), 0)
            .await?;
        if held.status == 200 {
            return Ok(digest);
        }
        let started = self
            .call(
                hyper::Method::POST,
                format!("/v2/{}/blobs/uploads/", self.repo()),
                Vec::new(),
                Vec::new(),
                MAX_MANIFEST_BYTES,
            )
            .await?;
        let location = match (started.status, started.header("location")) {
            (202, Some(location)) => location.to_string(),
            (status, _) => return Err(answered("starting an upload", &started, status)),
        };
        let target = upload_target(&location, &digest, &self.reference.registry)?;
        let headers = vec![
            ("content-type", "application/octet-stream".to_string()),
            ("content-length", bytes.len().to_string()),
        ];
        let done = self
            .call(
                hyper::Method::PUT,
                target,
                headers,
                bytes.to_vec(),
                MAX_MANIFEST_BYTES,
            )
            .await?;
        match done.status {
            201 => Ok(digest),
            status => Err(answered("uploading a blob", &done, status)),
        }
    }

    /// Puts `manifest` under `reference` (a tag or digest); its digest.
    async fn put_manifest(&self, manifest: &[u8], reference: &str) -> Result<String, Failure> {
        let answer = self
            .call(
                hyper::Method::PUT,
                format!("/v2/{}/manifests/{reference}", self.repo()),
                vec![("content-type", MANIFEST.to_string())],
                manifest.to_vec(),
                MAX_MANIFEST_BYTES,
            )
            .await?;
        match answer.status {
            201 => Ok(sha256(manifest)),
            status => Err(answered("putting the manifest", &answer, status)),
        }
    }

    /// The manifest under `reference` and its digest (as computed here);
    /// `None` when the registry has none.
    async fn manifest(
        &self,
        reference: &str,
    ) -> Result<Option<(serde_json::Value, String)>, Failure> {
        let answer = self
            .call(
                hyper::Method::GET,
                format!("/v2/{}/manifests/{reference}", self.repo()),
                vec![("accept", MANIFEST.to_string())],
                Vec::new(),
                MAX_MANIFEST_BYTES,
            )
            .await?;
        match answer.status {
            200 => {}
            404 => return Ok(None),
            status => return Err(answered("reading the manifest", &answer, status)),
        }
        let digest = sha256(&answer.body);
        let manifest = serde_json::from_slice(&answer.body)
            .map_err(|e| refused(format!("the manifest of {reference} is not JSON: {e}")))?;
        Ok(Some((manifest, digest)))
    }

    /// The blob `descriptor` names, checked against its size and digest,
    /// at most `cap` bytes.
    async fn blob(&self, descriptor: &serde_json::Value, cap: u64) -> Result<Vec<u8>, Failure> {
        let digest = descriptor["digest"].as_str().unwrap_or_default();
        let size = descriptor["size"].as_u64().unwrap_or(u64::MAX);
        if !is_sha256(digest) {
            return Err(refused(format!(
                "a layer's digest {digest:?} is not sha256"
            )));
        }
        if size > cap {
            return Err(refused(format!(
                "a layer of {size} bytes: more than the {cap} a plugin may be; nothing was fetched"
            )));
        }
        let answer = self
            .call(
                hyper::Method::GET,
                format!("/v2/{}/blobs/{digest}", self.repo()),
                Vec::new(),
                Vec::new(),
                size,
            )
            .await?;
        if answer.status != 200 {
            return Err(answered("reading a layer", &answer, answer.status));
        }
        if answer.body.len() as u64 != size || sha256(&answer.body) != digest {
            return Err(refused(format!(
                "the registry served other bytes for {digest}: refused, nothing written"
            )));
        }
        Ok(answer.body)
    }
}

/// A registry's refusal, in words.
fn answered(doing: &str, answer: &Answer, status: u16) -> Failure {
    let text = String::from_utf8_lossy(&answer.body);
    let text: String = text.chars().take(300).collect();
    let message = format!("{doing}: the registry answered {status}: {}", text.trim());
    match status {
        401 | 403 => refused(format!(
            "{message} (credentials go in BEEHIVE_REGISTRY_AUTH=USER:PASSWORD)"
        )),
        _ => failed(message),
    }
}

/// Where an upload's bytes go: the registry's `Location`, on the same
/// registry, with the digest added.
fn upload_target(location: &str, digest: &str, registry: &str) -> Result<String, Failure> {
    let path = match location.split_once("://") {
        Some((_, rest)) => {
            let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
            if host != registry {
                return Err(refused(format!(
                    "the registry sent the upload to {host}: uploads stay on {registry}"
                )));
            }
            format!("/{path}")
        }
        None => location.to_string(),
    };
    let joiner = if path.contains('?') { '&' } else { '?' };
    Ok(format!("{path}{joiner}digest={digest}"))
}

/// The tag a plugin manifest's signature is stored under.
fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.minisig", manifest_digest.replace(':', "-"))
}

/// A manifest of `config` (of `config_type`) and one layer.
fn manifest_of(config: (&str, &[u8]), layer: (&str, &[u8])) -> Vec<u8> {
    let descriptor = |media_type: &str, bytes: &[u8]| json!({"mediaType": media_type, "digest": sha256(bytes), "size": bytes.len()});
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": descriptor(config.0, config.1),
        "layers": [descriptor(layer.0, layer.1)],
    });
    manifest.to_string().into_bytes()
}

/// `plugins push FILE REF`: the plugin, and its signature when one is
/// beside it.
pub async fn push(file: &Path, reference: &str) -> Result<String, Failure> {
    let reference = Reference::parse(reference).map_err(Failure::usage)?;
    let Some(tag) = reference.tag.clone() else {
        return Err(Failure::usage("push names a tag: HOST/REPO:TAG"));
    };
    let wasm = crate::plugin_check::read(file)
        .map_err(|why| refused(format!("{}: {why}", file.display())))?;
    let signature = match std::fs::read(signature_of(file)) {
        Ok(text) if text.len() as u64 <= MAX_SIGNATURE_BYTES => Some(text),
        Ok(_) => return Err(refused("the signature beside the file is over 4 KiB")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(refused(format!("its signature: {e}"))),
    };
    let registry = Registry {
        reference: &reference,
        timeout: REQUEST_TIMEOUT,
    };
    let config = json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [sha256(&wasm)],
    })
    .to_string()
    .into_bytes();
    registry.put_blob(&config).await?;
    registry.put_blob(&wasm).await?;
    let manifest = manifest_of((WASM_CONFIG, &config), (WASM_LAYER, &wasm));
    let digest = registry.put_manifest(&manifest, &tag).await?;
    let signed = match signature {
        Some(text) => {
            let empty = b"{}";
            registry.put_blob(empty).await?;
            registry.put_blob(&text).await?;
            let signature_manifest = manifest_of((EMPTY_CONFIG, empty), (SIGNATURE_LAYER, &text));
            registry
                .put_manifest(&signature_manifest, &signature_tag(&digest))
                .await?;
            "with its signature"
        }
        None => "unsigned (no .minisig beside it)",
    };
    Ok(format!(
        "pushed {} ({:.1} MB) {signed}\n{}\n",
        file.display(),
        wasm.len() as f64 / 1e6,
        reference.pinned(&digest)
    ))
}

/// `plugins pull REF -o FILE`: the plugin and its signature, checked
/// against the digest asked for and against the trust of the directory
/// they go into, then written there.
pub async fn pull(
    reference: &str,
    output: Option<&Path>,
    timeout: std::time::Duration,
) -> Result<String, Failure> {
    let reference = Reference::parse(reference).map_err(Failure::usage)?;
    let output = match output {
        Some(output) => output.to_path_buf(),
        None => PathBuf::from(format!(
            "{}.wasm",
            reference.repository.rsplit('/').next().unwrap_or("plugin")
        )),
    };
    let registry = Registry {
        reference: &reference,
        timeout,
    };
    let (manifest, digest) = registry
        .manifest(reference.manifest_ref())
        .await?
        .ok_or_else(|| {
            refused(format!(
                "{} has no {}",
                reference.repository,
                reference.manifest_ref()
            ))
        })?;
    if let Some(wanted) = &reference.digest
        && *wanted != digest
    {
        return Err(refused(format!(
            "the registry served a manifest of digest {digest} for {wanted}: refused"
        )));
    }
    if manifest["config"]["mediaType"] != WASM_CONFIG {
        return Err(refused(format!(
            "{} is not a Wasm artifact (its config is {})",
            reference.manifest_ref(),
            manifest["config"]["mediaType"]
        )));
    }
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    let [layer] = layers.as_slice() else {
        return Err(refused("a plugin artifact has exactly one layer"));
    };
    if layer["mediaType"] != WASM_LAYER {
        return Err(refused(format!(
            "its layer is {}, not {WASM_LAYER}",
            layer["mediaType"]
        )));
    }
    let wasm = registry.blob(layer, MAX_PLUGIN_BYTES).await?;
    let signature = match registry.manifest(&signature_tag(&digest)).await? {
        None => None,
        Some((signature_manifest, _)) => {
            let layers = signature_manifest["layers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let [layer] = layers.as_slice() else {
                return Err(refused("the signature artifact has more than one layer"));
            };
            Some(registry.blob(layer, MAX_SIGNATURE_BYTES).await?)
        }
    };
    let signer = verify_for(&output, &wasm, signature.as_deref())?;
    write_plugin(&output, &wasm, signature.as_deref())?;
    Ok(format!(
        "pulled {} into {} ({:.1} MB, {signer})\n",
        reference.pinned(&digest),
        output.display(),
        wasm.len() as f64 / 1e6
    ))
}

/// What the trust of the directory `output` goes into makes of the pulled
/// bytes; refused there, nothing is written.
fn verify_for(output: &Path, wasm: &[u8], signature: Option<&[u8]>) -> Result<String, Failure> {
    let dir = output.parent().map(Path::to_path_buf).unwrap_or_default();
    let trust = Trust::of_directory(&dir)
        .map_err(|why| refused(format!("the trust file is wrong: {why}")))?;
    let Some(trust) = trust else {
        return Ok(match signature {
            Some(_) => format!(
                "signature not checked: no {TRUST_FILE} in {}",
                dir.display()
            ),
            None => "unsigned".to_string(),
        });
    };
    let Some(signature) = signature else {
        return Err(refused(format!(
            "refused, nothing written: not signed (the registry holds no signature for it, \
             and {} trusts only signed plugins)",
            dir.display()
        )));
    };
    let signature = std::str::from_utf8(signature)
        .map_err(|_| refused("refused, nothing written: the signature is not text"))?;
    // The plugin's own policy may narrow the keys, as the host reads it; a
    // policy the host would refuse is refused here, never read as none.
    let policy_file = Policy::file_of(output);
    let policy = Policy::read(&policy_file, &[]).map_err(|why| {
        refused(format!(
            "refused, nothing written: {why} (fix {}, which the host would refuse too)",
            policy_file.display()
        ))
    })?;
    let signer = trust
        .verify_text(output, wasm, signature, &policy.trust)
        .map_err(|why| refused(format!("refused, nothing written: {why}")))?;
    Ok(format!("signed by {signer}"))
}

/// Writes the signature, then the plugin, each under a hidden name renamed
/// into place: a host watching the directory never loads half of either.
fn write_plugin(output: &Path, wasm: &[u8], signature: Option<&[u8]>) -> Result<(), Failure> {
    let hidden = |path: &Path| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        path.with_file_name(format!(".{name}.pulling"))
    };
    let place = |path: &Path, bytes: &[u8]| -> Result<(), Failure> {
        let staging = hidden(path);
        std::fs::write(&staging, bytes)
            .and_then(|()| std::fs::rename(&staging, path))
            .map_err(|e| failed(format!("{}: {e}", path.display())))
    };
    match signature {
        Some(signature) => place(&signature_of(output), signature)?,
        None => {
            let _ = std::fs::remove_file(signature_of(output));
        }
    }
    place(output, wasm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_alphabet() {
        assert_eq!(base64(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
    }

    #[test]
    fn an_upload_stays_on_its_registry() {
        let digest = format!("sha256:{}", "0".repeat(64));
        assert_eq!(
            upload_target("/v2/p/blobs/uploads/x?_state=1", &digest, "localhost:5000").unwrap(),
            format!("/v2/p/blobs/uploads/x?_state=1&digest={digest}")
        );
        assert_eq!(
            upload_target(
                "http://localhost:5000/v2/p/blobs/uploads/x",
                &digest,
                "localhost:5000"
            )
            .unwrap(),
            format!("/v2/p/blobs/uploads/x?digest={digest}")
        );
        assert!(upload_target("http://evil.example/x", &digest, "localhost:5000").is_err());
    }

    #[test]
    fn a_signature_is_tagged_after_its_plugin() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.minisig", "ab".repeat(32))
        );
    }
}
