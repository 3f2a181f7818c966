//! Who may talk to the HTTP endpoint: bearer tokens mapped to principals
//! (`--auth-token-file`), and `Host` / `Origin` validation against DNS rebinding.
//!
//! Deliberately not here: TLS (put a reverse proxy in front of a non-loopback bind) and rate
//! limits beyond the server's own (failed lookups, streams, running tasks).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// The tokens of `--auth-token-file`: token → principal.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    map: HashMap<String, String>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print a token.
        write!(f, "Tokens({} entries)", self.map.len())
    }
}

/// Why a token file was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenFileError {
    /// A line is not `TOKEN PRINCIPAL`.
    #[error("line {0}: expected `TOKEN PRINCIPAL`")]
    BadLine(usize),
    /// A token appears twice.
    #[error("line {0}: this token was given before")]
    Duplicate(usize),
    /// No token at all.
    #[error("no token in the file")]
    Empty,
}

impl Tokens {
    /// Parses the file's text: one `TOKEN PRINCIPAL` per line; blank lines and lines starting
    /// with `#` are skipped.
    ///
    /// # Errors
    /// [`TokenFileError`], naming the line (never its content).
    pub(crate) fn parse(text: &str) -> Result<Tokens, TokenFileError> {
        let mut map = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(token), Some(principal), None) = (words.next(), words.next(), words.next())
            else {
                return Err(TokenFileError::BadLine(i + 1));
            };
            if map.insert(token.to_owned(), principal.to_owned()).is_some() {
                return Err(TokenFileError::Duplicate(i + 1));
            }
        }
        if map.is_empty() {
            return Err(TokenFileError::Empty);
        }
        Ok(Tokens { map })
    }

    /// The principal of an `Authorization` header value, if it is `Bearer <known token>`.
    /// Every known token is compared in full, in constant time per byte, so the time taken
    /// does not tell how much of a guess was right.
    pub(crate) fn principal(&self, authorization: Option<&[u8]>) -> Option<&str> {
        let value = authorization?;
        let token = value
            .strip_prefix(b"Bearer ")
            .or_else(|| value.strip_prefix(b"bearer "))?;
        let mut found = None;
        for (known, principal) in &self.map {
            if constant_time_eq(known.as_bytes(), token) {
                found = Some(principal.as_str());
            }
        }
        found
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `Host` and `Origin` values this server answers to.
#[derive(Clone, Debug)]
pub(crate) struct Origins {
    /// Accepted `Host` values (lowercase, with port).
    hosts: Vec<String>,
    /// Accepted `Origin` values (lowercase, scheme://host:port).
    origins: Vec<String>,
    /// Bound to every interface (`0.0.0.0`, `::`): the server has no one name, so `Host` is
    /// not restricted (such a bind requires tokens, which a rebinding page does not have);
    /// `Origin` still is.
    any_host: bool,
}

impl Origins {
    /// The bound address (and, on loopback, `localhost` and the other loopback spelling)
    /// plus each `--allowed-origin` (whose host is then an accepted `Host` too).
    pub(crate) fn new(bound: SocketAddr, extra: &[String]) -> Origins {
        let port = bound.port();
        let mut hosts = vec![host_of(bound.ip(), port)];
        if bound.ip().is_loopback() {
            hosts.push(format!("localhost:{port}"));
            hosts.push(format!("127.0.0.1:{port}"));
            hosts.push(format!("[::1]:{port}"));
        }
        let mut origins: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
        for o in extra {
            let o = o.trim_end_matches('/').to_ascii_lowercase();
            if let Some((_, rest)) = o.split_once("://") {
                hosts.push(rest.to_owned());
            }
            origins.push(o);
        }
        hosts.sort();
        hosts.dedup();
        Origins {
            hosts,
            origins,
            any_host: bound.ip().is_unspecified(),
        }
    }

    /// Whether a request with these headers may be served (DNS-rebinding protection): `Host`
    /// must be one of ours (a missing `Host` is refused), and an `Origin`, when sent, too.
    pub(crate) fn allows(&self, host: Option<&[u8]>, origin: Option<&[u8]>) -> bool {
        let Some(host) = host.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        if !self.any_host && !self.hosts.contains(&host) {
            return false;
        }
        match origin {
            None => true,
            Some(o) => std::str::from_utf8(o).is_ok_and(|o| {
                let o = o.trim_end_matches('/').to_ascii_lowercase();
                self.origins.contains(&o)
            }),
        }
    }
}

fn host_of(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_parse_and_bad_lines_are_named() {
        let t = Tokens::parse("# comment\n\nabc alice\n  def   bob  \n").unwrap();
        assert_eq!(t.principal(Some(b"Bearer abc")), Some("alice"));
        assert_eq!(t.principal(Some(b"Bearer def")), Some("bob"));
        assert_eq!(t.principal(Some(b"Bearer ab")), None);
        assert_eq!(t.principal(Some(b"Bearer abcd")), None);
        assert_eq!(t.principal(Some(b"Basic abc")), None);
        assert_eq!(t.principal(None), None);
        assert_eq!(
            Tokens::parse("abc\n").unwrap_err(),
            TokenFileError::BadLine(1)
        );
        assert_eq!(
            Tokens::parse("a b\nc d e\n").unwrap_err(),
            TokenFileError::BadLine(2)
        );
        assert_eq!(
            Tokens::parse("a b\na c\n").unwrap_err(),
            TokenFileError::Duplicate(2)
        );
        assert_eq!(Tokens::parse("# x\n").unwrap_err(), TokenFileError::Empty);
        assert_eq!(format!("{t:?}"), "Tokens(2 entries)");
    }

    #[test]
    fn hosts_and_origins_are_checked() {
        let o = Origins::new(
            "127.0.0.1:8080".parse().unwrap(),
            &["https://app.example.com".to_owned()],
        );
        assert!(o.allows(Some(b"127.0.0.1:8080"), None));
        assert!(o.allows(Some(b"LOCALHOST:8080"), Some(b"http://localhost:8080")));
        assert!(o.allows(Some(b"[::1]:8080"), None));
        assert!(o.allows(Some(b"app.example.com"), Some(b"https://app.example.com")));
        assert!(!o.allows(Some(b"evil.example:8080"), None));
        assert!(!o.allows(Some(b"127.0.0.1:8081"), None));
        assert!(!o.allows(None, None));
        assert!(!o.allows(Some(b"127.0.0.1:8080"), Some(b"http://evil.example")));
        assert!(!o.allows(Some(b"127.0.0.1:8080"), Some(b"null")));
        // Every interface: any Host (tokens are required there), but Origin still checked.
        let any = Origins::new(
            "0.0.0.0:8443".parse().unwrap(),
            &["https://mcp.example.com".to_owned()],
        );
        assert!(any.allows(Some(b"mcp.example.com"), None));
        assert!(any.allows(Some(b"10.1.2.3:8443"), None));
        assert!(any.allows(Some(b"mcp.example.com"), Some(b"https://mcp.example.com")));
        assert!(!any.allows(Some(b"mcp.example.com"), Some(b"https://evil.example")));
        assert!(!any.allows(None, None));
    }
}
