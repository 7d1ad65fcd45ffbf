//! Connectors: how the HTTP client gets a byte stream to the target. [`TcpConnector`] dials
//! TCP (with TLS for `https://`); [`FnConnector`] wraps a closure, so tests and the in-process
//! simulator can hand out in-memory pipes (`tokio::io::duplex`).

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::target::Target;

/// A bidirectional byte stream a connection runs over.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// When the bytes of the last read reached this host, if the transport knows (kernel
    /// receive timestamps); `None`: the reader takes the time itself when the read returns.
    fn received_at(&self) -> Option<Instant> {
        None
    }

    /// Asks the transport to note, from now on, when bytes arrive — not only when the last
    /// bytes of each read did — so a read that drains a backlog also knows when its first
    /// bytes came ([`Io::first_received_at`]); off by default, a no-op where the transport
    /// cannot. It costs a wake-up of a watcher thread per arrival: turned on only while a
    /// response's first token is awaited.
    fn watch_arrivals(&mut self, _on: bool) {}

    /// When the first bytes of the last read arrived, if watched and known.
    fn first_received_at(&self) -> Option<Instant> {
        None
    }
}

impl Io for TcpStream {}
impl Io for tokio::io::DuplexStream {}
/// The last arrival passes through; a read's first arrival does not (TLS decrypts records it
/// may have taken from the socket earlier, so the socket's first bytes are not the read's).
#[cfg(feature = "tls")]
impl<T: Io> Io for tokio_rustls::client::TlsStream<T> {
    fn received_at(&self) -> Option<Instant> {
        self.get_ref().0.received_at()
    }
}

/// A boxed [`Io`].
pub type BoxIo = Box<dyn Io>;

/// Why a connection could not be made. Messages name the host and what went wrong, never
/// credentials.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// Name resolution failed or returned no address.
    #[error("could not resolve host `{host}`: {reason}")]
    Dns {
        /// The host name.
        host: String,
        /// Resolver message.
        reason: String,
    },
    /// Nothing listens on the port.
    #[error("connection refused by {addr} (is the server running and listening there?)")]
    Refused {
        /// The address tried last.
        addr: SocketAddr,
    },
    /// Connecting (including TLS) took longer than the connect timeout.
    #[error("connecting to {host}:{port} timed out after {after:?}")]
    Timeout {
        /// Host.
        host: String,
        /// Port.
        port: u16,
        /// The timeout.
        after: Duration,
    },
    /// Another socket error.
    #[error("connecting to {addr} failed: {source}")]
    Io {
        /// The address tried last.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
    /// The TLS handshake failed (certificate, protocol).
    #[error("TLS handshake with `{host}` failed: {reason}")]
    Tls {
        /// Host.
        host: String,
        /// What rustls reported.
        reason: String,
    },
    /// TLS could not be set up at all.
    #[error("TLS setup failed: {0}")]
    TlsSetup(String),
    /// An `https://` target, but goodput was built without the `tls` feature.
    #[error("https:// targets need goodput built with the `tls` feature")]
    TlsUnavailable,
    /// A custom connector's own error.
    #[error("{0}")]
    Other(String),
}

/// The application protocol a connection is opened for: what TLS offers by ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// `http/1.1` (goodput's own client).
    Http1,
    /// `h2` (gRPC, HTTP/2).
    Http2,
}

/// Opens connections to a target. Object-safe; shared by every request of a client.
pub trait Connector: Send + Sync + fmt::Debug {
    /// Opens one new connection to `target`.
    fn connect<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<BoxIo, ConnectError>>;

    /// Opens one new connection to `target` for `alpn`'s protocol (TLS offers it by ALPN);
    /// a connector without TLS (in-memory pipes) opens what [`Connector::connect`] does.
    fn connect_for<'a>(
        &'a self,
        target: &'a Target,
        alpn: Alpn,
    ) -> BoxFuture<'a, Result<BoxIo, ConnectError>> {
        let _ = alpn;
        self.connect(target)
    }
}

/// Options of [`TcpConnector`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpOptions {
    /// Longest time to resolve, connect and (for https) finish the TLS handshake.
    pub connect_timeout: Duration,
    /// Disable Nagle's algorithm (on by default: requests are small and latency-critical).
    pub nodelay: bool,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            connect_timeout: Duration::from_secs(10),
            nodelay: true,
        }
    }
}

type Resolved = (String, u16, Arc<[SocketAddr]>);

/// Dials TCP, and TLS for `https://` targets (with the `tls` feature). The resolved
/// addresses are cached (a run may open thousands of connections to one host) and
/// re-resolved when every cached address fails.
pub struct TcpConnector {
    options: TcpOptions,
    resolved: Mutex<Option<Resolved>>,
    #[cfg(feature = "tls")]
    tls: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
    /// `tls` offering `h2` instead of `http/1.1`.
    #[cfg(feature = "tls")]
    tls_h2: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl fmt::Debug for TcpConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpConnector")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Default for TcpConnector {
    fn default() -> Self {
        TcpConnector::new(TcpOptions::default())
    }
}

impl TcpConnector {
    /// A connector with `options` and, for https, the default TLS configuration.
    pub fn new(options: TcpOptions) -> Self {
        TcpConnector {
            options,
            resolved: Mutex::new(None),
            #[cfg(feature = "tls")]
            tls: std::sync::OnceLock::new(),
            #[cfg(feature = "tls")]
            tls_h2: std::sync::OnceLock::new(),
        }
    }

    /// A connector using `config` for https (custom roots, client certificates, …); its
    /// ALPN is replaced by `h2` for connections opened for HTTP/2 ([`Alpn::Http2`]).
    #[cfg(feature = "tls")]
    pub fn with_tls_config(options: TcpOptions, config: Arc<rustls::ClientConfig>) -> Self {
        let connector = TcpConnector::new(options);
        let _ = connector.tls.set(Ok(config));
        connector
    }

    async fn resolve(&self, host: &str, port: u16) -> Result<Arc<[SocketAddr]>, ConnectError> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(Arc::from([SocketAddr::new(ip, port)]));
        }
        if let Some((cached_host, cached_port, addrs)) = &*self.cache()
            && cached_host == host
            && *cached_port == port
        {
            return Ok(addrs.clone());
        }
        let dns_error = |reason: String| ConnectError::Dns {
            host: host.to_string(),
            reason,
        };
        let addrs: Arc<[SocketAddr]> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|error| dns_error(error.to_string()))?
            .collect();
        if addrs.is_empty() {
            return Err(dns_error("no addresses".into()));
        }
        *self.cache() = Some((host.to_string(), port, addrs.clone()));
        Ok(addrs)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Option<Resolved>> {
        self.resolved.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn dial(&self, target: &Target) -> Result<TcpStream, ConnectError> {
        let addrs = self.resolve(target.host(), target.port()).await?;
        let mut last = None;
        for (position, &addr) in addrs.iter().enumerate() {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    if self.options.nodelay {
                        // Best effort: a socket that refuses NODELAY still works.
                        let _ = stream.set_nodelay(true);
                    }
                    if position > 0 {
                        self.prefer(target, &addrs, position);
                    }
                    return Ok(stream);
                }
                Err(error) => last = Some((addr, error)),
            }
        }
        *self.cache() = None;
        Err(match last {
            Some((addr, error)) if error.kind() == io::ErrorKind::ConnectionRefused => {
                ConnectError::Refused { addr }
            }
            Some((addr, source)) => ConnectError::Io { addr, source },
            None => ConnectError::Dns {
                host: target.host().to_string(),
                reason: "no addresses".into(),
            },
        })
    }

    /// Moves the address that worked to the front of the cache (e.g. `localhost` resolving
    /// to `::1` first while the server listens on IPv4 only), so later dials try it first.
    fn prefer(&self, target: &Target, addrs: &[SocketAddr], position: usize) {
        let mut reordered = addrs.to_vec();
        reordered[..=position].rotate_right(1);
        let mut cache = self.cache();
        if let Some((host, port, cached)) = &mut *cache
            && host == target.host()
            && *port == target.port()
        {
            *cached = reordered.into();
        }
    }

    async fn open(&self, target: &Target, alpn: Alpn) -> Result<BoxIo, ConnectError> {
        let tcp = self.dial(target).await?;
        #[cfg(target_os = "linux")]
        let tcp = match super::stamped::StampedTcp::new(tcp) {
            Ok(stamped) => return self.secure(target, stamped, alpn).await,
            Err(plain) => plain,
        };
        self.secure(target, tcp, alpn).await
    }

    /// The TLS configuration offering `alpn`.
    #[cfg(feature = "tls")]
    fn tls_config(&self, alpn: Alpn) -> Result<Arc<rustls::ClientConfig>, ConnectError> {
        let base = || {
            self.tls
                .get_or_init(|| {
                    super::tls::default_client_config().map_err(|error| error.to_string())
                })
                .clone()
        };
        let config = match alpn {
            Alpn::Http1 => base(),
            Alpn::Http2 => self
                .tls_h2
                .get_or_init(|| base().map(|config| super::tls::offering(&config, b"h2")))
                .clone(),
        };
        config.map_err(ConnectError::TlsSetup)
    }

    /// `io` as it is for `http://`, inside TLS for `https://`.
    async fn secure<T: Io>(
        &self,
        target: &Target,
        io: T,
        alpn: Alpn,
    ) -> Result<BoxIo, ConnectError> {
        if !target.is_https() {
            return Ok(Box::new(io));
        }
        #[cfg(feature = "tls")]
        {
            let config = self.tls_config(alpn)?;
            Ok(Box::new(
                super::tls::handshake(config, target.host(), io).await?,
            ))
        }
        #[cfg(not(feature = "tls"))]
        {
            drop((io, alpn));
            Err(ConnectError::TlsUnavailable)
        }
    }
}

impl Connector for TcpConnector {
    fn connect<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<BoxIo, ConnectError>> {
        self.connect_for(target, Alpn::Http1)
    }

    fn connect_for<'a>(
        &'a self,
        target: &'a Target,
        alpn: Alpn,
    ) -> BoxFuture<'a, Result<BoxIo, ConnectError>> {
        Box::pin(async move {
            let after = self.options.connect_timeout;
            tokio::time::timeout(after, self.open(target, alpn))
                .await
                .unwrap_or_else(|_| {
                    Err(ConnectError::Timeout {
                        host: target.host().to_string(),
                        port: target.port(),
                        after,
                    })
                })
        })
    }
}

/// A connector made of a closure returning a future of a connection; the target is ignored.
///
/// ```
/// # use goodput_core::http::{BoxIo, FnConnector};
/// let connector = FnConnector::new(|| async {
///     let (client, _server) = tokio::io::duplex(1 << 16);
///     // … hand `_server` to an in-process HTTP server …
///     Ok(Box::new(client) as BoxIo)
/// });
/// ```
pub struct FnConnector<F> {
    connect: F,
}

impl<F, Fut> FnConnector<F>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<BoxIo, ConnectError>> + Send + 'static,
{
    /// Wraps `connect`.
    pub fn new(connect: F) -> Self {
        FnConnector { connect }
    }
}

impl<F> fmt::Debug for FnConnector<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnConnector")
    }
}

impl<F, Fut> Connector for FnConnector<F>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<BoxIo, ConnectError>> + Send + 'static,
{
    fn connect<'a>(&'a self, _target: &'a Target) -> BoxFuture<'a, Result<BoxIo, ConnectError>> {
        Box::pin((self.connect)())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_address_that_worked_moves_to_the_front() {
        let connector = TcpConnector::default();
        let target = Target::parse("http://localhost:8000").unwrap();
        let addrs: Vec<SocketAddr> = ["[::1]:8000", "10.0.0.1:8000", "127.0.0.1:8000"]
            .iter()
            .map(|addr| addr.parse().unwrap())
            .collect();
        *connector.cache() = Some(("localhost".into(), 8000, addrs.clone().into()));
        connector.prefer(&target, &addrs, 2);
        let cached = connector.cache().clone().unwrap().2;
        assert_eq!(&cached[..], [addrs[2], addrs[0], addrs[1]]);
    }

    #[cfg(feature = "tls")]
    #[tokio::test]
    async fn connect_timeout_bounds_a_silent_tls_handshake() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = Target::parse(&format!("https://{}", listener.local_addr().unwrap())).unwrap();
        let options = TcpOptions {
            connect_timeout: Duration::from_millis(100),
            nodelay: true,
        };
        let error = TcpConnector::new(options)
            .connect(&target)
            .await
            .err()
            .unwrap();
        assert!(matches!(error, ConnectError::Timeout { .. }), "{error}");
        drop(listener);
    }
}
