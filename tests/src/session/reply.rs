//! Answers as received: results, JSON-RPC errors, and the ways a connection can break.

use std::fmt;

use serde_json::Value;

use super::abbreviate;

/// A JSON-RPC error object, as received.
#[derive(Clone, Debug)]
pub(crate) struct ReceivedError {
    pub(crate) code: Option<i64>,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl ReceivedError {
    pub(super) fn parse(error: &Value) -> ReceivedError {
        ReceivedError {
            code: error.get("code").and_then(Value::as_i64),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            data: error.get("data").cloned(),
        }
    }
}

impl fmt::Display for ReceivedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "error {code}")?,
            None => f.write_str("error without an integer code")?,
        }
        if !self.message.is_empty() {
            write!(f, " {:?}", self.message)?;
        }
        Ok(())
    }
}

/// The answer to a request.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    Result(Value),
    Error(ReceivedError),
}

impl Reply {
    /// The error code, when the reply is an error with one.
    pub(crate) fn error_code(&self) -> Option<i64> {
        match self {
            Reply::Error(error) => error.code,
            Reply::Result(_) => None,
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Result(value) => write!(f, "result {}", abbreviate(value)),
            Reply::Error(error) => error.fmt(f),
        }
    }
}

/// The connection could not go on.
#[derive(Clone, Debug)]
pub(crate) enum Broken {
    /// No answer within the timeout.
    Timeout(String),
    /// The server exited; its last stderr line.
    Exited(String),
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::Timeout(what) => f.write_str(what),
            Broken::Exited(what) => f.write_str(what),
        }
    }
}

/// Why a session could not be opened.
#[derive(Clone, Debug)]
pub(crate) enum ConnectError {
    /// The server does not speak this era (its handshake or discovery was refused).
    NotSpoken(String),
    /// The server could not be started, or stopped answering.
    Failed(String),
}
