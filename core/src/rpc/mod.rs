//! Sans-IO JSON-RPC for the stream messages.
