"""What differs between the ``mcp`` SDK majors (1.x and 2.x) that this package touches, in one
place: the error class, the JSON-RPC message envelope, and who cancels an abandoned request."""

from __future__ import annotations

from typing import Any

from mcp import ClientSession

try:  # mcp 2.x
    from mcp.shared.exceptions import MCPError as McpError

    SDK_MAJOR = 2
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError  # type: ignore[attr-defined,no-redef]

    SDK_MAJOR = 1

__all__ = ["SDK_MAJOR", "McpError", "jsonrpc_message", "next_request_id", "pending_requests"]


def jsonrpc_message(message: Any) -> Any:
    """The JSON-RPC message itself: ``mcp`` 1.x wraps it in a root model, 2.x does not."""
    return getattr(message, "root", message)


def next_request_id(session: ClientSession) -> Any:
    """The id the session's next request will carry, so that the caller can cancel it with
    ``notifications/cancelled`` (``mcp`` 1.x); None on ``mcp`` 2.x, whose dispatcher sends that
    notification itself when a request's waiter is cancelled."""
    if SDK_MAJOR >= 2:
        return None
    return getattr(session, "_request_id", None)


def pending_requests(session: ClientSession) -> int:
    """How many of the session's requests still wait for their response."""
    if SDK_MAJOR >= 2:
        return len(getattr(session._dispatcher, "_pending", {}))  # type: ignore[attr-defined]
    return len(getattr(session, "_response_streams", {}))
