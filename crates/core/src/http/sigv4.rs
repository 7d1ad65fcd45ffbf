//! AWS Signature Version 4 request signing (SageMaker and Bedrock endpoints): the canonical
//! request, the string to sign and the derived signing key of the AWS specification, added as
//! `authorization`, `x-amz-date` and, for temporary credentials, `x-amz-security-token`.
//! Credentials come from the usual chain — `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/
//! `AWS_SESSION_TOKEN`, else the `AWS_PROFILE` (or `default`) profile of
//! `AWS_SHARED_CREDENTIALS_FILE` or `~/.aws/credentials` — and are never shown (`Debug`
//! redacts them) nor written anywhere; the signed headers are sensitive header values.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use http::header::{HOST, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri};
use ring::{digest, hmac};
use thiserror::Error;

/// An access key, its secret and, for temporary credentials, the session token.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`.
    pub session_token: Option<String>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &"[redacted]")
            .field("secret_access_key", &"[redacted]")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

/// Why requests cannot be signed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SigV4Error {
    /// Neither the environment nor the profile gave credentials.
    #[error(
        "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile \
         `{profile}` in {file}"
    )]
    NoCredentials {
        /// The profile looked for.
        profile: String,
        /// The credentials file looked in.
        file: String,
    },
    /// The URL has no host to sign.
    #[error("the URL has no host to sign")]
    NoHost,
    /// A credential cannot be a header value (not shown).
    #[error("an AWS credential contains characters not allowed in an HTTP header")]
    InvalidCredential,
}

impl AwsCredentials {
    /// The credentials of the chain: the environment (`env`), else the profile of the
    /// credentials file (read with `read`); `home` is the user's home directory.
    pub fn from_chain(
        env: impl Fn(&str) -> Option<String>,
        read: impl Fn(&Path) -> Option<String>,
        home: Option<PathBuf>,
    ) -> Result<AwsCredentials, SigV4Error> {
        let var = |name: &str| env(name).filter(|value| !value.is_empty());
        if let (Some(access_key_id), Some(secret_access_key)) =
            (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
        {
            return Ok(AwsCredentials {
                access_key_id,
                secret_access_key,
                session_token: var("AWS_SESSION_TOKEN"),
            });
        }
        let profile = var("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
        let file = var("AWS_SHARED_CREDENTIALS_FILE")
            .map(PathBuf::from)
            .or_else(|| home.map(|home| home.join(".aws").join("credentials")));
        let missing = || SigV4Error::NoCredentials {
            profile: profile.clone(),
            file: file.as_ref().map_or_else(
                || "~/.aws/credentials".to_string(),
                |f| f.display().to_string(),
            ),
        };
        let text = file.as_deref().and_then(&read).ok_or_else(missing)?;
        profile_credentials(&text, &profile).ok_or_else(missing)
    }

    /// The credentials of this process's environment and the user's credentials file.
    pub fn from_environment() -> Result<AwsCredentials, SigV4Error> {
        Self::from_chain(
            |name| std::env::var(name).ok(),
            |path| std::fs::read_to_string(path).ok(),
            std::env::var_os("HOME").map(PathBuf::from),
        )
    }
}

/// The credentials of `[profile]` in an INI credentials file.
fn profile_credentials(text: &str, profile: &str) -> Option<AwsCredentials> {
    let (mut inside, mut key, mut secret, mut token) = (false, None, None, None);
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == profile;
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if !inside {
            continue;
        }
        let value = Some(value.trim().to_string());
        match name.trim() {
            "aws_access_key_id" => key = value,
            "aws_secret_access_key" => secret = value,
            "aws_session_token" => token = value,
            _ => {}
        }
    }
    Some(AwsCredentials {
        access_key_id: key?,
        secret_access_key: secret?,
        session_token: token,
    })
}

/// Signs requests for one region and service (`sagemaker`, `bedrock`, …).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SigV4 {
    /// The credentials.
    pub credentials: AwsCredentials,
    /// The region, e.g. `us-east-1`.
    pub region: String,
    /// The service's signing name, e.g. `sagemaker` or `bedrock`.
    pub service: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, bytes).as_ref())
}

fn hmac_sha256(key: &[u8], message: &str) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::sign(&key, message.as_bytes()).as_ref().to_vec()
}

/// The canonical query string: parameters sorted by name then value, as sent.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .collect();
    pairs.sort_unstable();
    let pairs: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    pairs.join("&")
}

impl SigV4 {
    /// Adds `host` (the target's authority), `x-amz-date`, `x-amz-security-token` (temporary
    /// credentials) and `authorization` to `headers`, signing every header in them, for a
    /// request of `method` to `host` and `uri` (its path and query) carrying `body`, made at
    /// `now`.
    pub fn sign(
        &self,
        (method, host, uri): (&Method, &str, &Uri),
        headers: &mut HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<(), SigV4Error> {
        if host.is_empty() {
            return Err(SigV4Error::NoHost);
        }
        let stamp = crate::units::rfc3339(now).replace(['-', ':'], "");
        let value =
            |text: &str| HeaderValue::from_str(text).map_err(|_| SigV4Error::InvalidCredential);
        headers.insert(HOST, value(host)?);
        headers.insert(HeaderName::from_static("x-amz-date"), value(&stamp)?);
        if let Some(token) = &self.credentials.session_token {
            let mut token = value(token)?;
            token.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-amz-security-token"), token);
        }
        let (canonical, signed) = canonical_request(method, uri, headers, body);
        let date = &stamp[..8];
        let scope = format!("{date}/{}/{}/aws4_request", self.region, self.service);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
            sha256_hex(canonical.as_bytes())
        );
        let secret = format!("AWS4{}", self.credentials.secret_access_key);
        let mut key = hmac_sha256(secret.as_bytes(), date);
        for part in [self.region.as_str(), self.service.as_str(), "aws4_request"] {
            key = hmac_sha256(&key, part);
        }
        let signature = hex(&hmac_sha256(&key, &to_sign));
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            self.credentials.access_key_id
        );
        let mut authorization = value(&authorization)?;
        authorization.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, authorization);
        Ok(())
    }
}

/// The canonical request and its signed-header list (every header, lower-case, sorted; values
/// trimmed with inner runs of spaces collapsed, repeated headers joined by commas).
fn canonical_request(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> (String, String) {
    let mut names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
    names.sort_unstable();
    names.dedup();
    let mut lines = String::new();
    for name in &names {
        let values: Vec<String> = headers
            .get_all(*name)
            .iter()
            .map(|value| {
                let text = String::from_utf8_lossy(value.as_bytes());
                text.split_whitespace().collect::<Vec<_>>().join(" ")
            })
            .collect();
        lines.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let signed = names.join(";");
    let path = if uri.path().is_empty() {
        "/"
    } else {
        uri.path()
    };
    let canonical = format!(
        "{method}\n{}\n{}\n{lines}\n{signed}\n{}",
        super::percent_encode(path, true),
        canonical_query(uri.query().unwrap_or("")),
        sha256_hex(body)
    );
    (canonical, signed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The AWS SigV4 test suite's credentials, region, service and time (2015-08-30 12:36:00).
    fn suite() -> (SigV4, SystemTime) {
        let signer = SigV4 {
            credentials: AwsCredentials {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
                session_token: None,
            },
            region: "us-east-1".into(),
            service: "service".into(),
        };
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        (signer, at)
    }

    fn authorization(method: Method, uri: &str) -> String {
        let (signer, at) = suite();
        let mut headers = HeaderMap::new();
        let target = (&method, "example.amazonaws.com", &uri.parse().unwrap());
        signer.sign(target, &mut headers, b"", at).unwrap();
        assert_eq!(headers["x-amz-date"], "20150830T123600Z");
        headers["authorization"].to_str().unwrap().to_string()
    }

    #[test]
    fn the_aws_suites_vanilla_cases_give_their_published_signatures() {
        let scope = "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                     SignedHeaders=host;x-amz-date, Signature=";
        // get-vanilla, post-vanilla and get-vanilla-query-order-key-case of the suite.
        for (method, uri, signature) in [
            (
                Method::GET,
                "/",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
            (
                Method::POST,
                "/",
                "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
            ),
            (
                Method::GET,
                "/?Param2=value2&Param1=value1",
                "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            ),
        ] {
            let expected = format!("AWS4-HMAC-SHA256 {scope}{signature}");
            assert_eq!(authorization(method, uri), expected, "{uri}");
        }
    }

    #[test]
    fn the_get_vanilla_canonical_request_is_the_suites() {
        let (signer, at) = suite();
        let uri: Uri = "/".parse().unwrap();
        let mut headers = HeaderMap::new();
        let target = (&Method::GET, "example.amazonaws.com", &uri);
        signer.sign(target, &mut headers, b"", at).unwrap();
        headers.remove(http::header::AUTHORIZATION);
        let (canonical, _) = canonical_request(&Method::GET, &uri, &headers, b"");
        assert_eq!(
            sha256_hex(canonical.as_bytes()),
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
        );
    }

    #[test]
    fn credentials_come_from_the_environment_else_the_profile() {
        let file = "[default]\naws_access_key_id = AKD\naws_secret_access_key = SD\n\n\
                    [bench]\naws_access_key_id=AKB\naws_secret_access_key=SB\naws_session_token=TB\n";
        let read = |_: &Path| Some(file.to_string());
        let home = Some(PathBuf::from("/home/u"));
        let env = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("AKE".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("SE".to_string()),
            _ => None,
        };
        let from_env = AwsCredentials::from_chain(env, read, home.clone()).unwrap();
        assert_eq!(
            (from_env.access_key_id.as_str(), from_env.session_token),
            ("AKE", None)
        );
        let default = AwsCredentials::from_chain(|_| None, read, home.clone()).unwrap();
        assert_eq!(default.access_key_id, "AKD");
        let profile = |name: &str| (name == "AWS_PROFILE").then(|| "bench".to_string());
        let bench = AwsCredentials::from_chain(profile, read, home.clone()).unwrap();
        assert_eq!(
            (
                bench.secret_access_key.as_str(),
                bench.session_token.as_deref()
            ),
            ("SB", Some("TB"))
        );
        let missing = |name: &str| (name == "AWS_PROFILE").then(|| "none".to_string());
        let error = AwsCredentials::from_chain(missing, read, home).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("profile `none` in /home/u/.aws/credentials"),
            "{error}"
        );
        assert!(!format!("{bench:?}").contains("SB"));
    }
}
