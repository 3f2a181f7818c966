"""A follow that starts from a checkpoint after a gap tells the host so (the task's state is in
the checkpoint, covering the events the host never saw): against a scripted server that holds
a task as `taskstream serve --retain-from-checkpoint` keeps it (tests/checkpoint_server.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import Connections, open_connection
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
