//! [`Target`]: the server a run talks to, parsed from the URL the user gives, and how API
//! endpoints are joined to it.
//!
//! The user may pass the server root (`http://host:8000`), the API root
//! (`http://host:8000/v1`, `https://gw.example/openai/v1`), or even a full endpoint URL
//! (`http://host:8000/v1/chat/completions`); all three work:
//! - a trailing `/chat/completions` or `/completions` is removed;
//! - a path whose last segment is a version (`v1`, `v2`, …) is the API root as given;
//! - any other path (including none) gets `/v1` appended, so `http://host:8000` and
//!   `http://gw/proxy` mean `…/v1` and `…/proxy/v1`.
//!
//! A query string (e.g. Azure's `?api-version=…`) is kept and added to every endpoint, but is
//! never shown by [`Target`]'s `Display`. Credentials in the URL (`user:pass@`) are refused:
//! they would leak into logs and reports; pass an API key instead.

use std::fmt;

use http::Uri;
use http::uri::{PathAndQuery, Scheme};
use thiserror::Error;

/// Why a target URL is unusable; each message says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TargetError {
    /// Not a URL at all.
    #[error(
        "target URL `{url}` is not a valid URL ({reason}); expected e.g. http://localhost:8000/v1"
    )]
    Invalid {
        /// The URL as given (credentials removed).
        url: String,
        /// The parser's complaint.
        reason: String,
    },
    /// No `http://` or `https://`.
    #[error("target URL `{0}` has no scheme; write http://{0} or https://{0}")]
    MissingScheme(String),
    /// A scheme other than http or https.
    #[error("target URL scheme `{0}` is not supported; use http:// or https://")]
    UnsupportedScheme(String),
    /// No host.
    #[error("target URL `{0}` has no host; expected e.g. http://localhost:8000/v1")]
    MissingHost(String),
    /// `user:password@` in the URL.
    #[error("target URL must not contain credentials (user:password@); pass an API key instead")]
    Credentials,
}

/// Where requests go: scheme, host, port and API root path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    https: bool,
    host: String,
    port: u16,
    authority: String,
    api_root: String,
    /// The URL's path exactly as given (`--api http` posts to it).
    path: String,
    query: Option<String>,
}

const ENDPOINT_SUFFIXES: [&str; 2] = ["/chat/completions", "/completions"];

impl Target {
    /// Parses a target URL (see the module docs for the accepted forms).
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let url = url.trim();
        if !url.contains("://") {
            return Err(TargetError::MissingScheme(url.to_string()));
        }
        let uri: Uri =
            url.parse()
                .map_err(|error: http::uri::InvalidUri| TargetError::Invalid {
                    url: strip_credentials(url),
                    reason: error.to_string(),
                })?;
        let https = match uri.scheme() {
            Some(scheme) if *scheme == Scheme::HTTP => false,
            Some(scheme) if *scheme == Scheme::HTTPS => true,
            Some(scheme) => return Err(TargetError::UnsupportedScheme(scheme.to_string())),
            None => return Err(TargetError::MissingScheme(url.to_string())),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| TargetError::MissingHost(url.to_string()))?;
        if authority.as_str().contains('@') {
            return Err(TargetError::Credentials);
        }
        let host = authority.host();
        if host.is_empty() {
            return Err(TargetError::MissingHost(url.to_string()));
        }
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Target {
            https,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            authority: authority.as_str().to_string(),
            api_root: api_root(uri.path()),
            path: uri.path().to_string(),
            query: uri
                .query()
                .filter(|query| !query.is_empty())
                .map(str::to_string),
        })
    }

    /// Whether the target uses TLS.
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// Host name or IP address to connect to (IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// TCP port (explicit, or 80/443).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The `Host` header value: the authority as written in the URL.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The API root path, e.g. `/v1`; never ends with `/`.
    pub fn api_root(&self) -> &str {
        &self.api_root
    }

    /// The origin-form request target of an endpoint below the API root, e.g.
    /// `endpoint("chat/completions")` → `/v1/chat/completions` (plus the URL's query).
    pub fn endpoint(&self, path: &str) -> Uri {
        let path = path.trim_start_matches('/');
        let text = match &self.query {
            Some(query) => format!("{}/{path}?{query}", self.api_root),
            None => format!("{}/{path}", self.api_root),
        };
        // Every part was parsed from a valid URI or is a plain path; fall back to the root.
        let path_and_query =
            PathAndQuery::try_from(text).unwrap_or_else(|_| PathAndQuery::from_static("/"));
        Uri::from(path_and_query)
    }

    /// The origin-form request target of the URL exactly as given: its path (`/` when it has
    /// none) and query.
    pub fn exact(&self) -> Uri {
        let root = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        let text = match &self.query {
            Some(query) => format!("{root}?{query}"),
            None => root.to_string(),
        };
        PathAndQuery::try_from(text)
            .map(Uri::from)
            .unwrap_or_else(|_| Uri::from_static("/"))
    }

    /// The full URL of an endpoint, for people (no query string).
    pub fn url(&self, path: &str) -> String {
        format!("{self}/{}", path.trim_start_matches('/'))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.api_root)
    }
}

fn api_root(path: &str) -> String {
    let mut root = path.trim_end_matches('/');
    for suffix in ENDPOINT_SUFFIXES {
        if let Some(stripped) = root.strip_suffix(suffix) {
            root = stripped.trim_end_matches('/');
            break;
        }
    }
    let last = root.rsplit('/').next().unwrap_or("");
    let versioned = last.len() > 1
        && last.starts_with('v')
        && last[1..].bytes().all(|byte| byte.is_ascii_digit());
    if versioned {
        root.to_string()
    } else {
        format!("{root}/v1")
    }
}

fn strip_credentials(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://…@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn roots_and_endpoints() {
        for (url, root) in [
            ("http://localhost:8000", "/v1"),
            ("http://localhost:8000/", "/v1"),
            ("http://localhost:8000/v1", "/v1"),
            ("http://localhost:8000/v1/", "/v1"),
            ("http://localhost:8000/v1/chat/completions", "/v1"),
            ("http://localhost:8000/v1/completions/", "/v1"),
            ("https://gw.example/openai/v1", "/openai/v1"),
            ("http://gw/proxy", "/proxy/v1"),
            ("http://gw/v2", "/v2"),
            ("http://gw/vllm", "/vllm/v1"),
        ] {
            let target = Target::parse(url).unwrap();
            assert_eq!(target.api_root(), root, "{url}");
            assert_eq!(
                target.endpoint("/chat/completions").to_string(),
                format!("{root}/chat/completions")
            );
        }
    }

    #[test]
    fn hosts_ports_schemes() {
        let target = Target::parse("https://example.com/v1").unwrap();
        assert!(target.is_https());
        assert_eq!((target.host(), target.port()), ("example.com", 443));
        let target = Target::parse("http://[::1]:9000").unwrap();
        assert_eq!(
            (target.host(), target.port(), target.authority()),
            ("::1", 9000, "[::1]:9000")
        );
        assert_eq!(target.to_string(), "http://[::1]:9000/v1");
        assert_eq!(
            target.url("completions"),
            "http://[::1]:9000/v1/completions"
        );
        assert_eq!(Target::parse("http://h").unwrap().port(), 80);
    }

    #[test]
    fn query_is_kept_but_not_displayed() {
        let target = Target::parse("https://az.example/openai/v1?api-version=2024-10").unwrap();
        assert_eq!(
            target.endpoint("chat/completions").to_string(),
            "/openai/v1/chat/completions?api-version=2024-10"
        );
        assert_eq!(target.to_string(), "https://az.example/openai/v1");
    }

    #[test]
    fn errors_say_what_to_fix() {
        assert!(matches!(
            Target::parse("localhost:8000"),
            Err(TargetError::MissingScheme(_))
        ));
        assert!(matches!(
            Target::parse("ftp://h/v1"),
            Err(TargetError::UnsupportedScheme(_))
        ));
        assert_eq!(
            Target::parse("http://u:secret@h/v1"),
            Err(TargetError::Credentials)
        );
        let error = Target::parse("http://u:secret@h:99999/v1")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("secret"), "{error}");
        let error = Target::parse("http://exa mple/v1").unwrap_err().to_string();
        assert!(error.contains("not a valid URL"), "{error}");
    }
}
