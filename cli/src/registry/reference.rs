//! Where a plugin lives in a registry: `[oci://]HOST[:PORT]/REPO[:TAG][@sha256:HEX]`.

/// A parsed registry reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// `host` or `host:port`.
    pub registry: String,
    /// `plugins/greeting`.
    pub repository: String,
    /// A tag, when one was given.
    pub tag: Option<String>,
    /// `sha256:HEX`, when one was given: what the pull must find.
    pub digest: Option<String>,
}

/// The longest reference accepted: far longer than any registry allows.
const MAX_REFERENCE: usize = 512;

impl Reference {
    /// Parses `text`.
    ///
    /// # Errors
    /// What is wrong with it, naming the shape it must have.
    pub fn parse(text: &str) -> Result<Reference, String> {
        let shape = "a reference is [oci://]HOST[:PORT]/REPO[:TAG][@sha256:DIGEST]";
        if text.len() > MAX_REFERENCE {
            return Err(format!(
                "the reference is {} bytes long: {shape}",
                text.len()
            ));
        }
        let rest = text.strip_prefix("oci://").unwrap_or(text);
        let (rest, digest) = match rest.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest.to_string())),
            None => (rest, None),
        };
        if let Some(digest) = &digest
            && !is_sha256(digest)
        {
            return Err(format!(
                "{digest:?} is not a digest (sha256: and 64 lowercase hex digits)"
            ));
        }
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| format!("{text:?} names no repository: {shape}"))?;
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) => (repository, Some(tag.to_string())),
            None => (path, None),
        };
        let name_ok = |s: &str| {
            !s.is_empty()
                && s.split('/').all(|part| {
                    !part.is_empty()
                        && part.bytes().all(|b| {
                            b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)
                        })
                })
        };
        if registry.is_empty() || registry.contains(['@', ' ']) {
            return Err(format!("{text:?}: no registry host: {shape}"));
        }
        if !name_ok(repository) {
            return Err(format!(
                "{repository:?} is not a repository name (lowercase letters, digits, . _ - and /)"
            ));
        }
        if let Some(tag) = &tag
            && (tag.is_empty()
                || tag.len() > 128
                || !tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)))
        {
            return Err(format!(
                "{tag:?} is not a tag (letters, digits, . _ -; up to 128)"
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!("{text:?} names no tag or digest: {shape}"));
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// What the manifest is fetched by: the digest when given, else the tag.
    pub fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            // Parsing requires one of them.
            .unwrap_or_default()
    }

    /// Whether the registry is this machine, spoken to over plain HTTP (as
    /// Docker does for `localhost`).
    pub fn is_loopback(&self) -> bool {
        let host = match self.registry.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => self.registry.as_str(),
        };
        host == "localhost" || host == "127.0.0.1" || host == "[::1]"
    }

    /// The reference pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}/{}@{digest}", self.registry, self.repository)
    }
}

/// Whether `text` is `sha256:` and 64 lowercase hex digits.
pub fn is_sha256(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_as_registries_write_them() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse("oci://localhost:5000/plugins/greeting:v1").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("localhost:5000", "plugins/greeting", Some("v1"))
        );
        assert!(r.is_loopback());
        let pinned = Reference::parse(&format!("ghcr.io/acme/greeting@{digest}")).unwrap();
        assert_eq!(pinned.manifest_ref(), digest);
        assert!(!pinned.is_loopback());
        for wrong in [
            "greeting",
            "localhost:5000/Greeting:v1",
            "localhost:5000/greeting",
            "localhost:5000/greeting@sha256:xyz",
            "localhost:5000/greeting:bad tag",
            "/greeting:v1",
        ] {
            assert!(Reference::parse(wrong).is_err(), "{wrong}");
        }
    }
}
