//! `serve --http --oauth-issuer`: the server as an OAuth 2.1 resource server, against a real
//! issuer the test starts on loopback (axum serving its metadata and key set; tokens signed
//! with `ring` using the RSA and EC test keys of `oauth_keys/`: the JWTs are built by hand,
//! so that the malformed ones can be too).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use serde_json::{json, Value};

use super::client::{http, Server, Session};

const RESOURCE: &str = "https://mcp.example.test/mcp";
const METADATA: &str = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp";
const SCOPE: &str = "mcp:tasks";

fn key_file(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/http/oauth_keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).expect("a test key")
}

fn jwk(name: &str) -> Value {
    serde_json::from_slice(&key_file(&format!("{name}.jwk.json"))).expect("a JWK")
}

/// The issuer: its metadata, its key set (which the test may change), and how often the key
/// set was fetched.
struct Issuer {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    jwks_fetches: Arc<AtomicU64>,
}

#[derive(Clone)]
struct IssuerState {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicU64>,
}

impl Issuer {
    /// Serves `/.well-known/<well_known>` and `/jwks` on a loopback port, until the runtime ends.
    async fn start(well_known: &str, keys: Vec<Value>) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = IssuerState {
            url: url.clone(),
            keys: Arc::new(Mutex::new(keys)),
            fetches: Arc::new(AtomicU64::new(0)),
        };
        let app = axum::Router::new()
            .route(
                &format!("/.well-known/{well_known}"),
                get(|State(s): State<IssuerState>| async move {
                    as_json(&json!({
                        "issuer": s.url,
                        "jwks_uri": format!("{}/jwks", s.url),
                        "response_types_supported": ["code"],
                    }))
                }),
            )
            .route(
                "/jwks",
                get(|State(s): State<IssuerState>| async move {
                    s.fetches.fetch_add(1, Ordering::SeqCst);
                    let keys = s.keys.lock().expect("keys").clone();
                    as_json(&json!({ "keys": keys }))
                }),
            )
            .with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Issuer {
            url,
            keys: state.keys,
            jwks_fetches: state.fetches,
        }
    }

    /// A token signed with the key `key` (`rsa-a`, `rsa-b`, `ec-a`), with these claims over
    /// the valid defaults.
    fn token(&self, key: &str, claims: Value) -> String {
        let now = now();
        let mut c = json!({
            "iss": self.url, "aud": RESOURCE, "sub": "alice", "scope": SCOPE,
            "iat": now, "nbf": now, "exp": now + 600,
        });
        for (k, v) in claims.as_object().expect("claims") {
            if v.is_null() {
                c.as_object_mut().expect("object").remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        let alg = if key.starts_with("ec") {
            "ES256"
        } else {
            "RS256"
        };
        sign(&json!({"alg": alg, "typ": "JWT", "kid": key}), &c, key)
    }
}

/// A JWT of this header and claims signed with the test key `key` (`rsa-*`: RS256, `ec-*`:
/// ES256, `hs:<file>`: HS256 with the file's bytes as the secret).
fn sign(header: &Value, claims: &Value, key: &str) -> String {
    use ring::signature as rs;
    let input = format!("{}.{}", b64(header), b64(claims));
    let rng = ring::rand::SystemRandom::new();
    let signature = if let Some(file) = key.strip_prefix("hs:") {
        let secret = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key_file(file));
        ring::hmac::sign(&secret, input.as_bytes())
            .as_ref()
            .to_vec()
    } else if key.starts_with("ec") {
        let pair = rs::EcdsaKeyPair::from_pkcs8(
            &rs::ECDSA_P256_SHA256_FIXED_SIGNING,
            &key_file(&format!("{key}.pk8")),
            &rng,
        )
        .expect("EC key");
        pair.sign(&rng, input.as_bytes())
            .expect("sign")
            .as_ref()
            .to_vec()
    } else {
        let pair = rs::RsaKeyPair::from_pkcs8(&key_file(&format!("{key}.pk8"))).expect("RSA key");
        let mut sig = vec![0; pair.public().modulus_len()];
        pair.sign(&rs::RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
            .expect("sign");
        sig
    };
    format!("{input}.{}", base64url(&signature))
}

/// A JSON response.
fn as_json(v: &Value) -> ([(&'static str, &'static str); 1], String) {
    ([("content-type", "application/json")], v.to_string())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// A JSON value as a JWT part.
fn b64(v: &Value) -> String {
    base64url(v.to_string().as_bytes())
}

/// Base64url without padding (RFC 7515 §2).
fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(A[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

async fn start_server(issuer: &Issuer, extra: &[&str]) -> Server {
    let mut args: Vec<String> = [
        "--oauth-issuer",
        &issuer.url,
        "--oauth-resource",
        RESOURCE,
        "--oauth-scope",
        SCOPE,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::start(&args)
    })
    .await
    .expect("server")
}

/// A `ping` POST with this `Authorization` value: its status and `WWW-Authenticate`.
async fn ping(url: &str, authorization: Option<&str>) -> (u16, Option<String>) {
    let mut r = http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(a) = authorization {
        r = r.header("authorization", a);
    }
    let r = r
        .body(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "oauth-test", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .expect("send");
    let challenge = r
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (r.status().as_u16(), challenge)
}

fn invalid_token() -> Option<String> {
    Some(format!(
        "Bearer error=\"invalid_token\", scope=\"{SCOPE}\", resource_metadata=\"{METADATA}\""
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_the_issuer_are_checked_and_refusals_point_to_the_metadata() {
    let issuer = Issuer::start(
        "oauth-authorization-server",
        vec![jwk("rsa-a"), jwk("ec-a")],
    )
    .await;
    let server = start_server(&issuer, &[]).await;
    let url = &server.url;

    // No token: 401 pointing to the metadata, which anyone may read.
    assert_eq!(
        ping(url, None).await,
        (
            401,
            Some(format!(
                "Bearer scope=\"{SCOPE}\", resource_metadata=\"{METADATA}\""
            ))
        )
    );
    let base = url.trim_end_matches("/mcp");
    let expected = json!({
        "resource": RESOURCE,
        "authorization_servers": [issuer.url],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
    });
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = http()
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("metadata");
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(
            r.headers().get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );
        let doc: Value = r.json().await.expect("json");
        assert_eq!(doc, expected, "{path}");
    }
    // Host checks still apply to it.
    let r = http()
        .get(format!("{base}/.well-known/oauth-protected-resource"))
        .header("host", "evil.example")
        .send()
        .await
        .expect("metadata");
    assert_eq!(r.status(), 403);

    // Valid tokens, RSA and EC.
    for key in ["rsa-a", "ec-a"] {
        let t = issuer.token(key, json!({}));
        assert_eq!(
            ping(url, Some(&format!("Bearer {t}"))).await.0,
            200,
            "{key}"
        );
    }
    // Within the leeway (30 s) on both sides.
    let t = issuer.token("rsa-a", json!({"exp": now() - 5, "nbf": now() + 5}));
    assert_eq!(ping(url, Some(&format!("Bearer {t}"))).await.0, 200);

    // Refused tokens: 401 invalid_token.
    let other = "http://127.0.0.1:1";
    let refused = [
        (
            "expired",
            issuer.token("rsa-a", json!({"exp": now() - 120})),
        ),
        (
            "not yet valid",
            issuer.token("rsa-a", json!({"nbf": now() + 300})),
        ),
        (
            "wrong audience",
            issuer.token("rsa-a", json!({"aud": "https://other.example/mcp"})),
        ),
        (
            "audience list without us",
            issuer.token(
                "rsa-a",
                json!({"aud": ["https://a.example", "https://b.example"]}),
            ),
        ),
        ("wrong issuer", issuer.token("rsa-a", json!({"iss": other}))),
        ("no exp", issuer.token("rsa-a", json!({"exp": null}))),
        ("no sub", issuer.token("ec-a", json!({"sub": null}))),
        ("tampered", {
            let t = issuer.token("rsa-a", json!({}));
            let mut parts: Vec<String> = t.split('.').map(str::to_owned).collect();
            parts[1] = base64url(json!({"iss": issuer.url, "aud": RESOURCE, "sub": "root", "scope": SCOPE, "exp": now() + 600}).to_string().as_bytes());
            parts.join(".")
        }),
        (
            "alg none",
            format!(
                "{}.{}.",
                b64(&json!({"alg": "none", "typ": "JWT", "kid": "rsa-a"})),
                b64(
                    &json!({"iss": issuer.url, "aud": RESOURCE, "sub": "alice", "scope": SCOPE, "exp": now() + 600})
                )
            ),
        ),
        ("HS256 with the public key as secret", {
            let claims = json!({"iss": issuer.url, "aud": RESOURCE, "sub": "alice", "scope": SCOPE, "exp": now() + 600});
            sign(
                &json!({"alg": "HS256", "typ": "JWT", "kid": "rsa-a"}),
                &claims,
                "hs:rsa-a.pub.pem",
            )
        }),
        ("RS256 header on the EC key", {
            let t = issuer.token("rsa-a", json!({}));
            let mut parts: Vec<String> = t.split('.').map(str::to_owned).collect();
            parts[0] = b64(&json!({"alg": "RS256", "typ": "JWT", "kid": "ec-a"}));
            parts.join(".")
        }),
        ("not a JWT", "abc".to_owned()),
    ];
    for (case, token) in &refused {
        assert_eq!(
            ping(url, Some(&format!("Bearer {token}"))).await,
            (401, invalid_token()),
            "{case}"
        );
    }
    // Another scheme is no bearer token.
    assert_eq!(ping(url, Some("Basic YWxpY2U6cHc=")).await.0, 401);

    // A valid token without the required scope: 403.
    let t = issuer.token("rsa-a", json!({"scope": "mcp:read other"}));
    assert_eq!(
        ping(url, Some(&format!("Bearer {t}"))).await,
        (
            403,
            Some(format!(
                "Bearer error=\"insufficient_scope\", scope=\"{SCOPE}\", resource_metadata=\"{METADATA}\""
            ))
        )
    );
    assert_eq!(
        issuer.jwks_fetches.load(Ordering::SeqCst),
        1,
        "fetched once at start"
    );

    // The issuer rotates its keys: a token of the new key makes the server fetch them again.
    *issuer.keys.lock().expect("keys") = vec![jwk("rsa-b")];
    let t = issuer.token("rsa-b", json!({}));
    assert_eq!(ping(url, Some(&format!("Bearer {t}"))).await.0, 200);
    assert_eq!(
        issuer.jwks_fetches.load(Ordering::SeqCst),
        2,
        "refetched on the new kid"
    );
    // The withdrawn key is no longer trusted.
    let t = issuer.token("rsa-a", json!({}));
    assert_eq!(
        ping(url, Some(&format!("Bearer {t}"))).await,
        (401, invalid_token())
    );
    // Made-up kids do not make the server fetch again at once (bounded refresh rate).
    for i in 0..5 {
        let mut parts: Vec<String> = issuer
            .token("rsa-b", json!({}))
            .split('.')
            .map(str::to_owned)
            .collect();
        parts[0] = b64(&json!({"alg": "RS256", "typ": "JWT", "kid": format!("made-up-{i}")}));
        let t = parts.join(".");
        assert_eq!(
            ping(url, Some(&format!("Bearer {t}"))).await,
            (401, invalid_token())
        );
    }
    assert_eq!(
        issuer.jwks_fetches.load(Ordering::SeqCst),
        2,
        "no fetch per made-up kid"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_subject_is_its_own_principal_and_another_claim_may_name_it() {
    let issuer = Issuer::start("openid-configuration", vec![jwk("rsa-a")]).await;
    // Found through OpenID discovery (no RFC 8414 document), principal from `email`.
    let server = start_server(&issuer, &["--oauth-principal-claim", "email"]).await;
    let alice = issuer.token("rsa-a", json!({"sub": "s1", "email": "alice@example.test"}));
    let bob = issuer.token("rsa-a", json!({"sub": "s1", "email": "bob@example.test"}));
    let no_email = issuer.token("rsa-a", json!({"sub": "s1"}));
    assert_eq!(
        ping(&server.url, Some(&format!("Bearer {no_email}"))).await,
        (401, invalid_token())
    );
    let alice = Session::open(&server.url, Some(&alice)).await;
    let bob = Session::open(&server.url, Some(&bob)).await;
    let task = alice.emit(3, 0).await;
    let unknown = "0123456789abcdef0123456789abcdef";
    let get = |s: &Session, id: &str| {
        s.post(json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"taskId": id}}))
            .send()
    };
    let foreign = get(&bob, &task).await.expect("send");
    let missing = get(&bob, unknown).await.expect("send");
    assert_eq!(foreign.status(), missing.status());
    let (f, m) = (
        foreign.bytes().await.expect("body"),
        missing.bytes().await.expect("body"),
    );
    assert_eq!(f, m, "another subject's task is an unknown task");
    assert_ne!(alice.status(&task).await, "");
}

#[test]
fn oauth_options_are_checked() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_taskstream"))
            .args(["serve", "--in-memory", "--http", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("run");
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&[
        "--oauth-issuer",
        "https://id.example",
        "--oauth-resource",
        RESOURCE,
        "--auth-token-file",
        "/dev/null",
    ]);
    assert!(err.contains("cannot be used with"), "{err}");
    let err = run(&[
        "--oauth-issuer",
        "http://id.example",
        "--oauth-resource",
        RESOURCE,
    ]);
    assert!(
        err.contains("--oauth-issuer") && err.contains("https"),
        "{err}"
    );
    // An issuer that cannot be reached: the server does not start, and says why.
    let err = run(&[
        "--oauth-issuer",
        "http://127.0.0.1:1",
        "--oauth-resource",
        RESOURCE,
    ]);
    assert!(err.contains("no metadata"), "{err}");
}
