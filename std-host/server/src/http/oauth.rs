//! `--oauth-issuer`: the server as an OAuth 2.1 resource server (MCP authorization).
//!
//! - At start, the issuer's metadata (`ISSUER/.well-known/oauth-authorization-server`, else
//!   OpenID discovery) names its `jwks_uri`; the key set is fetched and kept. A token whose
//!   `kid` is not in it makes the server fetch the set again, at most once per
//!   [`MIN_REFETCH`] (a flood of made-up `kid`s costs the issuer one request per interval),
//!   and the set is refreshed every [`REFRESH`] so that a withdrawn key stops being trusted.
//! - A token is accepted when it is a JWT signed with an asymmetric algorithm of the key it
//!   names (RS*/PS* with an RSA key, ES256/ES384 with an EC key of that curve: `none` and
//!   HMAC are never accepted, so a public key cannot be used as an HMAC secret), its `iss` is
//!   the issuer, its `aud` contains the resource, `exp` and `nbf` hold (with [`LEEWAY`]), and
//!   it carries every required scope. The principal is the configured claim.
//! - Refusals: 401 with `WWW-Authenticate: Bearer resource_metadata="…"` (and
//!   `error="invalid_token"` when a token was presented), 403 `insufficient_scope`; each is
//!   logged with its reason, never the token.
//! - `GET /.well-known/oauth-protected-resource[/<resource path>]`: the RFC 9728 document.
//!
//! Nothing here blocks the runtime: fetches are async (reqwest), and a token check is a
//! signature verification on keys already in memory.
//!
//! Why one file past ~600 lines: it is one resource server, the issuer's metadata and keys,
//! the token check and the challenges, which share one cache.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::Response;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use reqwest::Url;
use serde_json::{json, Map, Value};
use taskstream_core::rpc::ErrorCode;

use crate::config::OAuthConfig;
use crate::log::log;

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub(crate) const LEEWAY: u64 = 30;
/// The shortest time between two key-set fetches caused by an unknown `kid`.
pub(crate) const MIN_REFETCH: Duration = Duration::from_secs(10);
/// How often the key set is fetched again in any case.
pub(crate) const REFRESH: Duration = Duration::from_secs(15 * 60);
/// The longest metadata document or key set read from the issuer.
const MAX_DOCUMENT: usize = 1 << 20;
/// The longest token looked at.
const MAX_TOKEN: usize = 16 * 1024;
/// The longest principal taken from a claim.
const MAX_PRINCIPAL: usize = 256;
/// How long one fetch from the issuer may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The algorithms accepted (all asymmetric).
const ALGORITHMS: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];
/// The metadata path (RFC 9728 §3).
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// A usable key of the issuer's set.
struct Key {
    kid: Option<String>,
    jwk: Jwk,
    key: DecodingKey,
}

/// The resource server's state.
pub(crate) struct OAuth {
    config: OAuthConfig,
    /// Where the metadata document is (announced in every 401).
    metadata_url: String,
    /// The document itself.
    document: Bytes,
    /// The resource's own path, also served under [`METADATA_PATH`].
    resource_path: String,
    jwks_uri: Url,
    client: reqwest::Client,
    keys: RwLock<Arc<Vec<Key>>>,
    /// When an unknown `kid` last caused a fetch.
    last_refetch: tokio::sync::Mutex<Option<Instant>>,
}

/// Why a request was not let in.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No bearer token.
    Missing,
    /// A token that is not accepted, and why (never the token).
    Invalid(String),
    /// A valid token without these required scopes.
    Scope(Vec<String>),
}

impl OAuth {
    /// Checks the options, fetches the issuer's metadata and keys.
    ///
    /// # Errors
    /// A message naming the option or the fetch that failed.
    pub(crate) async fn start(config: &OAuthConfig) -> Result<Arc<OAuth>, String> {
        super::jwt_ring::install();
        let issuer = fetchable(&config.issuer).map_err(|e| format!("--oauth-issuer: {e}"))?;
        let resource = Url::parse(&config.resource)
            .map_err(|e| format!("--oauth-resource {}: {e}", config.resource))?;
        if !matches!(resource.scheme(), "https" | "http")
            || resource.host_str().is_none()
            || resource.fragment().is_some()
        {
            return Err(format!(
                "--oauth-resource {}: expected an absolute http(s) URL without a fragment",
                config.resource
            ));
        }
        for s in &config.scopes {
            if s.is_empty()
                || !s
                    .bytes()
                    .all(|b| b == 0x21 || (0x23..=0x7e).contains(&b) && b != b'\\')
            {
                return Err(format!(
                    "--oauth-scope {s}: not a scope token (RFC 6749 §3.3)"
                ));
            }
        }
        let resource_path = resource.path().trim_end_matches('/').to_owned();
        let metadata_url = format!(
            "{}{METADATA_PATH}{resource_path}",
            resource.origin().ascii_serialization()
        );
        if HeaderValue::from_str(&metadata_url).is_err() {
            return Err(format!(
                "--oauth-resource {}: not usable in a header",
                config.resource
            ));
        }
        let document = json!({
            "resource": config.resource,
            "authorization_servers": [config.issuer],
            "scopes_supported": config.scopes,
            "bearer_methods_supported": ["header"],
        });
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("--oauth-issuer: an HTTP client: {e}"))?;
        let jwks_uri = discover(&client, &issuer, &config.issuer).await?;
        let keys = fetch_keys(&client, &jwks_uri).await?;
        if keys.is_empty() {
            return Err(format!(
                "--oauth-issuer: no usable signing key at {jwks_uri}"
            ));
        }
        log!(
            Info,
            "auth: OAuth resource server {} for issuer {} ({} keys from {jwks_uri}); metadata at {metadata_url}",
            config.resource,
            config.issuer,
            keys.len()
        );
        Ok(Arc::new(OAuth {
            config: config.clone(),
            metadata_url,
            document: Bytes::from(document.to_string()),
            resource_path,
            jwks_uri,
            client,
            keys: RwLock::new(Arc::new(keys)),
            last_refetch: tokio::sync::Mutex::new(None),
        }))
    }

    /// Fetches the key set every [`REFRESH`], for as long as the runtime runs.
    pub(crate) fn spawn_refresh(self: &Arc<Self>) {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH).await;
                this.refresh().await;
            }
        });
    }

    async fn refresh(&self) {
        match fetch_keys(&self.client, &self.jwks_uri).await {
            Ok(keys) if !keys.is_empty() => {
                *self
                    .keys
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(keys);
            }
            Ok(_) => log!(
                Warn,
                "auth: {} has no usable key; the previous set is kept",
                self.jwks_uri
            ),
            Err(e) => log!(Warn, "auth: {e}; the previous key set is kept"),
        }
    }

    /// Fetches the key set again unless an unknown `kid` did so less than [`MIN_REFETCH`] ago.
    async fn refetch(&self) {
        let mut last = self.last_refetch.lock().await;
        if last.is_some_and(|t| t.elapsed() < MIN_REFETCH) {
            return;
        }
        *last = Some(Instant::now());
        self.refresh().await;
    }

    fn snapshot(&self) -> Arc<Vec<Key>> {
        Arc::clone(
            &self
                .keys
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Whether `path` is one of the metadata document's.
    pub(crate) fn is_metadata_path(&self, path: &str) -> bool {
        path == METADATA_PATH
            || path.strip_prefix(METADATA_PATH).is_some_and(|rest| {
                rest == "/mcp" || (!rest.is_empty() && rest == self.resource_path)
            })
    }

    /// The metadata document (RFC 9728), to anyone (GET or HEAD).
    pub(crate) fn metadata(&self, method: &Method) -> Response {
        if method != Method::GET && method != Method::HEAD {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let mut r = Response::new(Body::from(self.document.clone()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }

    /// The principal of a request's `Authorization` header, or the answer refusing it (the
    /// refusal is logged).
    pub(crate) async fn authorize(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<String, Response> {
        self.principal(authorization).await.map_err(|refusal| {
            match &refusal {
                Refusal::Missing => log!(Debug, "auth: refused a request without a bearer token"),
                Refusal::Invalid(why) => log!(Info, "auth: refused a token: {why}"),
                Refusal::Scope(missing) => {
                    log!(
                        Info,
                        "auth: refused a token without scope {}",
                        missing.join(" ")
                    );
                }
            }
            self.refusal(&refusal)
        })
    }

    /// Checks a request's `Authorization` header.
    ///
    /// # Errors
    /// The [`Refusal`], with its reason.
    pub(crate) async fn principal(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<String, Refusal> {
        let Some(value) = authorization else {
            return Err(Refusal::Missing);
        };
        let value = value.as_bytes();
        let Some(token) = value
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
            .map(|_| &value[7..])
        else {
            return Err(Refusal::Missing);
        };
        let token = std::str::from_utf8(token)
            .map_err(|_| Refusal::Invalid("the token is not text".into()))?
            .trim();
        if token.len() > MAX_TOKEN {
            return Err(Refusal::Invalid(format!(
                "a token longer than {MAX_TOKEN} bytes"
            )));
        }
        let head = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("not a JWT with a supported alg ({e})")))?;
        if !ALGORITHMS.contains(&head.alg) {
            return Err(Refusal::Invalid(format!(
                "alg {:?} is not accepted",
                head.alg
            )));
        }
        let mut keys = self.snapshot();
        let mut found = pick(&keys, head.kid.as_deref(), head.alg);
        // Only a `kid` the set does not have at all is worth a fetch (a known key used with
        // the wrong algorithm is refused as it is).
        let unknown = head
            .kid
            .as_deref()
            .is_some_and(|kid| !keys.iter().any(|k| k.kid.as_deref() == Some(kid)));
        if found.is_none() && unknown {
            self.refetch().await;
            keys = self.snapshot();
            found = pick(&keys, head.kid.as_deref(), head.alg);
        }
        let Some(key) = found else {
            return Err(Refusal::Invalid(format!(
                "no key of the issuer for kid {:?} and alg {:?}",
                head.kid.as_deref().unwrap_or("(none)"),
                head.alg
            )));
        };
        let mut validation = Validation::new(head.alg);
        validation.algorithms = vec![head.alg];
        validation.leeway = LEEWAY;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|e| Refusal::Invalid(reason(&e)))?
            .claims;
        let claim = &self.config.principal_claim;
        let principal = match claims.get(claim) {
            Some(Value::String(p))
                if !p.is_empty()
                    && p.len() <= MAX_PRINCIPAL
                    && !p.chars().any(char::is_control) =>
            {
                p.clone()
            }
            _ => {
                return Err(Refusal::Invalid(format!(
                    "claim {claim} is missing or not a name"
                )))
            }
        };
        let granted = scopes(&claims);
        let missing: Vec<String> = self
            .config
            .scopes
            .iter()
            .filter(|s| !granted.contains(&s.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::Scope(missing));
        }
        Ok(principal)
    }

    /// The `WWW-Authenticate` value of a refusal.
    pub(crate) fn challenge(&self, refusal: &Refusal) -> String {
        let url = &self.metadata_url;
        let scope = if self.config.scopes.is_empty() {
            String::new()
        } else {
            format!("scope=\"{}\", ", self.config.scopes.join(" "))
        };
        match refusal {
            Refusal::Missing => format!("Bearer {scope}resource_metadata=\"{url}\""),
            Refusal::Invalid(_) => {
                format!("Bearer error=\"invalid_token\", {scope}resource_metadata=\"{url}\"")
            }
            Refusal::Scope(_) => {
                format!("Bearer error=\"insufficient_scope\", {scope}resource_metadata=\"{url}\"")
            }
        }
    }

    fn refusal(&self, refusal: &Refusal) -> Response {
        let (status, message) = match refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: a bearer token is required",
            ),
            Refusal::Invalid(_) => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: the bearer token is not accepted",
            ),
            Refusal::Scope(_) => (
                StatusCode::FORBIDDEN,
                "Forbidden: the token lacks a required scope",
            ),
        };
        let mut r = super::http_error(status, ErrorCode::InvalidRequest, message, None);
        let value = HeaderValue::from_str(&self.challenge(refusal))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
        r.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        r
    }
}

/// The key for a token's `kid` and `alg`: of the algorithm's family and curve, not meant for
/// encryption, naming no other algorithm. Without a `kid`, the only such key, if there is one.
fn pick<'k>(keys: &'k [Key], kid: Option<&str>, alg: Algorithm) -> Option<&'k Key> {
    let fits = |k: &&Key| {
        let family = match &k.jwk.algorithm {
            AlgorithmParameters::RSA(_) => matches!(
                alg,
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            ),
            AlgorithmParameters::EllipticCurve(ec) => matches!(
                (&ec.curve, alg),
                (EllipticCurve::P256, Algorithm::ES256) | (EllipticCurve::P384, Algorithm::ES384)
            ),
            _ => false,
        };
        let named = k
            .jwk
            .common
            .key_algorithm
            .is_none_or(|a| a.to_string().parse::<Algorithm>().is_ok_and(|a| a == alg));
        let usable = !matches!(k.jwk.common.public_key_use, Some(PublicKeyUse::Encryption));
        family && named && usable
    };
    match kid {
        Some(kid) => keys
            .iter()
            .filter(fits)
            .find(|k| k.kid.as_deref() == Some(kid)),
        None => {
            let mut candidates = keys.iter().filter(fits);
            match (candidates.next(), candidates.next()) {
                (Some(k), None) => Some(k),
                _ => None,
            }
        }
    }
}

/// The scopes a token carries: `scope` (space-separated) or `scp` (a list or a string).
fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    let mut out = Vec::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            Some(Value::String(s)) => out.extend(s.split(' ').filter(|s| !s.is_empty())),
            Some(Value::Array(a)) => out.extend(a.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

/// A validation error as a reason for the log.
fn reason(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "expired (exp)".into(),
        K::ImmatureSignature => "not yet valid (nbf)".into(),
        K::InvalidAudience => "aud does not contain this resource".into(),
        K::InvalidIssuer => "iss is not the issuer".into(),
        K::InvalidSignature => "bad signature".into(),
        K::MissingRequiredClaim(c) => format!("no {c} claim"),
        K::InvalidAlgorithm => "alg does not fit the key".into(),
        other => format!("unreadable ({other:?})"),
    }
}

/// A URL the server may fetch from: https, or http to a loopback host.
fn fetchable(url: &str) -> Result<Url, String> {
    let u = Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let host = u.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match u.scheme() {
        "https" if u.host().is_some() => Ok(u),
        "http" if loopback => Ok(u),
        _ => Err(format!(
            "{url}: expected an https URL (http only to a loopback host)"
        )),
    }
}

/// GETs a JSON document of at most [`MAX_DOCUMENT`] bytes.
async fn get_json(client: &reqwest::Client, url: &Url) -> Result<Value, String> {
    let mut r = client
        .get(url.clone())
        .header(header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| format!("fetching {url}: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("fetching {url}: HTTP {}", r.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = r
        .chunk()
        .await
        .map_err(|e| format!("fetching {url}: {e}"))?
    {
        if body.len() + chunk.len() > MAX_DOCUMENT {
            return Err(format!("fetching {url}: larger than {MAX_DOCUMENT} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("fetching {url}: not JSON ({e})"))
}

/// The issuer's `jwks_uri`, from its authorization-server metadata (RFC 8414), else its
/// OpenID discovery document; the document's `issuer` must be the issuer.
async fn discover(client: &reqwest::Client, issuer: &Url, configured: &str) -> Result<Url, String> {
    let base = configured.trim_end_matches('/');
    let mut tried = Vec::new();
    for well_known in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let url = Url::parse(&format!("{base}{well_known}"))
            .map_err(|e| format!("--oauth-issuer {issuer}: {e}"))?;
        match get_json(client, &url).await {
            Ok(doc) => {
                if doc.get("issuer").and_then(Value::as_str) != Some(configured) {
                    return Err(format!(
                        "--oauth-issuer: {url} names another issuer ({})",
                        doc.get("issuer").unwrap_or(&Value::Null)
                    ));
                }
                let jwks = doc
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("--oauth-issuer: {url} has no jwks_uri"))?;
                return fetchable(jwks).map_err(|e| format!("--oauth-issuer: jwks_uri {e}"));
            }
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "--oauth-issuer: no metadata ({})",
        tried.join("; ")
    ))
}

/// The usable signing keys of the set at `url` (keys of other types are skipped).
async fn fetch_keys(client: &reqwest::Client, url: &Url) -> Result<Vec<Key>, String> {
    let doc = get_json(client, url).await?;
    let list = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{url}: not a JWK set"))?;
    let mut keys = Vec::new();
    for k in list {
        let Ok(jwk) = serde_json::from_value::<Jwk>(k.clone()) else {
            continue;
        };
        if !matches!(
            jwk.algorithm,
            AlgorithmParameters::RSA(_) | AlgorithmParameters::EllipticCurve(_)
        ) {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        keys.push(Key {
            kid: jwk.common.key_id.clone(),
            jwk,
            key,
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_is_fetched() {
        assert!(fetchable("https://id.example.com").is_ok());
        assert!(fetchable("http://127.0.0.1:8080").is_ok());
        assert!(fetchable("http://localhost:1/x").is_ok());
        assert!(fetchable("http://[::1]:1").is_ok());
        assert!(fetchable("http://id.example.com").is_err());
        assert!(fetchable("ftp://id.example.com").is_err());
        assert!(fetchable("not a url").is_err());
    }

    fn ec_key(kid: &str, extra: Value) -> Key {
        let mut v = json!({"kty": "EC", "kid": kid, "crv": "P-256",
            "x": "vUHXjsomvghBtCzYP0jwXEF9LwYWlA7glMmT2DbZY4A",
            "y": "88Jk3li2Fdoay4UHUcVJ7EIuqARVwZGTdgdhGAeLbbg"});
        for (k, x) in extra.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        let jwk: Jwk = serde_json::from_value(v).expect("a JWK");
        Key {
            kid: Some(kid.to_owned()),
            key: DecodingKey::from_jwk(&jwk).expect("a key"),
            jwk,
        }
    }

    #[test]
    fn a_key_is_picked_only_for_an_algorithm_of_its_family_and_use() {
        let keys = [
            ec_key("a", json!({"alg": "ES256", "use": "sig"})),
            ec_key("b", json!({"alg": "ES384"})),
            ec_key("c", json!({"use": "enc"})),
        ];
        let kid = |k: Option<&Key>| k.and_then(|k| k.kid.clone());
        assert_eq!(
            kid(pick(&keys, Some("a"), Algorithm::ES256)),
            Some("a".into())
        );
        // An EC key never verifies RSA, HMAC or another curve's algorithm.
        assert!(pick(&keys, Some("a"), Algorithm::RS256).is_none());
        assert!(pick(&keys, Some("a"), Algorithm::HS256).is_none());
        assert!(pick(&keys, Some("a"), Algorithm::ES384).is_none());
        // A key naming another alg, or meant for encryption, is not used.
        assert!(pick(&keys, Some("b"), Algorithm::ES256).is_none());
        assert!(pick(&keys, Some("c"), Algorithm::ES256).is_none());
        assert!(pick(&keys, Some("z"), Algorithm::ES256).is_none());
        // Without a kid: the only fitting key, else none.
        assert_eq!(kid(pick(&keys, None, Algorithm::ES256)), Some("a".into()));
        let two = [ec_key("a", json!({})), ec_key("d", json!({}))];
        assert!(pick(&two, None, Algorithm::ES256).is_none());
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let c = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(scopes(&c(json!({"scope": "a  b"}))), ["a", "b"]);
        assert_eq!(scopes(&c(json!({"scp": ["a", 1, "c"]}))), ["a", "c"]);
        assert!(scopes(&c(json!({"scope": 3}))).is_empty());
    }
}
