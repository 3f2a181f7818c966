"""Servers to follow tasks on (taskstream serve / connect / conformance-server, over stdio or
Streamable HTTP) and connections to them that a test can cut."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from pydantic import ConfigDict

import mcp.types as types
from mcp_task_events import TaskStreamConnection, tap_task_events
from mcp_task_events._compat import SDK_MAJOR, pending_requests

try:
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # older name
    from mcp.client.streamable_http import streamablehttp_client as http_client

BIN = os.environ.get("TASKSTREAM_BIN", "")
SERVE = ["serve", "--in-memory", "--durability", "none"]
SMALL = [*SERVE, "--max-events-per-task", "5"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Conn(TaskStreamConnection):
    """A connection a test can cut: the transport's read stream ends (as when the process or
    the socket is gone), then the connection is closed. Its tasks run on in the server."""

    _cut: Any = None
    _stop: Any = None

    async def cut(self) -> None:
        await self._cut()
        # The session answers its pending requests "connection closed" once it has read the
        # end of the stream; only then is the connection closed (closing it first would cancel
        # the session before it could).
        with anyio.fail_after(10):
            while pending_requests(self.session):
                await anyio.sleep(0.01)
        self._stop.set()


# The protocol eras the tests run in: 2025-11-25 (an initialize handshake, sessions), and on
# mcp 2.x also 2026-07-28 (server/discover, stateless requests, Tasks as the extension).
ERAS = ["legacy", "modern"] if SDK_MAJOR >= 2 else ["legacy"]
MODERN = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def modern_session_options() -> dict[str, Any]:
    """A 2026-07-28 session's options on mcp 2.x: the Tasks extension declared, and a claim on
    the `resultType: "task"` answer of a tools/call (the SDK's way to take an extension's result
    shape), so that `call_tool(..., allow_claimed=True)` answers the created task."""
    from typing import Literal

    from mcp.client.extension import ResultClaim
    from mcp_types import CallToolResult, Result
    from pydantic import Field

    class CreatedTask(Result):
        model_config = ConfigDict(extra="allow")
        result_type: Literal["task"] = Field(alias="resultType", default="task")
        task_id: str = Field(alias="taskId")

    async def unresolved(created: CreatedTask, ctx: Any) -> CallToolResult:
        raise RuntimeError("the tests take a task as it was created (allow_claimed=True)")

    claim = ResultClaim(result_type="task", model=CreatedTask, resolve=unresolved)
    return {"extensions": {TASKS_EXTENSION: {}}, "result_claims": {TASKS_EXTENSION: [claim]}}


@dataclass
class Connections:
    """Where a test's connections run (`tg`), and the era they speak."""

    tg: anyio.abc.TaskGroup
    era: str


async def open_connection(connections: Connections, target: list[str] | str) -> Conn:
    """Opens a connection: `target` is a stdio command line or an HTTP URL."""
    tg, era = connections.tg, connections.era
    ready = anyio.Event()
    stop = anyio.Event()
    box: dict[str, Any] = {}

    async def run() -> None:
        try:
            if isinstance(target, str):
                transport = http_client(target)
            else:
                transport = stdio_client(
                    StdioServerParameters(command=target[0], args=target[1:]), errlog=open(os.devnull, "w")
                )
            async with transport as streams:
                read, write = streams[0], streams[1]
                # A stream between the transport and the tap, so that a test can end it.
                middle_send, middle_receive = anyio.create_memory_object_stream[Any](math.inf)

                pump_scope = anyio.CancelScope()

                async def pump() -> None:
                    with pump_scope:
                        async with middle_send:
                            async for item in read:
                                await middle_send.send(item)

                async def cut() -> None:
                    # The pump stops and closes its end: the session reads end-of-stream, as
                    # from a transport whose process or socket is gone.
                    pump_scope.cancel()

                async with anyio.create_task_group() as inner:
                    inner.start_soon(pump)
                    async with tap_task_events(middle_receive) as (tapped, router):
                        if era == "modern":
                            # Declaring the Tasks extension: without it the server refuses
                            # tasks/stream (-32021).
                            session_cm = ClientSession(tapped, write, **modern_session_options())
                        else:
                            session_cm = ClientSession(tapped, write)
                        async with session_cm as session:
                            if era == "modern":
                                await session.discover()  # type: ignore[attr-defined]
                                assert session.protocol_version == MODERN, session.protocol_version  # type: ignore[attr-defined]
                            else:
                                await session.initialize()
                            box["conn"] = Conn(session, router, cut, stop)
                            ready.set()
                            await stop.wait()
                    inner.cancel_scope.cancel()
        except Exception as e:  # a cut connection may fail on its way out
            box.setdefault("error", e)
        finally:
            ready.set()

    tg.start_soon(run)
    with anyio.fail_after(20):
        await ready.wait()
    if "conn" not in box:
        raise RuntimeError(f"could not connect to {target}: {box.get('error')!r}")
    return box["conn"]


@pytest.fixture(params=ERAS)
async def connections(request: pytest.FixtureRequest) -> AsyncIterator[Connections]:
    async with anyio.create_task_group() as tg:
        yield Connections(tg, request.param)
        tg.cancel_scope.cancel()


class HttpServer:
    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [BIN, *args, "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("the server wrote no `listening on` line")
        # Keep draining its log so that it never blocks on a full pipe.
        import threading

        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


class ConnectServer:
    """`taskstream connect` on a data dir: each connection is a relay to the dir's background
    server, which keeps the tasks running when a connection drops."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="mcp-task-events-")
        self.target = [BIN, "connect", "--data-dir", self.dir, "--idle-exit", "30", "--durability", "none"]

    def close(self) -> None:
        subprocess.run([BIN, "connect", "--stop", "--data-dir", self.dir], capture_output=True, timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(params=["stdio", "http"])
def servers(request: pytest.FixtureRequest) -> Any:
    """(main target, small-retention target) for one transport."""
    if not BIN:
        pytest.fail("TASKSTREAM_BIN must name the taskstream binary")
    if request.param == "stdio":
        main = ConnectServer()
        yield main.target, [BIN, *SMALL]
        main.close()
    else:
        main_http = HttpServer(SERVE)
        small_http = HttpServer(SMALL)
        yield main_http.url, small_http.url
        main_http.close()
        small_http.close()


class _Params(types.RequestParams):
    model_config = ConfigDict(extra="allow")


class _Request(types.Request[_Params, str]):
    method: str
    params: _Params


class _Result(types.Result):
    model_config = ConfigDict(extra="allow")


async def start_emit(session: ClientSession, **arguments: Any) -> str:
    """Starts `emit` as a task and answers its id. 2026-07-28: the session declared the Tasks
    extension, and its claim takes the `resultType: "task"` answer. 2025-11-25: `params.task`;
    `mcp` 2.x, which has no SEP-1686 task API, would check the answer against `CallToolResult`,
    so there the request goes out through the session's dispatcher, stamped as the session
    stamps every request."""
    params: dict[str, Any] = {"name": "emit", "arguments": arguments, "task": {"ttl": 60000}}
    if SDK_MAJOR >= 2 and session.protocol_version == MODERN:  # type: ignore[attr-defined]
        # 2026-07-28: a tools/call of a client that declared the Tasks extension is a task, and
        # its result is a flat CreateTaskResult.
        created = await session.call_tool("emit", arguments, allow_claimed=True)  # type: ignore[call-overload]
        task = {"taskId": getattr(created, "task_id", None)}
    elif SDK_MAJOR >= 2:
        data: dict[str, Any] = {"method": "tools/call", "params": params}
        opts: dict[str, Any] = {}
        session._stamp(data, opts)  # type: ignore[attr-defined]
        raw = await session._dispatcher.send_raw_request("tools/call", data["params"], opts)  # type: ignore[attr-defined]
        task = raw.get("task") or {}
    else:
        r = await session.send_request(_Request(method="tools/call", params=_Params(**params)), _Result)
        task = (r.model_extra or {}).get("task") or {}
    assert isinstance(task.get("taskId"), str), task
    return task["taskId"]
