"""The cursor store is the host's to choose, and is committed only after the host's handler
returned for the event (RS-08): against `taskstream conformance-server` (no fault)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from conftest import BIN, open_connection, start_emit
from mcp_task_events import FileCursorStore, follow_task

pytestmark = pytest.mark.anyio


class HostStore:
    """A host's own store (async), logging when it saves."""

    def __init__(self, log: list[str]) -> None:
        self.saved: dict[str, int] = {}
        self.log = log

    async def load(self, task_id: str) -> int | None:
        return self.saved.get(task_id)

    async def save(self, task_id: str, seq: int) -> None:
        self.log.append(f"save {seq}")
        self.saved[task_id] = seq


async def test_host_store_saved_after_the_handler_returned(connections) -> None:
    conn = await open_connection(connections, [BIN, "conformance-server"])
    task_id = await start_emit(conn.session, count=6, interval_ms=10)
    log: list[str] = []
    store = HostStore(log)

    async def handler(event) -> None:
        log.append(f"handle {event.seq}")
        await anyio.sleep(0)
        if event.seq == 3:
            raise RuntimeError("the host failed on seq 3")
        log.append(f"handled {event.seq}")

    with pytest.raises(RuntimeError, match="the host failed on seq 3"):
        async with follow_task(conn, task_id, cursors=store) as follow:
            await follow.run(handler)
    assert log == [
        "handle 0", "handled 0", "save 0", "handle 1", "handled 1", "save 1",
        "handle 2", "handled 2", "save 2", "handle 3",
    ]
    assert store.saved[task_id] == 2
    # The next follow (the host restarted, say) starts after seq 2: seq 3 comes again.
    async with follow_task(conn, task_id, cursors=store) as rest:
        assert [e.seq async for e in rest] == list(range(3, 8))
    assert store.saved[task_id] == 7


async def test_file_cursor_store(tmp_path: Path) -> None:
    store = FileCursorStore(tmp_path)
    assert await store.load("t-1") is None
    await store.save("t-1", 41)
    await store.save("t-1", 42)
    assert await store.load("t-1") == 42
    assert json.loads((tmp_path / f"{b't-1'.hex()}.cursor").read_text()) == {"taskId": "t-1", "seq": 42}
    with pytest.raises(ValueError):
        store.path_of("")


def test_runs_on_the_sdk_major_asked_for() -> None:
    """The compatibility layer picked the installed SDK's major, and it is the one the test run
    asked for (scripts/clients runs these tests on mcp 1.x and on 2.x)."""
    import importlib.metadata
    import os

    from mcp_task_events._compat import SDK_MAJOR

    installed = int(importlib.metadata.version("mcp").split(".")[0])
    assert SDK_MAJOR == installed
    want = os.environ.get("EXPECT_MCP_MAJOR")
    if want is not None:
        assert SDK_MAJOR == int(want), f"asked for mcp {want}.x, running on {importlib.metadata.version('mcp')}"
