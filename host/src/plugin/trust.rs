//! Whose code runs: the keys a plugin directory trusts, and the check of a
//! plugin file's signature against them before anything compiles it.
//!
//! The operator names trust in `trust.toml` in the plugin directory:
//!
//! ```toml
//! [[key]]
//! name = "release"                                  # how logs and `beehive plugins` name it
//! minisign = "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3"   # the key line of minisign.pub
//! ```
//!
//! With such a file, every plugin must carry a detached signature beside
//! it, made over the exact file by one of those keys (a plugin's policy may
//! narrow them, `[trust] keys = [...]`): `NAME.wasm.minisig` for a minisign
//! key (`minisign -S -m NAME.wasm`), or `NAME.wasm.sig` for an ECDSA P-256
//! key given as `cosign = """-----BEGIN PUBLIC KEY-----..."""`
//! (`cosign sign-blob --key cosign.key NAME.wasm --output-signature
//! NAME.wasm.sig`). Without a trust file, plugins load unsigned, as before.
//!
//! The adversary can write into the plugin directory but holds no trusted
//! key. So the signature file is read with a size cap, never through a
//! symlink, never a FIFO; the signature must verify over the bytes the host
//! read (the ones it then compiles), its trusted comment included; and a
//! validly signed build older than the one serving (by the timestamp in its
//! trusted comment) is a rollback the operator must allow. Verification
//! makes no network call.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::operator_file;
use crate::plugin::TrustOverride;
use crate::plugin::cosign::CosignKey;

/// The trust file's name in a plugin directory.
pub const TRUST_FILE: &str = "trust.toml";

/// The most bytes a trust file may hold.
const MAX_TRUST_BYTES: u64 = 64 * 1024;

/// The most bytes a signature file may hold: minisign's are about 300.
const MAX_SIGNATURE_BYTES: u64 = 4096;

/// The most keys one trust file may name.
const MAX_KEYS: usize = 64;

/// The keys a plugin directory trusts.
#[derive(Clone, Debug)]
pub struct Trust {
    keys: Vec<TrustedKey>,
}

#[derive(Clone, Debug)]
struct TrustedKey {
    name: String,
    id: String,
    key: Key,
}

/// A trusted key, of either signer.
#[derive(Clone, Debug)]
enum Key {
    Minisign(minisign_verify::PublicKey),
    Cosign(CosignKey),
}

/// Who signed a plugin file, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signer {
    /// The trusted key's name, as the trust file gives it.
    pub key: String,
    /// The key's id: as minisign prints it (16 hex digits), or the first
    /// 16 hex digits of a cosign key's SHA-256.
    pub key_id: String,
    /// When it was signed (Unix seconds), from the signature's trusted
    /// comment, if it says.
    pub signed_at: Option<u64>,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.key, self.key_id)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    #[serde(default)]
    key: Vec<KeyEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    name: String,
    minisign: Option<String>,
    cosign: Option<String>,
}

impl Trust {
    /// The trust file of the plugin directory `dir`, or `None` when it has
    /// none (plugins then load unsigned).
    ///
    /// # Errors
    /// Why the file cannot be used, in one line naming it: unreadable, not
    /// TOML of this shape, a key that does not decode, no key at all.
    pub fn of_directory(dir: &Path) -> Result<Option<Trust>, String> {
        let path = dir.join(TRUST_FILE);
        let text = match operator_file::read_text(&path, MAX_TRUST_BYTES) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
        };
        Trust::parse(&text)
            .map(Some)
            .map_err(|why| format!("{}: {why}", path.display()))
    }

    /// A trust file's text.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<Trust, String> {
        let file: TrustFile = toml::from_str(text).map_err(|e| e.message().to_string())?;
        if file.key.is_empty() {
            return Err("names no [[key]]: list the keys plugins may be signed by".into());
        }
        if file.key.len() > MAX_KEYS {
            return Err(format!("{} keys; at most {MAX_KEYS}", file.key.len()));
        }
        let mut keys: Vec<TrustedKey> = Vec::new();
        for entry in file.key {
            if keys.iter().any(|k| k.name == entry.name) {
                return Err(format!("the key name {:?} is given twice", entry.name));
            }
            let (id, key) = match (&entry.minisign, &entry.cosign) {
                (Some(line), None) => {
                    let line = line.trim();
                    let key = minisign_verify::PublicKey::from_base64(line).map_err(|_| {
                        format!(
                            "key {:?}: not a minisign public key (give the second line of \
                             minisign.pub, which starts with RW)",
                            entry.name
                        )
                    })?;
                    (key_id(line).unwrap_or_default(), Key::Minisign(key))
                }
                (None, Some(pem)) => {
                    let key = CosignKey::from_pem(pem)
                        .map_err(|why| format!("key {:?}: {why}", entry.name))?;
                    (key.id.clone(), Key::Cosign(key))
                }
                _ => {
                    return Err(format!(
                        "key {:?}: give either minisign = \"RW...\" or cosign = \"\"\"-----BEGIN \
                         PUBLIC KEY-----...\"\"\"",
                        entry.name
                    ));
                }
            };
            keys.push(TrustedKey {
                id,
                name: entry.name,
                key,
            });
        }
        Ok(Trust { keys })
    }

    /// The names of the keys it trusts.
    pub fn key_names(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.name.as_str()).collect()
    }

    /// Checks the signature beside `plugin` over `bytes` (the plugin's
    /// content, as read), by a key the trust file names and `narrowed`
    /// allows.
    ///
    /// # Errors
    /// Why the file may not run, in words that name the fix.
    pub fn verify(
        &self,
        plugin: &Path,
        bytes: &[u8],
        narrowed: &TrustOverride,
    ) -> Result<Signer, String> {
        let allowed = self.allowed(narrowed)?;
        let cosign = cosign_signature_of(plugin);
        // A minisign signature when there is one (a symlink counts, to be
        // refused), else a cosign one; with neither, minisign's name is the
        // one the refusal shows.
        let minisign = signature_of(plugin);
        if std::fs::symlink_metadata(&minisign).is_err()
            && std::fs::symlink_metadata(&cosign).is_ok()
        {
            let text = read_signature(&cosign)?;
            return check_cosign(plugin, bytes, &text, &allowed);
        }
        let text = read_signature(&minisign)?;
        self.check(plugin, bytes, &text, &allowed)
    }

    /// [`Trust::verify`] of a signature in hand (`text`, a `.minisig`
    /// file's content), as a pull checks one before writing anything.
    ///
    /// # Errors
    /// As [`Trust::verify`].
    pub fn verify_text(
        &self,
        plugin: &Path,
        bytes: &[u8],
        text: &str,
        narrowed: &TrustOverride,
    ) -> Result<Signer, String> {
        let allowed = self.allowed(narrowed)?;
        self.check(plugin, bytes, text, &allowed)
    }

    /// The keys `narrowed` leaves, or why none is.
    fn allowed(&self, narrowed: &TrustOverride) -> Result<Vec<&TrustedKey>, String> {
        let allowed: Vec<&TrustedKey> = self
            .keys
            .iter()
            .filter(|k| {
                narrowed
                    .keys
                    .as_ref()
                    .is_none_or(|names| names.contains(&k.name))
            })
            .collect();
        match allowed.is_empty() {
            true => Err(
                "its policy's [trust] keys name none of the trust file's keys: no signature \
                 could be accepted"
                    .into(),
            ),
            false => Ok(allowed),
        }
    }

    /// `text`, a signature of `plugin`'s `bytes`, checked against `allowed`.
    fn check(
        &self,
        plugin: &Path,
        bytes: &[u8],
        text: &str,
        allowed: &[&TrustedKey],
    ) -> Result<Signer, String> {
        let signature = minisign_verify::Signature::decode(text).map_err(|_| {
            format!(
                "{} is not a minisign signature",
                signature_of(plugin).display()
            )
        })?;
        let mut wrong_key = true;
        for trusted in allowed {
            let Key::Minisign(key) = &trusted.key else {
                continue;
            };
            match key.verify(bytes, &signature, false) {
                Ok(()) => {
                    return Ok(Signer {
                        key: trusted.name.clone(),
                        key_id: trusted.id.clone(),
                        signed_at: signed_at(signature.trusted_comment()),
                    });
                }
                Err(minisign_verify::Error::UnexpectedKeyId) => {}
                Err(minisign_verify::Error::UnexpectedAlgorithm) => {
                    return Err(
                        "signed in minisign's legacy mode (-l): sign it again with a minisign \
                         of 0.8 or later, without -l"
                            .into(),
                    );
                }
                Err(_) => wrong_key = false,
            }
        }
        Err(match wrong_key {
            true => format!(
                "signed by a key this directory does not trust{}: sign it with one of {}",
                signature_key_id(text)
                    .map(|id| format!(" ({id})"))
                    .unwrap_or_default(),
                allowed
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            false => format!(
                "the signature does not match the file: it was made over other bytes, or the \
                 file or its trusted comment was changed since; sign this file again \
                 (minisign -S -m {})",
                plugin.file_name().unwrap_or_default().to_string_lossy()
            ),
        })
    }
}

/// A cosign signature of `plugin`'s `bytes`, by one of the `allowed` keys.
fn check_cosign(
    plugin: &Path,
    bytes: &[u8],
    text: &str,
    allowed: &[&TrustedKey],
) -> Result<Signer, String> {
    let cosign_keys: Vec<(&TrustedKey, &CosignKey)> = allowed
        .iter()
        .filter_map(|trusted| match &trusted.key {
            Key::Cosign(key) => Some((*trusted, key)),
            Key::Minisign(_) => None,
        })
        .collect();
    if cosign_keys.is_empty() {
        return Err(format!(
            "{} is a cosign signature, and no cosign key may sign it here",
            cosign_signature_of(plugin).display()
        ));
    }
    for (trusted, key) in cosign_keys {
        if key.verifies(bytes, text)? {
            return Ok(Signer {
                key: trusted.name.clone(),
                key_id: trusted.id.clone(),
                // cosign signs no time: only a minisign build is ordered.
                signed_at: None,
            });
        }
    }
    // ECDSA cannot tell another key from other bytes.
    Err(format!(
        "the cosign signature verifies with no trusted key: made by another key, or over \
         other bytes; sign this file again (cosign sign-blob --key cosign.key {0} \
         --output-signature {0}.sig)",
        plugin.file_name().unwrap_or_default().to_string_lossy()
    ))
}

/// A cosign signature of `plugin`: `NAME.wasm.sig` beside it.
pub fn cosign_signature_of(plugin: &Path) -> PathBuf {
    let mut name = plugin.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// The detached signature of `plugin`: `NAME.wasm.minisig` beside it.
pub fn signature_of(plugin: &Path) -> PathBuf {
    let mut name = plugin.as_os_str().to_owned();
    name.push(".minisig");
    PathBuf::from(name)
}

/// A signature file's text: a regular file, not through a symlink, at most
/// [`MAX_SIGNATURE_BYTES`].
fn read_signature(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Never through a symlink, and a FIFO must not block the open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "not signed: {shown} is missing (this directory has a trust file, so every \
                 plugin must be signed: minisign -S -m {})",
                path.with_extension("")
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
            ),
            _ if e.raw_os_error() == Some(libc::ELOOP) => {
                format!("{shown} is a symlink: a signature must be a file of its own")
            }
            _ => format!("{shown}: cannot read: {e}"),
        })?;
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    if meta.len() > MAX_SIGNATURE_BYTES {
        return Err(format!(
            "{shown} holds {} bytes; a signature is at most {MAX_SIGNATURE_BYTES}",
            meta.len()
        ));
    }
    let mut text = String::new();
    file.take(MAX_SIGNATURE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|_| format!("{shown} is not a minisign signature (not text)"))?;
    if text.len() as u64 > MAX_SIGNATURE_BYTES {
        return Err(format!("{shown} grew while it was read"));
    }
    Ok(text)
}

/// The time a trusted comment states (`timestamp:1700000000\t...`, as
/// minisign writes by default).
fn signed_at(trusted_comment: &str) -> Option<u64> {
    let comment = trusted_comment
        .strip_prefix("trusted comment: ")
        .unwrap_or(trusted_comment);
    comment
        .split('\t')
        .find_map(|field| field.strip_prefix("timestamp:"))
        .and_then(|seconds| seconds.trim().parse().ok())
}

/// A key id as minisign prints it: the 8 bytes after the algorithm, as one
/// little-endian number in hex.
fn key_id(base64_key: &str) -> Option<String> {
    let bytes = decode_base64(base64_key)?;
    let id: [u8; 8] = bytes.get(2..10)?.try_into().ok()?;
    Some(format!("{:016X}", u64::from_le_bytes(id)))
}

/// The key id a signature file names (its second line).
fn signature_key_id(text: &str) -> Option<String> {
    key_id(text.lines().nth(1)?.trim())
}

/// Standard base64 (minisign's crate keeps its decoder private; cosign's
/// keys and signatures are base64 too).
pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut held = 0;
    let mut out = Vec::new();
    for byte in text.bytes().take_while(|&b| b != b'=') {
        let value = ALPHABET.iter().position(|&a| a == byte)? as u32;
        bits = (bits << 6) | value;
        held += 6;
        if held >= 8 {
            held -= 8;
            out.push((bits >> held) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A public key minisign 0.11 made (`minisign -G -W`), key id
    /// FD2E6F4A0E55C5DD, and its signature of `b"plugin bytes\n"`
    /// (`minisign -S -m p.bin`): the format as a real signer writes it.
    const PUBLIC: &str = "RWTdxVUOSm8u/VlRR4V3pE73MvQN93SitXnUhiZeuHPG2CpmYqvpD2Qo";
    const SIGNATURE: &str = "untrusted comment: signature from minisign secret key
RUTdxVUOSm8u/SA40ckNIQ1wpXmiso/wzgpInsLj/XIUa94otTT+++/wzaLanp2o1dSczhFXsd7dtE/So+aBXiThUSgfy4Hy9Q0=
trusted comment: timestamp:1796665578\tfile:p.bin\thashed
1Slf+Qdn+G/7bwuUJlHTZzH9aK3N8rpqGRkT9BGNNSOOnfhpyFJ9NZrLFeQGTcN818K+lG1W+hgERVHWdyERAw==
";

    #[test]
    fn a_real_signature_verifies_and_one_flipped_byte_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::parse(&format!(
            "[[key]]\nname = \"release\"\nminisign = \"{PUBLIC}\"\n"
        ))
        .unwrap();
        let plugin = dir.path().join("p.wasm");
        std::fs::write(signature_of(&plugin), SIGNATURE).unwrap();
        let signer = trust
            .verify(&plugin, b"plugin bytes\n", &TrustOverride::default())
            .unwrap();
        assert_eq!(
            signer,
            Signer {
                key: "release".into(),
                key_id: "FD2E6F4A0E55C5DD".into(),
                signed_at: Some(1_796_665_578),
            }
        );
        let flipped = trust
            .verify(&plugin, b"plugin bytez\n", &TrustOverride::default())
            .unwrap_err();
        assert!(flipped.contains("does not match the file"), "{flipped}");
        let forged = SIGNATURE.replace("timestamp:1796665578", "timestamp:1896665578");
        std::fs::write(signature_of(&plugin), forged).unwrap();
        let moved = trust
            .verify(&plugin, b"plugin bytes\n", &TrustOverride::default())
            .unwrap_err();
        assert!(moved.contains("trusted comment"), "{moved}");
    }

    #[test]
    fn a_trusted_comment_gives_the_signing_time() {
        assert_eq!(
            signed_at("timestamp:1765000000\tfile:greeting.wasm\thashed"),
            Some(1_765_000_000)
        );
        assert_eq!(signed_at("release 3"), None);
    }

    #[test]
    fn key_ids_read_as_minisign_prints_them() {
        assert_eq!(key_id(PUBLIC).unwrap(), "FD2E6F4A0E55C5DD");
        assert_eq!(signature_key_id(SIGNATURE).unwrap(), "FD2E6F4A0E55C5DD");
    }

    #[test]
    fn a_cosign_key_and_signature_are_checked_as_minisign_ones_are() {
        let dir = tempfile::tempdir().unwrap();
        // A P-256 key and its signature of b"plugin bytes\n", made by
        // openssl in key-based cosign's format (see plugin/cosign.rs).
        let pem = "-----BEGIN PUBLIC KEY-----\n\
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEyrSf56Uk8HKr7aOS7YMX15X+smL3\n\
iaGJps1DiJZZKpbHpOTrrblfGTxZPLB/9a21a1bv4VaTOeeu51ab0CRtpQ==\n\
-----END PUBLIC KEY-----\n";
        let trust = Trust::parse(&format!(
            "[[key]]\nname = \"ci\"\ncosign = \"\"\"\n{pem}\"\"\"\n\
             [[key]]\nname = \"release\"\nminisign = \"{PUBLIC}\"\n"
        ))
        .unwrap();
        let plugin = dir.path().join("p.wasm");
        std::fs::write(
            cosign_signature_of(&plugin),
            "MEUCICVkIrOPK1F3TrvsCmfSL91o5tj4hCL+dfAJB9vb6d9zAiEA6vbX5i7bYUV7+JbnOqBR1i+ZtrqZkPRobjlHqqXKSm8=",
        )
        .unwrap();
        let any = TrustOverride::default();
        let signer = trust.verify(&plugin, b"plugin bytes\n", &any).unwrap();
        assert_eq!((signer.key.as_str(), signer.signed_at), ("ci", None));
        let other = trust.verify(&plugin, b"plugin bytez\n", &any).unwrap_err();
        assert!(other.contains("verifies with no trusted key"), "{other}");
        let only_release = TrustOverride {
            keys: Some(vec!["release".into()]),
            allow_rollback: false,
        };
        let narrowed = trust
            .verify(&plugin, b"plugin bytes\n", &only_release)
            .unwrap_err();
        assert!(narrowed.contains("no cosign key may sign it"), "{narrowed}");
        let both = format!("[[key]]\nname = \"x\"\nminisign = \"{PUBLIC}\"\ncosign = \"y\"\n");
        assert!(Trust::parse(&both).unwrap_err().contains("either"));
    }

    #[test]
    fn a_trust_file_is_checked_whole() {
        let good = format!("[[key]]\nname = \"release\"\nminisign = \"{PUBLIC}\"\n");
        assert_eq!(Trust::parse(&good).unwrap().key_names(), ["release"]);
        let twice = format!("{good}{good}");
        assert!(Trust::parse(&twice).unwrap_err().contains("given twice"));
        assert!(Trust::parse("").unwrap_err().contains("names no [[key]]"));
        let garbage = "[[key]]\nname = \"x\"\nminisign = \"not a key\"\n";
        assert!(Trust::parse(garbage).unwrap_err().contains("RW"));
        assert!(Trust::parse("[[key]]\nname = 1\n").is_err());
    }

    #[test]
    fn a_missing_symlinked_or_oversized_signature_is_refused_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::parse(&format!(
            "[[key]]\nname = \"release\"\nminisign = \"{PUBLIC}\"\n"
        ))
        .unwrap();
        let plugin = dir.path().join("p.wasm");
        std::fs::write(&plugin, b"plugin bytes\n").unwrap();
        let any = TrustOverride::default();
        let missing = trust.verify(&plugin, b"plugin bytes\n", &any).unwrap_err();
        assert!(missing.starts_with("not signed"), "{missing}");
        std::fs::write(dir.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), signature_of(&plugin)).unwrap();
        let linked = trust.verify(&plugin, b"plugin bytes\n", &any).unwrap_err();
        assert!(linked.contains("symlink"), "{linked}");
        std::fs::remove_file(signature_of(&plugin)).unwrap();
        std::fs::write(signature_of(&plugin), vec![b'a'; 5000]).unwrap();
        let huge = trust.verify(&plugin, b"plugin bytes\n", &any).unwrap_err();
        assert!(huge.contains("at most 4096"), "{huge}");
        std::fs::write(signature_of(&plugin), "garbage").unwrap();
        let garbage = trust.verify(&plugin, b"plugin bytes\n", &any).unwrap_err();
        assert!(garbage.contains("not a minisign signature"), "{garbage}");
        let narrowed = TrustOverride {
            keys: Some(vec!["other".into()]),
            allow_rollback: false,
        };
        let none = trust
            .verify(&plugin, b"plugin bytes\n", &narrowed)
            .unwrap_err();
        assert!(none.contains("name none"), "{none}");
    }
}
