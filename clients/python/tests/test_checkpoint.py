"""A follow that starts from a checkpoint after a gap tells the host so (the task's state is in
the checkpoint, covering the events the host never saw): against a scripted server that holds
a task as `taskstream serve --retain-from-checkpoint` keeps it (tests/checkpoint_server.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import BIN, SERVE, ConnectServer, Connections, HttpServer, open_connection, start_emit
from mcp_task_events import EventsGoneError, MemoryCursorStore, follow_task

pytestmark = pytest.mark.anyio
SERVER = [sys.executable, str(Path(__file__).with_name("checkpoint_server.py"))]


async def connect(connections: Connections):
    # The scripted server speaks 2025-11-25 only.
    return await open_connection(Connections(connections.tg, "legacy"), SERVER)


async def test_a_late_joiner_starts_from_the_checkpoint(connections) -> None:
    conn = await connect(connections)
    async with follow_task(conn, "t-1", on_events_gone="recover") as follow:
        events = [e async for e in follow]
    assert [e.seq for e in events] == [5, 6, 7]
    first = events[0]
    assert first.from_checkpoint and first.checkpoint is not None
    assert (first.checkpoint.covers_through, first.checkpoint.state) == (4, {"ticks": 4})
    assert first.after_gap is not None and (first.after_gap.first, first.after_gap.last) == (0, 4)
    assert [e.from_checkpoint for e in events[1:]] == [False, False]
    assert follow.stats.checkpoint_starts == [5]
    assert follow.outcome.status == "completed"


async def test_events_gone_recovered_at_the_checkpoint(connections) -> None:
    conn = await connect(connections)
    stale = MemoryCursorStore()
    stale.save("t-1", 1)
    async with follow_task(conn, "t-1", cursors=stale, on_events_gone="recover") as follow:
        events = [e async for e in follow]
    assert [e.seq for e in events] == [5, 6, 7]
    assert events[0].from_checkpoint
    assert (events[0].after_gap.first, events[0].after_gap.last) == (2, 4)
    assert follow.stats.checkpoint_starts == [5]
    # Under "fail" the gap is still an error: a checkpoint does not make it silent.
    stale.save("t-1", 1)
    with pytest.raises(EventsGoneError) as gone:
        async with follow_task(conn, "t-1", cursors=stale) as failing:
            [e async for e in failing]
    assert gone.value.earliest_seq == 5


async def test_a_checkpoint_without_a_gap_is_an_event_like_any(connections) -> None:
    conn = await connect(connections)
    cursors = MemoryCursorStore()
    cursors.save("t-1", 4)
    async with follow_task(conn, "t-1", cursors=cursors) as follow:
        events = [e async for e in follow]
    assert [e.seq for e in events] == [5, 6, 7]
    assert events[0].checkpoint is not None and not events[0].from_checkpoint
    assert follow.stats.checkpoint_starts == [] and follow.gaps == []


@pytest.fixture(params=["stdio", "http"])
def checkpointing(request: pytest.FixtureRequest) -> Any:
    """`taskstream serve --retain-from-checkpoint` itself: over stdio through `taskstream
    connect` (its background server keeps the task), or over Streamable HTTP."""
    if not BIN:
        pytest.fail("TASKSTREAM_BIN must name the taskstream binary")
    if request.param == "stdio":
        server = ConnectServer()
        yield [*server.target, "--retain-from-checkpoint"]
        server.close()
    else:
        http = HttpServer([*SERVE, "--retain-from-checkpoint"])
        yield http.url
        http.close()


async def test_a_late_joiner_of_the_real_server_rebuilds_the_state_from_its_checkpoint(
    checkpointing, connections
) -> None:
    conn = await open_connection(connections, checkpointing)
    # emit: seq 0 its status, ticks 1..10, a checkpoint at 11 ({"ticks": 10}), ticks 12..21,
    # a checkpoint at 22 ({"ticks": 20}), ticks 23..27, its last status at 28.
    task_id = await start_emit(conn.session, count=25, interval_ms=2, checkpoint_every=10)
    # A follower from the start, live: it may fall behind a checkpoint and recover from it, but
    # it ends with the task's terminal status and rebuilds the same count of ticks.
    async with follow_task(conn, task_id, on_events_gone="recover") as live:
        live_events = [e async for e in live]
    assert live.outcome is not None and live.outcome.status == "completed"
    assert ticks_rebuilt(live_events) == 25

    late = await open_connection(connections, checkpointing)
    async with follow_task(late, task_id, on_events_gone="recover") as follow:
        events = [e async for e in follow]
    first = events[0]
    assert first.seq == 22 and first.from_checkpoint and first.checkpoint is not None
    assert (first.checkpoint.covers_through, first.checkpoint.state) == (21, {"ticks": 20})
    assert [e.seq for e in events] == list(range(22, 29))
    assert follow.stats.checkpoint_starts == [22]
    assert ticks_rebuilt(events) == 25
    assert follow.outcome is not None and follow.outcome.status == "completed"


def ticks_rebuilt(events: list[Any]) -> int:
    """The ticks a host counts: from the latest checkpoint it was handed, plus the ticks after."""
    ticks = 0
    for e in events:
        if e.checkpoint is not None and e.from_checkpoint:
            ticks = e.checkpoint.state["ticks"]
        elif e.type == "dev.taskstream.tick":
            ticks += 1
    return ticks
