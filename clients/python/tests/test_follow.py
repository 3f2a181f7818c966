"""follow_task against `taskstream serve`: over stdio (through `taskstream connect`, whose
background server keeps tasks running when a connection drops) and over Streamable HTTP
(2025-11-25 sessions, the era `mcp` 1.x speaks)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from conftest import open_connection, start_emit
from mcp_task_events import (
    EventsGoneError,
    FileCursorStore,
    MemoryCursorStore,
    cancel_task,
    follow_task,
    get_event_range,
)

pytestmark = pytest.mark.anyio


async def collect(follow) -> list[int]:
    return [e.seq async for e in follow]


async def test_follows_a_task_to_its_terminal_status(servers, connections) -> None:
    main, _ = servers
    conn = await open_connection(connections, main)
    task_id = await start_emit(conn.session, count=8, interval_ms=10)
    async with follow_task(conn, task_id) as follow:
        events = [e async for e in follow]
    assert [e.seq for e in events] == list(range(10))
    assert events[0].payload["status"] == "working"
    assert [e.payload["i"] for e in events[1:9]] == list(range(8))
    assert follow.outcome is not None and follow.outcome.status == "completed" and not follow.outcome.cancelled
    assert follow.cursor == 9
    r = await get_event_range(conn.session, task_id)
    assert (r.status, r.earliest_seq, r.latest_seq, r.next_seq) == ("completed", 0, 9, 10)


async def test_a_cut_mid_task_resumes_after_the_last_processed_seq(servers, connections, tmp_path: Path) -> None:
    main, _ = servers
    first = await open_connection(connections, main)
    task_id = await start_emit(first.session, count=30, interval_ms=30)
    processed: list[int] = []

    cursors_at_reconnect: list[int | None] = []

    async def reconnect(lost, error):
        cursors_at_reconnect.append(follow.cursor)
        return await open_connection(connections, main)

    async def handle(event) -> None:
        processed.append(event.seq)
        if event.seq == 5 and len(processed) == 6:
            await first.cut()  # the connection drops; the task runs on

    with anyio.fail_after(60):
        async with follow_task(first, task_id, cursors=FileCursorStore(tmp_path, sync=False), reconnect=reconnect) as follow:
            outcome = await follow.run(handle)
    assert processed == list(range(32)), "every event processed once, in order"
    assert outcome.status == "completed"
    assert follow.stats.reconnects >= 1, follow.stats
    # Events already received when the cut came are still processed; the resume names the last
    # one processed.
    assert cursors_at_reconnect[0] is not None and cursors_at_reconnect[0] >= 5, cursors_at_reconnect
    assert follow.stats.afters[:2] == [None, cursors_at_reconnect[0]], f"resumed with after = the last processed seq: {follow.stats.afters}"
    assert await FileCursorStore(tmp_path).load(task_id) == 31

    late = await open_connection(connections, main)
    async with follow_task(late, task_id) as late_follow:
        assert await collect(late_follow) == list(range(32)), "a late joiner replays the whole task"
    assert late_follow.outcome.status == "completed"


async def test_cancelling_the_follow_leaves_the_task_running(servers, connections) -> None:
    main, _ = servers
    conn = await open_connection(connections, main)
    task_id = await start_emit(conn.session, count=200, interval_ms=20)
    cursors = MemoryCursorStore()
    async with follow_task(conn, task_id, cursors=cursors) as follow:
        async for e in follow:
            if e.seq == 3:
                follow.cancel()
    assert follow.outcome.cancelled
    assert cursors.load(task_id) == 3
    assert (await get_event_range(conn.session, task_id)).status == "working", "cancelling the follow must not cancel the task"
    await cancel_task(conn.session, task_id)
    async with follow_task(conn, task_id, cursors=cursors) as rest:
        more = [e async for e in rest]
    assert more[0].seq == 4, "the next follow starts after the cursor"
    assert more[-1].payload["status"] == "cancelled"
    assert rest.outcome.status == "cancelled"


async def test_events_gone_fail_or_recover_and_report_the_gap(servers, connections) -> None:
    _, small = servers
    conn = await open_connection(connections, small)
    task_id = await start_emit(conn.session, count=12)
    with anyio.fail_after(20):
        while not (await get_event_range(conn.session, task_id)).terminal:
            await anyio.sleep(0.02)
    r = await get_event_range(conn.session, task_id)
    assert (r.earliest_seq, r.latest_seq) == (9, 13)

    stale = MemoryCursorStore()
    stale.save(task_id, 1)
    with pytest.raises(EventsGoneError) as gone:
        async with follow_task(conn, task_id, cursors=stale) as follow:
            await collect(follow)
    assert (gone.value.earliest_seq, gone.value.after, gone.value.code) == (9, 1, -32010)

    gaps = []
    async with follow_task(conn, task_id, cursors=stale, on_events_gone="recover", on_gap=gaps.append) as recover:
        assert await collect(recover) == list(range(9, 14))
    assert [(g.first, g.last) for g in gaps] == [(2, 8)]
    assert recover.outcome.status == "completed"

    # Without a cursor the stream starts at the earliest retained event: the same choice.
    with pytest.raises(EventsGoneError) as gone:
        async with follow_task(conn, task_id) as follow:
            await collect(follow)
    assert gone.value.earliest_seq == 9
    async with follow_task(conn, task_id, on_events_gone="recover") as fresh:
        got = await collect(fresh)
        assert got == list(range(9, 14)), (got, fresh.stats, fresh.gaps)
    assert [(g.first, g.last) for g in fresh.gaps] == [(0, 8)]


async def test_a_late_joiner_of_a_running_task_and_tasks_get_without_replay(servers, connections) -> None:
    main, _ = servers
    conn = await open_connection(connections, main)
    task_id = await start_emit(conn.session, count=60, interval_ms=25)
    # tasks/get reports where the events stand while the task runs, and opens no stream: no
    # event of the task reaches the connection.
    heard: list[dict] = []
    unlisten = conn.events.listen(task_id, heard.append)
    with anyio.fail_after(20):
        while True:
            r = await get_event_range(conn.session, task_id)
            if r.latest_seq is not None and r.latest_seq >= 10:
                break
            await anyio.sleep(0.02)
    r = await get_event_range(conn.session, task_id)
    unlisten()
    assert r.status == "working" and not r.terminal and r.reported, r
    assert r.earliest_seq == 0 and r.latest_seq is not None and r.latest_seq >= 10 and r.next_seq == r.latest_seq + 1, r
    assert heard == [], "tasks/get delivered events"
    # A joiner that comes late gets the retained events, then the live ones, each once.
    late = await open_connection(connections, main)
    async with follow_task(late, task_id) as follow:
        seqs = await collect(follow)
    assert seqs == list(range(62))
    assert follow.stats.duplicates == 0 and follow.outcome.status == "completed"


async def test_a_follow_from_after(servers, connections) -> None:
    main, _ = servers
    conn = await open_connection(connections, main)
    task_id = await start_emit(conn.session, count=8)
    # An after beyond the task's last event is refused: let the task end first.
    with anyio.fail_after(20):
        while not (await get_event_range(conn.session, task_id)).terminal:
            await anyio.sleep(0.02)
    async with follow_task(conn, task_id, after=4) as follow:
        assert await collect(follow) == list(range(5, 10)), "from after: nothing at or before it"
    assert follow.stats.afters[0] == 4 and follow.gaps == []
    # After beyond the stored cursor: the skipped range is reported as a gap.
    cursors = MemoryCursorStore()
    cursors.save(task_id, 2)
    async with follow_task(conn, task_id, cursors=cursors, after=6) as past:
        assert await collect(past) == list(range(7, 10))
    assert [(g.first, g.last, g.why) for g in past.gaps] == [(3, 6, "started past the cursor")]
    assert cursors.load(task_id) == 9
