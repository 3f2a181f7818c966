"""The README's demo, runnable: follows a running task across a dropped connection.

    taskstream serve --in-memory --http 127.0.0.1:8080 &
    python examples/follow_across_a_cut.py http://127.0.0.1:8080/mcp

Starts `emit {count: 20, interval_ms: 50}` as a task, follows it, drops the connection after
seq 5 while the task runs, and goes on through `reconnect` on a new one. Prints each event as it
is processed and exits non-zero unless every event was processed exactly once.
"""

import logging
import sys
import tempfile
import warnings

import anyio
import anyio.abc
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from mcp_task_events import FileCursorStore, TaskStreamConnection, follow_task, tap_task_events

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
        async with streamablehttp_client(url) as (read, write, _):
            async with tap_task_events(read) as (read, events):
                async with ClientSession(read, write) as session:
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
