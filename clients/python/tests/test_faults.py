"""follow_task against `taskstream conformance-server --fault NAME`: the client survives each
client fault (docs/specification/tasks-stream.md, section 5.5) and detects each server fault
that breaks a rule the follow relies on."""

from __future__ import annotations

import re

import pytest

from conftest import BIN, open_connection, start_emit
import anyio

from mcp_task_events import EventsGoneError, MemoryCursorStore, StreamViolationError, follow_task, get_event_range

pytestmark = pytest.mark.anyio


async def faulty(connections, faults: str):
    return await open_connection(connections, [BIN, "conformance-server", "--fault", faults])


async def collect(follow) -> list[int]:
    return [e.seq async for e in follow]


async def test_close_early_reopens_from_the_processed_cursor(connections) -> None:
    conn = await faulty(connections, "close-early")
    task_id = await start_emit(conn.session, count=10, interval_ms=50)
    async with follow_task(conn, task_id) as follow:
        assert await collect(follow) == list(range(12))
    assert follow.outcome.status == "completed"
    # The server closed the first stream after 3 events (the task still ran): the next one
    # resumed after seq 2, the last one processed; every later one after its predecessor's last.
    afters = follow.stats.afters
    assert afters[:2] == [None, 2], afters
    assert all(b > a for a, b in zip(afters[1:], afters[2:])), afters
    assert follow.stats.duplicates == 0


async def test_duplicate_on_resume_is_dropped_by_task_and_seq(connections) -> None:
    conn = await faulty(connections, "close-early,duplicate-on-resume")
    task_id = await start_emit(conn.session, count=10, interval_ms=20)
    async with follow_task(conn, task_id) as follow:
        assert await collect(follow) == list(range(12))
    assert follow.stats.duplicates >= 2, follow.stats


async def test_gone_on_resume_recover_records_the_gap_fail_raises(connections) -> None:
    for policy in ("recover", "fail"):
        conn = await faulty(connections, "gone-on-resume")
        task_id = await start_emit(conn.session, count=10, interval_ms=20)
        # Process up to seq 2, stop, let the task end: the resume then finds seq 3 gone.
        cursors = MemoryCursorStore()
        async with follow_task(conn, task_id, cursors=cursors) as first:
            async for e in first:
                if e.seq == 2:
                    first.cancel()
        with anyio.fail_after(20):
            while not (await get_event_range(conn.session, task_id)).terminal:
                await anyio.sleep(0.02)
        if policy == "fail":
            with pytest.raises(EventsGoneError) as gone:
                async with follow_task(conn, task_id, cursors=cursors) as follow:
                    await collect(follow)
            assert (gone.value.after, gone.value.earliest_seq) == (2, 4)
            continue
        async with follow_task(conn, task_id, cursors=cursors, on_events_gone="recover") as follow:
            assert await collect(follow) == list(range(4, 12))
        assert [(g.first, g.last) for g in follow.gaps] == [(3, 3)], "earliestSeq = after + 2 loses one seq"
        assert follow.outcome.status == "completed"


async def test_push_unsolicited_is_not_relied_on(connections) -> None:
    conn = await faulty(connections, "push-unsolicited")
    task_id = await start_emit(conn.session, count=5, interval_ms=10)
    async with follow_task(conn, task_id) as follow:
        assert await collect(follow) == list(range(7))
    assert follow.stats.duplicates == 0
    assert follow.outcome.status == "completed"


@pytest.mark.parametrize("fault", ["replay-includes-cursor", "after-last-not-immediate"])
async def test_an_event_at_the_cursor_sent_again_is_dropped(connections, fault: str) -> None:
    conn = await faulty(connections, fault)
    task_id = await start_emit(conn.session, count=6, interval_ms=20)
    processed: list[int] = []
    async with follow_task(conn, task_id) as follow:
        await follow.run(lambda e: processed.append(e.seq))
    assert processed == list(range(8)), "every event processed once"
    assert follow.stats.duplicates >= 1, follow.stats
    assert follow.outcome.status == "completed"


async def test_an_unknown_event_type_is_handed_on_and_committed(connections) -> None:
    """§4.3: a type the host does not know is not an error; its seq is processed like any."""
    conn = await faulty(connections, "unprefixed-type")
    task_id = await start_emit(conn.session, count=4, interval_ms=10)
    cursors = MemoryCursorStore()
    async with follow_task(conn, task_id, cursors=cursors) as follow:
        types = [e.type async for e in follow]
    assert types[1:5] == ["tick"] * 4
    assert cursors.load(task_id) == 5
    assert follow.outcome.status == "completed"


async def test_never_close_ends_by_the_idle_check(connections) -> None:
    conn = await faulty(connections, "never-close")
    task_id = await start_emit(conn.session, count=5, interval_ms=10)
    async with follow_task(conn, task_id, idle_timeout=0.5) as follow:
        assert await collect(follow) == list(range(7))
    assert follow.outcome.status == "completed"


@pytest.mark.parametrize(
    "fault,what",
    [
        ("reorder", r"seq 3 follows cursor 1: expected 2"),
        ("drop-live-event", r"seq 4 follows cursor 2: expected 3"),
        ("skip-seq", r"seq 3 follows cursor 1: expected 2"),
        ("drop-meta", r"no related-task _meta"),
        ("meta-mismatch", r"no related-task _meta"),
        ("foreign-task-id", r"names task"),
    ],
)
async def test_server_fault_is_a_stream_violation(connections, fault: str, what: str) -> None:
    conn = await faulty(connections, fault)
    task_id = await start_emit(conn.session, count=6, interval_ms=20)
    with pytest.raises(StreamViolationError) as violation:
        async with follow_task(conn, task_id) as follow:
            await collect(follow)
    assert re.search(what, str(violation.value)), violation.value


@pytest.mark.parametrize("fault", ["no-after-live-only", "live-before-replay"])
async def test_a_stream_that_skips_the_retained_events_is_a_gap(connections, fault: str) -> None:
    """The task's first event (seq 0, its working status) is retained before any stream opens:
    a stream without after that starts past it is a gap, never processed out of order."""
    conn = await faulty(connections, fault)
    task_id = await start_emit(conn.session, count=50, interval_ms=20)
    with pytest.raises(EventsGoneError) as gone:
        async with follow_task(conn, task_id) as follow:
            await collect(follow)
    assert gone.value.earliest_seq >= 1 and gone.value.after is None


async def test_start_at_one_is_a_gap(connections) -> None:
    conn = await faulty(connections, "start-at-one")
    task_id = await start_emit(conn.session, count=6, interval_ms=20)
    with pytest.raises(EventsGoneError) as gone:
        async with follow_task(conn, task_id) as follow:
            await collect(follow)
    assert (gone.value.earliest_seq, gone.value.after) == (1, None)
