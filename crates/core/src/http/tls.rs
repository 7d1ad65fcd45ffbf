//! TLS for `https://` targets: rustls with the ring provider and the Mozilla (webpki) roots,
//! ALPN `http/1.1` — `h2` for the connections opened for HTTP/2 (gRPC, [`offering`]). Only
//! built with the `tls` feature.

use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::connect::{ConnectError, Io};

/// The default client configuration: Mozilla roots, safe protocol versions, `http/1.1` ALPN.
pub fn default_client_config() -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| ConnectError::TlsSetup(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `config` offering only `protocol` by ALPN (e.g. `h2`).
pub fn offering(config: &rustls::ClientConfig, protocol: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut config = config.clone();
    config.alpn_protocols = vec![protocol.to_vec()];
    Arc::new(config)
}

/// Runs the TLS handshake over an established TCP stream.
pub(super) async fn handshake<T: Io>(
    config: Arc<rustls::ClientConfig>,
    host: &str,
    tcp: T,
) -> Result<TlsStream<T>, ConnectError> {
    let name = ServerName::try_from(host.to_string()).map_err(|_| ConnectError::Tls {
        host: host.to_string(),
        reason: "invalid server name".into(),
    })?;
    TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|error| ConnectError::Tls {
            host: host.to_string(),
            reason: error.to_string(),
        })
}
