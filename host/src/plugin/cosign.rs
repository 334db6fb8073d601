//! Key-based cosign signatures (`cosign sign-blob --key`): an ECDSA P-256
//! public key as PEM (SubjectPublicKeyInfo), and a signature file holding
//! the base64 of an ASN.1 DER signature over the SHA-256 of the file.
//! Checked with ring, which the tree already builds for TLS.

use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use sha2::{Digest, Sha256};

/// The DER header of a P-256 SubjectPublicKeyInfo, before its 65-byte
/// uncompressed point: `id-ecPublicKey` with `prime256v1`.
const P256_SPKI_HEADER: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A trusted cosign key: its point, and an id to show.
#[derive(Clone, Debug)]
pub(crate) struct CosignKey {
    point: Vec<u8>,
    /// The first 16 hex digits of the SHA-256 of the key's DER.
    pub(crate) id: String,
}

impl CosignKey {
    /// A PEM public key (`-----BEGIN PUBLIC KEY-----`, as `cosign
    /// generate-key-pair` writes `cosign.pub`).
    ///
    /// # Errors
    /// Why it is not an ECDSA P-256 public key.
    pub(crate) fn from_pem(pem: &str) -> Result<CosignKey, String> {
        let body: String = pem
            .lines()
            .map(str::trim)
            .filter(|line| !line.starts_with("-----") && !line.is_empty())
            .collect();
        if !pem.contains("-----BEGIN PUBLIC KEY-----") {
            return Err("not a PEM public key (-----BEGIN PUBLIC KEY-----)".into());
        }
        let der = super::trust::decode_base64(&body).ok_or("its PEM body is not base64")?;
        match der.strip_prefix(&P256_SPKI_HEADER[..]) {
            Some(point) if point.len() == 65 && point[0] == 4 => {
                let id: String = Sha256::digest(&der)
                    .iter()
                    .take(8)
                    .map(|b| format!("{b:02X}"))
                    .collect();
                Ok(CosignKey {
                    point: point.to_vec(),
                    id,
                })
            }
            _ => Err("not an ECDSA P-256 public key, the kind cosign makes".into()),
        }
    }

    /// Whether `signature` (the signature file's text) is this key's over
    /// `bytes`.
    pub(crate) fn verifies(&self, bytes: &[u8], signature: &str) -> Result<bool, String> {
        let der = super::trust::decode_base64(signature.trim())
            .ok_or("the signature file is not base64 (cosign sign-blob writes base64)")?;
        Ok(UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(bytes, &der)
            .is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 key pair openssl made, and its signature of
    /// `b"plugin bytes\n"` (`openssl dgst -sha256 -sign`, base64): the
    /// format key-based cosign writes.
    const PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEyrSf56Uk8HKr7aOS7YMX15X+smL3
iaGJps1DiJZZKpbHpOTrrblfGTxZPLB/9a21a1bv4VaTOeeu51ab0CRtpQ==
-----END PUBLIC KEY-----
";
    const SIGNATURE: &str = "MEUCICVkIrOPK1F3TrvsCmfSL91o5tj4hCL+dfAJB9vb6d9zAiEA6vbX5i7bYUV7+JbnOqBR1i+ZtrqZkPRobjlHqqXKSm8=";

    #[test]
    fn a_p256_signature_verifies_over_its_bytes_only() {
        let key = CosignKey::from_pem(PUBLIC).unwrap();
        assert_eq!(key.id.len(), 16);
        assert!(key.verifies(b"plugin bytes\n", SIGNATURE).unwrap());
        assert!(!key.verifies(b"plugin bytez\n", SIGNATURE).unwrap());
        assert!(key.verifies(b"plugin bytes\n", "not base64!").is_err());
    }

    #[test]
    fn only_p256_pem_keys_are_keys() {
        assert!(CosignKey::from_pem("RWTdxVUOSm8u").is_err());
        let truncated = PUBLIC.replace(
            "iaGJps1DiJZZKpbHpOTrrblfGTxZPLB/9a21a1bv4VaTOeeu51ab0CRtpQ==\n",
            "",
        );
        assert!(CosignKey::from_pem(&truncated).is_err());
    }
}
