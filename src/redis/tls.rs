//! TLS: what a connection trusts and shows (`--tls-ca-file`, `--tls-cert-file`,
//! `--tls-key-file`, `--tls-insecure`), rustls's settings built from them, and a failed
//! handshake worded for people.
//!
//! A certificate in `--tls-ca-file` is trusted when the server presents exactly it
//! ([`OwnCertificates`]), even when it says `CA:TRUE`, which is how most guides make a
//! self-signed one; its name is still checked. A refused handshake becomes one plain line that
//! names the server and the flag to fix ([`explain_tls`]): unknown CA, expired, wrong name, a CA
//! certificate served as the server's own, not TLS at all.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::report::error::usage;

/// What a TLS failure's message names: the server as dialled and where trust came from.
#[derive(Clone, Debug)]
pub struct TlsTarget {
    /// `HOST:PORT` as in the URL (no password).
    pub address: String,
    /// `--tls-ca-file` as given; `None` means the system's trust store.
    pub ca_file: Option<String>,
}

/// How to talk TLS to `rediss://` servers. Verification is on unless `insecure`; without a CA
/// file the system's trust store is used.
#[derive(Clone, Default)]
pub struct Tls {
    pub ca: Option<Vec<u8>>,
    /// The path `ca` was read from, for messages.
    pub ca_file: Option<String>,
    /// Client certificate and key, PEM.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    pub insecure: bool,
}

impl Tls {
    /// Reads the certificate files now, so a wrong path is a usage error (64) before anything
    /// is contacted.
    pub fn load(
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
        insecure: bool,
    ) -> Result<Tls> {
        let read = |flag: &str, path: &Path| {
            std::fs::read(path)
                .map_err(|e| usage(format!("cannot read {flag} {}: {e}", path.display())))
        };
        let ca_bytes = ca.map(|p| read("--tls-ca-file", p)).transpose()?;
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((read("--tls-cert-file", c)?, read("--tls-key-file", k)?)),
            _ => None,
        };
        Ok(Tls {
            ca: ca_bytes,
            ca_file: ca.map(|p| p.display().to_string()),
            identity,
            insecure,
        })
    }

    /// redlock's own TLS settings (`wire.rs`), with the exception for a server presenting a
    /// certificate of `--tls-ca-file` as its own when `own_certificates`. Errors name the flag.
    pub(super) fn config(
        &self,
        own_certificates: bool,
    ) -> std::result::Result<Arc<rustls::ClientConfig>, String> {
        client_config(&TlsFiles {
            ca: self.ca.as_deref(),
            identity: self
                .identity
                .as_ref()
                .map(|(cert, key)| (cert.as_slice(), key.as_slice())),
            insecure: self.insecure,
            own_certificates,
        })
    }

    pub(super) fn target(&self, address: String) -> TlsTarget {
        TlsTarget {
            address,
            ca_file: self.ca_file.clone(),
        }
    }
}

/// What a TLS connection trusts and shows, read from the certificate files once.
pub struct TlsFiles<'a> {
    /// PEM: the CAs (and own certificates) of `--tls-ca-file`; `None` is the system's store.
    pub ca: Option<&'a [u8]>,
    /// PEM: the client certificate chain and its key.
    pub identity: Option<(&'a [u8], &'a [u8])>,
    pub insecure: bool,
    /// Whether a certificate of `ca` presented as the server's own is accepted
    /// ([`OwnCertificates`]).
    pub own_certificates: bool,
}

/// The rustls settings for `files`. Errors are worded for `--tls-*` flags.
pub fn client_config(files: &TlsFiles) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let listed: Vec<CertificateDer<'static>> = match files.ca {
        Some(pem) => {
            let certs = pem_certificates(pem)
                .map_err(|e| format!("--tls-ca-file holds no readable certificate: {e}"))?;
            if certs.is_empty() {
                return Err("--tls-ca-file holds no certificate".into());
            }
            certs
        }
        None => Vec::new(),
    };
    let algorithms = provider.signature_verification_algorithms;
    let builder = if files.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(algorithms)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if files.ca.is_some() {
            for cert in &listed {
                roots
                    .add(cert.clone())
                    .map_err(|e| format!("--tls-ca-file: a certificate is not usable: {e}"))?;
            }
        } else {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(
                    "this host has no trusted CA certificates (install ca-certificates, or give \
                     --tls-ca-file)"
                        .into(),
                );
            }
        }
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&provider),
        )
        .build()
        .map_err(|e| e.to_string())?;
        let verifier: Arc<dyn ServerCertVerifier> = if files.own_certificates && !listed.is_empty()
        {
            Arc::new(OwnCertificates {
                webpki,
                own: listed,
            })
        } else {
            webpki
        };
        builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
    };
    let mut config = match files.identity {
        Some((cert, key)) => {
            let chain = pem_certificates(cert)
                .map_err(|e| format!("--tls-cert-file holds no readable certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("--tls-key-file holds no readable private key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("--tls-cert-file and --tls-key-file do not fit: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    // As the redis crate: no server name sent when nothing is verified.
    config.enable_sni = !files.insecure;
    Ok(Arc::new(config))
}

fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// Whether a refused certificate is a CA certificate served as a server's own (webpki's
/// `CaUsedAsEndEntity`, which rustls passes on inside `CertificateError::Other`).
pub fn ca_used_as_own(e: &rustls::CertificateError) -> bool {
    match e {
        rustls::CertificateError::Other(other) => {
            other.0.downcast_ref::<webpki::Error>() == Some(&webpki::Error::CaUsedAsEndEntity)
        }
        _ => false,
    }
}

/// The usual verification, plus one case: a server presenting *exactly* a certificate listed in
/// `--tls-ca-file` is trusted as that certificate says, even when it is marked as a CA (which
/// the usual rules refuse as a server's own, `CaUsedAsEndEntity`). Its dates were checked by the
/// usual verification before it refused (validity comes first), the name is checked here, and
/// the handshake's signature proves the server holds its key. Only the extended key usage is
/// not looked at: the operator listed this very certificate for this server.
#[derive(Debug)]
struct OwnCertificates {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    own: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for OwnCertificates {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        let ca_as_own =
            matches!(&refused, rustls::Error::InvalidCertificate(e) if ca_used_as_own(e));
        if !ca_as_own
            || !self
                .own
                .iter()
                .any(|own| own.as_ref() == end_entity.as_ref())
        {
            return Err(refused);
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// `--tls-insecure`: encryption without verification, as the redis crate's insecure mode.
#[derive(Debug)]
struct Unverified(rustls::crypto::WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The TLS error in an error's chain of causes, if any. rustls's errors reach us inside an
/// `io::Error` that the `RedisError` keeps behind an `Arc` (which is what its `source` is).
fn tls_error(err: &anyhow::Error) -> Option<&rustls::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    err.chain().find_map(|cause| {
        let cause = match cause.downcast_ref::<Shared>() {
            Some(shared) => &**shared as &(dyn std::error::Error + 'static),
            None => cause,
        };
        cause.downcast_ref::<rustls::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        })
    })
}

/// A failed TLS handshake with a TLS server (`rediss://`, a cluster node, a sentinel or its
/// master), in plain words: what is wrong and what to do. `None` when the error is not a TLS
/// failure (the caller keeps it as it is).
pub fn explain_tls(err: &anyhow::Error, target: &TlsTarget) -> Option<String> {
    use rustls::CertificateError as Cert;
    let address = &target.address;
    let host = address
        .rsplit_once(':')
        .map_or(address.as_str(), |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let trust = match &target.ca_file {
        Some(file) => format!("any CA in --tls-ca-file {file}: give the CA that signed it"),
        None => "a CA the system trusts: give the CA that signed it with --tls-ca-file".into(),
    };
    let text = match tls_error(err)? {
        rustls::Error::InvalidCertificate(cert) => match cert {
            Cert::UnknownIssuer | Cert::BadSignature => {
                format!("the server's certificate at {address} is not signed by {trust}")
            }
            Cert::Expired => format!("the server's certificate at {address} has expired: renew it"),
            Cert::ExpiredContext { not_after, .. } => format!(
                "the server's certificate at {address} expired on {}: renew it",
                date(*not_after)
            ),
            Cert::NotValidYet => format!(
                "the server's certificate at {address} is not valid yet: check this host's \
                 clock or the certificate's start date"
            ),
            Cert::NotValidYetContext { not_before, .. } => format!(
                "the server's certificate at {address} is not valid before {}: check this \
                 host's clock or the certificate's start date",
                date(*not_before)
            ),
            Cert::NotValidForName => format!(
                "the server's certificate at {address} is not for {host}: connect by a name it \
                 lists or reissue it"
            ),
            Cert::NotValidForNameContext { presented, .. } => format!(
                "the server's certificate is for {}, not {host}: connect by a name it lists \
                 or reissue it",
                if presented.is_empty() {
                    "no name".to_string()
                } else {
                    presented
                        .iter()
                        .map(|n| plain_name(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            Cert::InvalidPurpose | Cert::InvalidPurposeContext { .. } => format!(
                "the server's certificate at {address} is not for TLS servers (its extended \
                 key usage lacks serverAuth): reissue it"
            ),
            other if ca_used_as_own(other) => {
                let accept = match &target.ca_file {
                    Some(file) => {
                        format!("list that very certificate in --tls-ca-file {file}, or ")
                    }
                    None => "give that very certificate with --tls-ca-file, or ".into(),
                };
                format!(
                    "the server at {address} presents a CA certificate (basicConstraints \
                     CA:TRUE) as its own: {accept}reissue it with \
                     `-addext basicConstraints=critical,CA:FALSE`, or sign a server certificate \
                     with that CA"
                )
            }
            other => format!("the server's certificate at {address} is refused: {other:?}"),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            not_tls(address)
        }
        other => format!("the TLS handshake with {address} failed: {other}"),
    };
    Some(text)
}

/// What a plain URL (`scheme` names its TLS form) gets when the server closed the connection
/// without a word: a Redis TLS port does that to a client that speaks plain text.
pub fn maybe_tls(name: &str, scheme: &str) -> String {
    format!(
        "{name} closed the connection without answering (is it a TLS port? use {scheme} or the \
         plain port)"
    )
}

/// What a `rediss://` URL that reached a plain Redis port gets.
pub fn not_tls(address: &str) -> String {
    format!("{address} does not speak TLS (is it the plain port? use redis:// or the tls-port)")
}

/// rustls words the names a certificate lists as `DnsName("x")` or `IpAddress(1.2.3.4)`.
fn plain_name(name: &str) -> &str {
    ["DnsName(", "IpAddress("]
        .iter()
        .find_map(|kind| name.strip_prefix(kind)?.strip_suffix(')'))
        .map_or(name, |inner| inner.trim_matches('"'))
}

fn date(time: rustls::pki_types::UnixTime) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(time.as_secs());
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::RedisError;

    /// A rustls error as the redis crate hands it over: in an `io::Error` in a `RedisError`.
    fn handshake_failure(err: rustls::Error) -> anyhow::Error {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, err);
        anyhow::Error::new(RedisError::from(io)).context("cannot acquire job")
    }

    #[test]
    fn tls_failures_are_worded_for_people() {
        use rustls::CertificateError as Cert;
        let target = TlsTarget {
            address: "127.0.0.1:6380".into(),
            ca_file: Some("/etc/redis/ca.crt".into()),
        };
        let explain = |e| explain_tls(&handshake_failure(e), &target).expect("a TLS failure");
        assert_eq!(
            explain(rustls::Error::InvalidCertificate(Cert::UnknownIssuer)),
            "the server's certificate at 127.0.0.1:6380 is not signed by any CA in \
             --tls-ca-file /etc/redis/ca.crt: give the CA that signed it"
        );
        let presented = vec![
            "DnsName(\"redis.internal\")".to_string(),
            "IpAddress(10.0.0.2)".to_string(),
        ];
        assert_eq!(
            explain(rustls::Error::InvalidCertificate(
                Cert::NotValidForNameContext {
                    expected: rustls::pki_types::ServerName::try_from("127.0.0.1")
                        .unwrap()
                        .to_owned(),
                    presented,
                }
            )),
            "the server's certificate is for redis.internal, 10.0.0.2, not 127.0.0.1: connect \
             by a name it lists or reissue it"
        );
        let not_after = rustls::pki_types::UnixTime::since_unix_epoch(
            std::time::Duration::from_secs(1_577_923_200),
        );
        assert!(
            explain(rustls::Error::InvalidCertificate(Cert::ExpiredContext {
                time: not_after,
                not_after,
            }))
            .contains("expired on 2020-01-02T00:00:00Z")
        );
        let plain = anyhow::Error::new(RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert_eq!(explain_tls(&plain, &target), None);
    }
}
