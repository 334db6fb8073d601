//! TLS to the PostgreSQL server, with libpq's `sslmode` meanings.
//!
//! A server on another machine is reached over TCP, and managed servers
//! insist on TLS. `tokio-postgres` negotiates it (the `SSLRequest`) and hands
//! the handshake to a connector; this one is rustls (already in the tree for
//! plugins' outgoing HTTPS) over the driver's own non-blocking [`Socket`].
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (default) | if the server offers it | not checked |
//! | `require` | always | not checked |
//! | `verify-ca` | always | signed by a trusted root |
//! | `verify-full` | always | signed by a trusted root, and names the host |
//!
//! Trusted roots are the PEM certificates in `sslrootcert=FILE`, or else the
//! Mozilla set (`webpki-roots`). A Unix socket never uses TLS (the server
//! refuses it there), so `prefer` costs nothing on one.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, TlsConnect};

use crate::error::{Error, Result};
use crate::store::backend::postgres::socket::Socket;

/// How much of the server's certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Encrypted, but anyone may answer (`prefer`, `require`).
    Nothing,
    /// Signed by a trusted root (`verify-ca`).
    Chain,
    /// Signed by a trusted root and issued to the host dialled (`verify-full`).
    ChainAndName,
}

/// The TLS settings of a connection string, and the string without the
/// parameters `tokio-postgres` does not know.
#[derive(Clone, Debug)]
pub(crate) struct TlsSettings {
    /// The `sslmode` the URL named, if it named one.
    pub(crate) mode: Option<SslMode>,
    pub(crate) verify: Verify,
    pub(crate) root_cert: Option<PathBuf>,
}

impl TlsSettings {
    /// Takes `sslmode` and `sslrootcert` out of `url`'s query: the URL left
    /// for `tokio-postgres`, and what they asked for. Connection strings in
    /// `key=value` form are left as they are.
    pub(crate) fn split(url: &str) -> Result<(String, TlsSettings)> {
        let mut settings = TlsSettings {
            mode: None,
            verify: Verify::Nothing,
            root_cert: None,
        };
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_string(), settings));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => {
                    let (mode, verify) = parse_mode(value)?;
                    (settings.mode, settings.verify) = (Some(mode), verify);
                }
                "sslrootcert" => {
                    settings.root_cert = Some(PathBuf::from(crate::percent::decoded(value)))
                }
                _ => kept.push(pair),
            }
        }
        let url = match kept.is_empty() {
            true => base.to_string(),
            false => format!("{base}?{}", kept.join("&")),
        };
        Ok((url, settings))
    }

    /// The TLS configuration these settings ask for: built once per store
    /// (reading `sslrootcert`, if named), so a bad root file is refused when
    /// the store opens and no connection reads it again.
    pub(crate) fn client_config(&self) -> Result<Arc<ClientConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(format!("no TLS version to offer: {e}")))?;
        let chain = match self.verify {
            Verify::Nothing => None,
            Verify::Chain | Verify::ChainAndName => Some(
                WebPkiServerVerifier::builder_with_provider(
                    Arc::new(self.roots()?),
                    provider.clone(),
                )
                .build()
                .map_err(|e| tls_error(format!("the trusted roots are unusable: {e}")))?,
            ),
        };
        let verifier = Verifier {
            chain,
            check_name: self.verify == Verify::ChainAndName,
            algorithms: provider.signature_verification_algorithms,
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Arc::new(config))
    }

    fn roots(&self) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        let Some(path) = &self.root_cert else {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            return Ok(roots);
        };
        let certificates = read_certificates(path)?;
        let (added, _ignored) = roots.add_parsable_certificates(certificates);
        if added == 0 {
            return Err(tls_error(format!(
                "sslrootcert {}: no usable certificate in it",
                path.display()
            )));
        }
        Ok(roots)
    }
}

fn parse_mode(value: &str) -> Result<(SslMode, Verify)> {
    Ok(match value {
        "disable" => (SslMode::Disable, Verify::Nothing),
        "prefer" => (SslMode::Prefer, Verify::Nothing),
        "require" => (SslMode::Require, Verify::Nothing),
        "verify-ca" => (SslMode::Require, Verify::Chain),
        "verify-full" => (SslMode::Require, Verify::ChainAndName),
        other => {
            return Err(Error::InvalidOption(format!(
                "sslmode={other}: expected disable, prefer, require, verify-ca or verify-full"
            )));
        }
    })
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let unreadable = |e: &dyn std::fmt::Display| {
        tls_error(format!(
            "sslrootcert {}: cannot read it: {e}",
            path.display()
        ))
    };
    CertificateDer::pem_file_iter(path)
        .map_err(|e| unreadable(&e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| unreadable(&e))
}

fn tls_error(message: String) -> Error {
    Error::InvalidOption(format!("PostgreSQL TLS: {message}"))
}

/// Checks the server's certificate as far as `sslmode` asks: not at all,
/// its chain, or its chain and name. Whatever it checks, the server must
/// prove it holds the certificate's key.
#[derive(Debug)]
struct Verifier {
    /// The chain's check against the trusted roots, if the chain is checked.
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let verified =
            chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verified {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// What `tokio-postgres` calls to wrap the socket in TLS.
pub(crate) struct Tls {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl Tls {
    /// The connector for a connection to `host`, with `config`.
    pub(crate) fn new(config: &Arc<ClientConfig>, host: &str) -> Result<Tls> {
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| tls_error(format!("{host:?} cannot name a TLS server: {e}")))?;
        Ok(Tls {
            config: config.clone(),
            server_name,
        })
    }
}

impl TlsConnect<Socket> for Tls {
    type Stream = TlsSocket;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsSocket>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            let stream = connector.connect(self.server_name, socket).await?;
            Ok(TlsSocket(Box::new(stream)))
        })
    }
}

/// The socket inside a TLS session.
pub(crate) struct TlsSocket(Box<tokio_rustls::client::TlsStream<Socket>>);

impl tokio_postgres::tls::TlsStream for TlsSocket {
    /// None: SCRAM without channel binding, which every server accepts.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for TlsSocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsSocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_parameters_leave_the_url_and_the_rest_stays() {
        let (url, settings) = TlsSettings::split(
            "postgres://u@db.example/app?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@db.example/app?application_name=x");
        assert_eq!(settings.verify, Verify::ChainAndName);
        assert!(matches!(settings.mode, Some(SslMode::Require)));
        assert_eq!(settings.root_cert, Some(PathBuf::from("/etc/ca.pem")));

        let (url, settings) = TlsSettings::split("postgres://u@h/db").unwrap();
        assert_eq!(url, "postgres://u@h/db");
        assert!(settings.mode.is_none());
        assert_eq!(settings.verify, Verify::Nothing);
    }

    #[test]
    fn an_unknown_sslmode_is_refused_by_name() {
        let error = TlsSettings::split("postgres://h/db?sslmode=allow-ish").unwrap_err();
        assert!(error.to_string().contains("sslmode=allow-ish"), "{error}");
    }

    #[test]
    fn a_root_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let (_, settings) = TlsSettings::split(&format!(
            "postgres://h/db?sslmode=verify-ca&sslrootcert={}",
            path.display()
        ))
        .unwrap();
        let error = settings.client_config().err().unwrap();
        assert!(
            error.to_string().contains("no usable certificate"),
            "{error}"
        );
    }
}
