//! Newline framing (MCP stdio: one JSON-RPC message per line, no embedded newlines).
