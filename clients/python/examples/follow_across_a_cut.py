"""The README's demo, runnable: follows a running task across a dropped connection.

    taskstream serve --in-memory --http 127.0.0.1:8080 &
    python examples/follow_across_a_cut.py http://127.0.0.1:8080/mcp

Starts `emit {count: 20, interval_ms: 50}` as a task, follows it, drops the connection after
seq 5 while the task runs, and goes on through `reconnect` on a new one. Prints each event as it
is processed and exits non-zero unless every event was processed exactly once.

On `mcp` 1.x it speaks 2025-11-25 (an initialize handshake; the task started with the SDK's
SEP-1686 `call_tool_as_task`); on `mcp` 2.x, 2026-07-28 (`server/discover`, the Tasks extension
declared, the `resultType: "task"` answer taken through a `ResultClaim`).
"""

import logging
import sys
import tempfile
import warnings

from typing import Any, Literal

import anyio
import anyio.abc
from mcp import ClientSession
from pydantic import ConfigDict, Field

from mcp_task_events import FileCursorStore, TaskStreamConnection, follow_task, tap_task_events

try:  # mcp 2.x
    from mcp.client.extension import ResultClaim
    from mcp.client.streamable_http import streamable_http_client as http_client
    from mcp_types import CallToolResult, Result

    TASKS = "io.modelcontextprotocol/tasks"

    class CreatedTask(Result):
        """2026-07-28: a tools/call that became a task answers a flat CreateTaskResult."""

        model_config = ConfigDict(extra="allow")
        result_type: Literal["task"] = Field(alias="resultType", default="task")
        task_id: str = Field(alias="taskId")

    async def _unresolved(created: CreatedTask, ctx: Any) -> CallToolResult:
        raise RuntimeError("the demo takes the task as it was created (allow_claimed=True)")

    SESSION_OPTIONS: dict[str, Any] = {
        "extensions": {TASKS: {}},
        "result_claims": {TASKS: [ResultClaim(result_type="task", model=CreatedTask, resolve=_unresolved)]},
    }
    MODERN = True
except ImportError:  # mcp 1.x
    from mcp.client.streamable_http import streamablehttp_client as http_client  # type: ignore[no-redef]

    SESSION_OPTIONS = {}
    MODERN = False

# mcp 1.x marks its SEP-1686 (2025-11-25) task API experimental and deprecated; it is the era
# this SDK version speaks.
warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*experimental tasks API.*")
# When the demo drops its first connection, the SDK's HTTP reader logs (with a traceback) the
# event it could no longer hand to the closed session; that is the drop itself, not an error.
logging.getLogger("mcp.client.streamable_http").setLevel(logging.CRITICAL)


async def open_connection(tg: anyio.abc.TaskGroup, url: str) -> tuple[TaskStreamConnection, anyio.Event]:
    """A connection that lives in a task of `tg` until the event answered with it is set."""
    ready, close = anyio.Event(), anyio.Event()
    box: list[TaskStreamConnection] = []

    async def run() -> None:
        async with http_client(url) as streams:
            async with tap_task_events(streams[0]) as (read, events):
                async with ClientSession(read, streams[1], **SESSION_OPTIONS) as session:
                    if MODERN:
                        await session.discover()
                    else:
                        await session.initialize()
                    box.append(TaskStreamConnection(session, events))
                    ready.set()
                    await close.wait()

    tg.start_soon(run)
    await ready.wait()
    return box[0], close


async def main(url: str) -> int:
    async with anyio.create_task_group() as tg:
        first, drop_first = await open_connection(tg, url)
        if MODERN:
            created = await first.session.call_tool("emit", {"count": 20, "interval_ms": 50}, allow_claimed=True)
            task_id = created.task_id
        else:
            created = await first.session.experimental.call_tool_as_task("emit", {"count": 20, "interval_ms": 50})
            task_id = created.task.taskId

        async def connect() -> TaskStreamConnection:
            return (await open_connection(tg, url))[0]

        seen: list[int] = []
        with tempfile.TemporaryDirectory() as cursor_dir:
            # --- the demo, as in the README ----------------------------------------------------
            async with follow_task(first, task_id,
                                   cursors=FileCursorStore(cursor_dir),
                                   reconnect=lambda lost, error: connect(),
                                   on_events_gone="recover") as follow:
                async for event in follow:
                    print(event.seq, event.type, event.payload, flush=True)
                    seen.append(event.seq)
                    if event.seq == 5:
                        drop_first.set()  # the connection drops here; the task runs on
            print("task ended", follow.outcome.status)
            # -------------------------------------------------------------------------------------
        once = seen == list(range(22))
        print(f"{len(seen)} events, {'each processed once, in order' if once else f'NOT each once: {seen}'}; "
              f"{follow.stats.reconnects} reconnect(s), streams opened with after = {follow.stats.afters}")
        tg.cancel_scope.cancel()
    return 0 if once and follow.stats.reconnects >= 1 and follow.outcome.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/mcp"))
