"""Following one task's events across reconnects: the client half of SEP-2694's resume contract.

- The cursor of a task is the seq of the last event the host *processed*: it is committed to
  the cursor store only after the host's handler returned for that event (RS-08), and every
  (re)opened stream sends it as ``after`` (RS-09).
- Events at or below the cursor are duplicates and are dropped by ``(taskId, seq)``
  (RS-10, RS-11).
- The next event must be exactly cursor + 1 and name its task in params and in the
  related-task ``_meta``; anything else is a :class:`StreamViolationError` (EV-03, NT-01, NT-02).
- ``events_gone`` is an :class:`EventsGoneError` carrying ``earliest_seq``; with
  ``on_events_gone="recover"`` the follow resumes from ``earliest_seq - 1`` and reports the lost
  range as a gap (EG-02).
- A stream that ends (or stays quiet) while the task runs is reopened from the cursor (TS-04);
  a lost connection is replaced through the host's ``reconnect`` callback.
- The follow ends when the task is terminal and every retained event was processed.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import anyio
import anyio.abc
import mcp.types as types
from mcp import ClientSession
from mcp.shared.message import SessionMessage
from pydantic import ConfigDict

from ._compat import McpError, jsonrpc_message, next_request_id
from ._cursors import CursorStore, MemoryCursorStore, load_cursor, save_cursor

TASK_EVENT_METHOD = "notifications/tasks/event"
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
EVENTS_META_KEY = "dev.taskstream/events"
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
CHECKPOINT_EVENT_TYPE = "dev.taskstream.checkpoint"


# --- errors ------------------------------------------------------------------------------------


class EventsGoneError(Exception):
    """The server no longer retains the events after the cursor (``-32010``, ``events_gone``)."""

    def __init__(self, task_id: str, earliest_seq: int, after: int | None, code: int = -32010) -> None:
        first = 0 if after is None else after + 1
        super().__init__(
            f"events {first}..{earliest_seq - 1} of task {task_id} are gone; the earliest retained is {earliest_seq}"
        )
        self.task_id = task_id
        self.earliest_seq = earliest_seq
        self.after = after
        self.code = code


class StreamViolationError(Exception):
    """The server broke the stream's rules: a gap, a reordering, an event of another task."""

    def __init__(self, message: str, task_id: str, cursor: int | None, event: Any = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.cursor = cursor
        self.event = event


class ConnectionLostError(Exception):
    """The connection was lost and no ``reconnect`` callback could replace it."""


def is_connection_lost(error: BaseException) -> bool:
    """Whether an error from a request means the connection, not the server, failed."""
    if isinstance(error, McpError):
        return error.error.code in (types.CONNECTION_CLOSED, 408, -32001)
    return isinstance(error, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError))


def _events_gone(error: BaseException, task_id: str, after: int | None) -> EventsGoneError | None:
    if not isinstance(error, McpError):
        return None
    data = error.error.data
    if not isinstance(data, dict) or data.get("reason") != "events_gone":
        return None
    earliest = data.get("earliestSeq")
    if type(earliest) is not int or earliest < 0:
        return None
    return EventsGoneError(task_id, earliest, after, error.error.code)


# --- the wire: requests the SDK has no types for -----------------------------------------------


class _Params(types.RequestParams):
    model_config = ConfigDict(extra="allow")


class _Request(types.Request[_Params, str]):
    """A ``tasks/*`` request. Each names its task in ``params.taskId``, which ``mcp`` 2.x sends
    as the ``Mcp-Name`` header that Streamable HTTP asks of ``tasks/*`` requests (2026-07-28);
    ``mcp`` 1.x has no such header and ignores the attribute."""

    name_param: ClassVar[str | None] = "taskId"
    method: str
    params: _Params


class _AnyResult(types.Result):
    model_config = ConfigDict(extra="allow")


def _request(method: str, **params: Any) -> Any:
    return _Request(method=method, params=_Params(**params))


# --- routing task events around the SDK --------------------------------------------------------


# What a router hands its listeners when the connection's read stream has ended.
_CONNECTION_ENDED: dict[str, Any] = {}


class TaskEventRouter:
    """The ``notifications/tasks/event`` of one connection, routed to the follows reading them.

    ``mcp`` 1.x validates incoming notifications against its closed union of known ones and
    drops the rest, so task events never reach a ``ClientSession``: :func:`tap_task_events`
    takes them out of the transport's read stream, before the session, into this router."""

    def __init__(self) -> None:
        self._listeners: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._followed: set[str] = set()
        self._left_open: set[str] = set()
        self._closed = False

    def listen(self, task_id: str, fn: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        if self._closed:
            raise anyio.ClosedResourceError("the connection's read stream has ended")
        if task_id in self._listeners:
            raise RuntimeError(f"task {task_id} is already followed on this connection")
        self._followed.add(task_id)
        self._listeners[task_id] = fn

        def unlisten() -> None:
            if self._listeners.get(task_id) is fn:
                del self._listeners[task_id]

        return unlisten

    def dispatch(self, params: dict[str, Any]) -> None:
        task_id = params.get("taskId")
        fn = self._listeners.get(task_id)  # type: ignore[arg-type]
        if fn is not None:
            fn(params)
        elif task_id not in self._followed and len(self._listeners) == 1:
            # An event naming a task never followed here, while exactly one stream is open: it
            # can only be that stream's, with a wrong taskId (NT-02).
            next(iter(self._listeners.values()))(params)
        # Otherwise (a cancelled stream's straggler, an unsolicited event) it is dropped.

    def close(self) -> None:
        """The connection's read stream ended: every open stream ends as a lost connection."""
        self._closed = True
        for fn in list(self._listeners.values()):
            fn(_CONNECTION_ENDED)

    def left_open(self, task_id: str) -> None:
        """A stream of the task was cancelled before its end: events it sent may still come."""
        self._left_open.add(task_id)

    def take_left_open(self, task_id: str) -> bool:
        """Whether a stream of the task was left open since the last call."""
        if task_id in self._left_open:
            self._left_open.discard(task_id)
            return True
        return False


@asynccontextmanager
async def tap_task_events(
    read_stream: Any,
) -> AsyncIterator[tuple[Any, TaskEventRouter]]:
    """Wraps a transport's read stream: yields ``(read_stream, router)``, where the new read
    stream (to give to ``ClientSession``) carries everything but the task events, which go to
    ``router``. Events are routed before the messages after them are passed on, so a stream's
    events always come before its response."""
    router = TaskEventRouter()
    send, receive = anyio.create_memory_object_stream[Any](math.inf)

    async def pump() -> None:
        try:
            await forward()
        finally:
            router.close()

    async def forward() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, SessionMessage):
                    root = jsonrpc_message(item.message)
                    if isinstance(root, types.JSONRPCNotification) and root.method == TASK_EVENT_METHOD:
                        router.dispatch(dict(root.params or {}))
                        continue
                await send.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        try:
            yield receive, router
        finally:
            tg.cancel_scope.cancel()


@dataclass
class TaskStreamConnection:
    """A ``ClientSession`` and the router of its task events (from :func:`tap_task_events`)."""

    session: ClientSession
    events: TaskEventRouter


# --- tasks/get and tasks/cancel ----------------------------------------------------------------


@dataclass
class EventRange:
    """A task's status and where its events stand, from ``tasks/get``."""

    status: str | None
    terminal: bool
    earliest_seq: int | None
    """Oldest retained seq (None: the server does not report it)."""
    latest_seq: int | None
    """Newest retained seq (None when none is retained or not reported)."""
    next_seq: int | None
    reported: bool
    """Whether the server reported the range (taskstream's ``_meta["dev.taskstream/events"]``)."""
    task: dict[str, Any]


async def get_event_range(session: ClientSession, task_id: str) -> EventRange:
    """``tasks/get``: the task's status and the retained range of its events, without a replay."""
    result = await session.send_request(_request("tasks/get", taskId=task_id), _AnyResult)
    task = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    rng = (task.get("_meta") or {}).get(EVENTS_META_KEY)
    status = task.get("status")
    return EventRange(
        status=status,
        terminal=status in TERMINAL_STATUSES,
        earliest_seq=rng.get("earliestSeq") if isinstance(rng, dict) else None,
        latest_seq=rng.get("latestSeq") if isinstance(rng, dict) else None,
        next_seq=rng.get("nextSeq") if isinstance(rng, dict) else None,
        reported=isinstance(rng, dict),
        task=task,
    )


async def cancel_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    """``tasks/cancel``: ends the task itself (a follow then gets its ``cancelled`` status
    event). To stop reading without touching the task, cancel the follow instead."""
    result = await session.send_request(_request("tasks/cancel", taskId=task_id), _AnyResult)
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


# --- following a task --------------------------------------------------------------------------


@dataclass
class Gap:
    """A lost range of seqs, both ends included, accepted under ``on_events_gone="recover"``."""

    first: int
    last: int
    why: str


@dataclass
class Checkpoint:
    """A checkpoint event's payload (type ``dev.taskstream.checkpoint``): the task's state after
    every event up to and including ``covers_through``, as the task's tool defines it."""

    covers_through: int
    state: dict[str, Any]


@dataclass
class TaskEvent:
    """One task event: the params of a ``notifications/tasks/event``. ``payload`` is untrusted
    data from the task: never execute it; sanitise what you render."""

    task_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    meta: dict[str, Any] | None = None
    after_gap: Gap | None = None
    """Set on the first event after a gap (``on_events_gone="recover"``): the range lost
    before it, which the host never saw."""

    @property
    def checkpoint(self) -> Checkpoint | None:
        """This event as a checkpoint: its type is ``dev.taskstream.checkpoint`` and its payload
        ``{"coversThrough": SEQ, "state": OBJECT}``; None for any other event."""
        if self.type != CHECKPOINT_EVENT_TYPE:
            return None
        covers = self.payload.get("coversThrough")
        state = self.payload.get("state")
        if type(covers) is not int or covers < 0 or not isinstance(state, dict):
            return None
        return Checkpoint(covers, state)

    @property
    def from_checkpoint(self) -> bool:
        """Whether the follow started (or restarted, after a gap) from this checkpoint: the host
        replaces its state with ``checkpoint.state``, which covers the lost range ``after_gap``,
        and the events after it follow."""
        return self.after_gap is not None and self.checkpoint is not None


@dataclass
class FollowStats:
    events: int = 0
    duplicates: int = 0
    streams: int = 0
    reopens: int = 0
    reconnects: int = 0
    gone_recoveries: int = 0
    afters: list[int | None] = field(default_factory=list)
    """The ``after`` of every ``tasks/stream`` opened, in order."""
    checkpoint_starts: list[int] = field(default_factory=list)
    """The seqs of the checkpoints the follow started from after a gap."""


@dataclass
class FollowOutcome:
    status: str | None
    """The task's terminal status (None when the follow was cancelled or left)."""
    task: dict[str, Any] | None
    cursor: int | None
    gaps: list[Gap]
    cancelled: bool


Reconnect = Callable[[TaskStreamConnection, BaseException], Awaitable[TaskStreamConnection]]


@dataclass
class _End:
    result: Any = None
    error: BaseException | None = None
    idle: bool = False


class _Stream:
    """One ``tasks/stream`` request, run in the follow's task group; its events and its end
    arrive in one queue."""

    def __init__(self, follow: TaskFollow, after: int | None) -> None:
        self.after = after
        self.first = True
        self.done = False
        self._follow = follow
        conn = follow.connection
        self._session = conn.session
        self._send, self._receive = anyio.create_memory_object_stream[Any](math.inf)
        self._scope = anyio.CancelScope()
        self._ran = anyio.Event()
        self._request_id: Any = None
        # A stream of this task left open on this connection may still send events: none is
        # taken until the barrier in _run has passed them.
        barrier = conn.events.take_left_open(follow.task_id)
        self._listening = not barrier
        self._events = conn.events
        try:
            self._unlisten = conn.events.listen(follow.task_id, self._deliver)
        except (RuntimeError, anyio.ClosedResourceError) as e:
            if barrier:
                conn.events.left_open(follow.task_id)  # still owed to the next stream
            self._unlisten = lambda: None
            self.done = True
            self._send.send_nowait(_End(error=e))
            return
        params: dict[str, Any] = {"taskId": follow.task_id}
        if after is not None:
            params["after"] = after
        follow._tg.start_soon(self._run, params, barrier)

    async def _run(self, params: dict[str, Any], barrier: bool) -> None:
        with self._scope:
            try:
                if barrier:
                    # A stream of this task was cancelled on this connection: the answer to a
                    # request (tasks/get, valid in both eras, unlike ping) comes after every
                    # event that stream sent, which are dropped as stragglers (the stream does
                    # not listen until then), before the new stream is opened.
                    await self._session.send_request(_request("tasks/get", taskId=params["taskId"]), _AnyResult)
                    self._listening = True
                # The id send_request is about to use, for notifications/cancelled.
                self._request_id = next_request_id(self._session)
                result = await self._session.send_request(_request("tasks/stream", **params), _AnyResult)
                self._end(_End(result=result))
            except Exception as e:  # every failure ends the stream; the follow decides
                self._end(_End(error=e))
            finally:
                self._ran.set()

    def _deliver(self, params: dict[str, Any]) -> None:
        if params is _CONNECTION_ENDED:
            self._end(_End(error=anyio.ClosedResourceError("the connection's read stream has ended")))
        elif self._listening:
            try:
                self._send.send_nowait(params)
            except anyio.ClosedResourceError:
                pass

    def _end(self, end: _End) -> None:
        if not self.done:
            self.done = True
            try:
                self._send.send_nowait(end)
            except anyio.ClosedResourceError:
                pass

    async def next(self, idle_timeout: float) -> dict[str, Any] | _End:
        with anyio.move_on_after(idle_timeout):
            return await self._receive.receive()
        return _End(error=TimeoutError(f"no event for {idle_timeout} s"), idle=True)

    async def close(self) -> None:
        """Leaves the stream; cancels the request if it is still open (the task runs on)."""
        self._unlisten()
        if not self.done:
            self.done = True
            self._scope.cancel()
            self._events.left_open(self._follow.task_id)
            # mcp 2.x writes notifications/cancelled itself as the request is abandoned: wait
            # for that, so that it goes out before any later request on the connection.
            with anyio.move_on_after(5, shield=True):
                await self._ran.wait()
            if self._request_id is not None:
                with anyio.move_on_after(5, shield=True):
                    try:
                        await self._session.send_notification(
                            types.ClientNotification(
                                types.CancelledNotification(
                                    params=types.CancelledNotificationParams(
                                        requestId=self._request_id, reason="the follow left the stream"
                                    )
                                )
                            )
                        )
                    except Exception:  # the connection may be gone already
                        pass
        self._send.close()
        self._receive.close()


class TaskFollow:
    """One follow of one task. Use it as ``async with follow_task(...) as follow`` and iterate
    it once (``async for event in follow``), or call :meth:`run` once. An event is committed
    when the next one is asked for (the loop body returned)."""

    def __init__(
        self,
        connection: TaskStreamConnection,
        task_id: str,
        *,
        cursors: CursorStore | None = None,
        after: int | None = None,
        reconnect: Reconnect | None = None,
        on_events_gone: Literal["fail", "recover"] = "fail",
        on_gap: Callable[[Gap], None] | None = None,
        idle_timeout: float = 30.0,
        max_reconnects: int = 8,
        max_gone_recoveries: int = 4,
        require_related_task: bool = True,
    ) -> None:
        if on_events_gone not in ("fail", "recover"):
            raise ValueError(f"on_events_gone: 'fail' or 'recover', not {on_events_gone!r}")
        self.connection = connection
        self.task_id = task_id
        self.cursors: CursorStore = cursors if cursors is not None else MemoryCursorStore()
        self._after = after
        self._reconnect = reconnect
        self.on_events_gone = on_events_gone
        self._on_gap = on_gap
        self.idle_timeout = idle_timeout
        self.max_reconnects = max_reconnects
        self.max_gone_recoveries = max_gone_recoveries
        self.require_related_task = require_related_task
        self.cursor: int | None = None
        """The last processed (committed) seq."""
        self.gaps: list[Gap] = []
        self._pending_gap: Gap | None = None
        self.stats = FollowStats()
        self.outcome: FollowOutcome | None = None
        self._cancelled = anyio.Event()
        self._tg: anyio.abc.TaskGroup
        self._entered = False
        self._started = False
        self._gen: Any = None

    async def __aenter__(self) -> TaskFollow:
        self._tg_cm = anyio.create_task_group()
        self._tg = await self._tg_cm.__aenter__()
        self._entered = True
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        if self._gen is not None:
            # Leaves an open stream (cancelling its request) when the host broke out of its loop.
            with anyio.CancelScope(shield=True):
                await self._gen.aclose()
        # The follow's own tasks (its stream requests) are cancelled; whatever the body raised
        # propagates as it is, not wrapped in an exception group.
        self._tg.cancel_scope.cancel()
        await self._tg_cm.__aexit__(None, None, None)
        return None

    def cancel(self) -> None:
        """Stops reading: cancels the open ``tasks/stream`` request (``notifications/cancelled``);
        the task runs on. The iteration ends without error and ``outcome.cancelled`` is True."""
        self._cancelled.set()

    async def run(self, handler: Callable[[TaskEvent], Awaitable[Any] | Any]) -> FollowOutcome:
        """Hands every event to ``handler`` (awaited when it is a coroutine) and commits its seq
        after it returned; answers the outcome once the task is terminal."""
        async for event in self:
            r = handler(event)
            if isinstance(r, Awaitable):
                await r
        assert self.outcome is not None
        return self.outcome

    def __aiter__(self) -> AsyncIterator[TaskEvent]:
        self._gen = self._iterate()
        return self._gen

    async def _iterate(self) -> AsyncIterator[TaskEvent]:
        if not self._entered:
            raise RuntimeError("use `async with follow_task(...) as follow` before iterating it")
        if self._started:
            raise RuntimeError("a TaskFollow is iterated once")
        self._started = True
        try:
            async for event in self._follow():
                yield event
        finally:
            if self.outcome is None:
                # Left early (cancelled, or the host broke out of its loop): the event handed out
                # last is not committed, so a later follow delivers it again.
                self.outcome = FollowOutcome(None, None, self.cursor, self.gaps, True)

    async def _follow(self) -> AsyncIterator[TaskEvent]:
        stored = await load_cursor(self.cursors, self.task_id)
        self.cursor = stored
        after = self._after if self._after is not None else stored
        if self._after is not None and (stored is None or self._after > stored):
            if stored is not None:
                self._gap(stored + 1, self._after, "started past the cursor")
            self.cursor = self._after
        lost_in_a_row = 0
        quiet_streams = 0
        previous_delivered = -1
        while not self._cancelled.is_set():
            stream = _Stream(self, after)
            self.stats.streams += 1
            self.stats.afters.append(after)
            delivered = 0
            try:
                while True:
                    item = await self._next(stream)
                    if isinstance(item, _End):
                        end = item
                        break
                    if not self._check(item, stream):
                        continue
                    event = TaskEvent(
                        task_id=item["taskId"],
                        seq=item["seq"],
                        type=item.get("type", ""),
                        payload=item.get("payload") or {},
                        meta=item.get("_meta"),
                        after_gap=self._pending_gap,
                    )
                    self._pending_gap = None
                    if event.from_checkpoint:
                        self.stats.checkpoint_starts.append(event.seq)
                    yield event
                    # The host's handler returned (it asked for the next event): commit.
                    await save_cursor(self.cursors, self.task_id, event.seq)
                    self.cursor = event.seq
                    self.stats.events += 1
                    delivered += 1
                    lost_in_a_row = 0
            finally:
                with anyio.CancelScope(shield=True):
                    await stream.close()
            if self._cancelled.is_set():
                break
            after = self.cursor
            if end.error is not None:
                gone = _events_gone(end.error, self.task_id, stream.after)
                if gone is not None:
                    if self.on_events_gone == "fail" or self.stats.gone_recoveries >= self.max_gone_recoveries:
                        raise gone
                    self.stats.gone_recoveries += 1
                    first = 0 if self.cursor is None else self.cursor + 1
                    if gone.earliest_seq > first:
                        self._gap(first, gone.earliest_seq - 1, "events_gone")
                        await save_cursor(self.cursors, self.task_id, gone.earliest_seq - 1)
                        self.cursor = gone.earliest_seq - 1
                    after = self.cursor
                    continue
                if isinstance(end.error, StreamViolationError):
                    raise end.error
                if end.idle:
                    # Quiet for idle_timeout: maybe the task ended and the stream was never
                    # answered, maybe it is just quiet (or the connection died silently).
                    # Look, then finish or reopen.
                    try:
                        finished = await self._finished(delivered, previous_delivered)
                    except Exception as e:
                        if not is_connection_lost(e):
                            raise
                        end = _End(error=e)
                    else:
                        if finished:
                            break
                        previous_delivered = delivered
                        self.stats.reopens += 1
                        continue
                if not is_connection_lost(end.error):
                    raise end.error
                if self._reconnect is None:
                    raise ConnectionLostError(f"the connection following task {self.task_id} was lost") from end.error
                lost_in_a_row += 1
                if lost_in_a_row > self.max_reconnects:
                    raise ConnectionLostError(
                        f"gave up on task {self.task_id} after {self.max_reconnects} reconnects without progress"
                    ) from end.error
                self.connection = await self._reconnect(self.connection, end.error)
                self.stats.reconnects += 1
                continue
            # The stream ended with its result: the task is terminal and everything was sent, or
            # the server closed it early (TS-04).
            if await self._finished(delivered, previous_delivered):
                break
            previous_delivered = delivered
            self.stats.reopens += 1
            if delivered == 0:
                # A server that closes at once while the task runs: do not spin.
                quiet_streams += 1
                with anyio.move_on_after(min(2.0, 0.05 * 2 ** min(quiet_streams, 6))):
                    await self._cancelled.wait()
            else:
                quiet_streams = 0

    async def _next(self, stream: _Stream) -> dict[str, Any] | _End:
        """The stream's next item, or its end when the follow is cancelled."""
        if self._cancelled.is_set():
            return _End(error=anyio.get_cancelled_exc_class()())
        result: list[dict[str, Any] | _End] = []
        async with anyio.create_task_group() as tg:

            async def wait_cancel() -> None:
                await self._cancelled.wait()
                tg.cancel_scope.cancel()

            async def wait_item() -> None:
                result.append(await stream.next(self.idle_timeout))
                tg.cancel_scope.cancel()

            tg.start_soon(wait_cancel)
            tg.start_soon(wait_item)
        if result:
            return result[0]
        return _End(error=anyio.get_cancelled_exc_class()())

    async def _finished(self, delivered: int, previous_delivered: int) -> bool:
        """Whether the task is terminal with every retained event processed; sets the outcome."""
        rng = await get_event_range(self.connection.session, self.task_id)
        if not rng.terminal:
            return False
        if rng.reported:
            done = rng.latest_seq is None or (self.cursor is not None and self.cursor >= rng.latest_seq)
        else:
            # A server that does not report its range: done when a stream opened on the
            # terminal task delivered nothing new.
            done = delivered == 0 and previous_delivered >= 0
        if done:
            self.outcome = FollowOutcome(rng.status, rng.task, self.cursor, self.gaps, False)
        return done

    def _gap(self, first: int, last: int, why: str) -> None:
        gap = Gap(first, last, why)
        self.gaps.append(gap)
        self._pending_gap = gap
        if self._on_gap is not None:
            self._on_gap(gap)

    def _check(self, event: dict[str, Any], stream: _Stream) -> bool:
        """A duplicate is dropped (False), the next event accepted (True); anything else raises."""
        task_id = self.task_id

        def violation(msg: str) -> StreamViolationError:
            return StreamViolationError(f"task {task_id}: {msg}", task_id, self.cursor, event)

        if event.get("taskId") != task_id:
            raise violation(f"an event names task {event.get('taskId')!r}")
        related = (event.get("_meta") or {}).get(RELATED_TASK_META_KEY)
        if self.require_related_task and not (isinstance(related, dict) and related.get("taskId") == task_id):
            raise violation(f"event seq {event.get('seq')} has no related-task _meta naming its task")
        seq = event.get("seq")
        if type(seq) is not int or seq < 0:
            raise violation(f"event seq {seq!r} is not a seq")
        if self.cursor is not None and seq <= self.cursor:
            self.stats.duplicates += 1
            return False
        want = 0 if self.cursor is None else self.cursor + 1
        if seq != want:
            if self.cursor is None and stream.first and stream.after is None:
                # No cursor: the stream starts at the earliest retained event, and retention
                # had dropped the ones before it.
                if self.on_events_gone == "fail":
                    raise EventsGoneError(task_id, seq, None)
                self._gap(0, seq - 1, "earliest retained event")
                stream.first = False
                return True
            where = "no cursor" if self.cursor is None else f"cursor {self.cursor}"
            raise violation(f"event seq {seq} follows {where}: expected {want}")
        stream.first = False
        return True


def follow_task(connection: TaskStreamConnection, task_id: str, **options: Any) -> TaskFollow:
    """Follows one task's events to its terminal status, across reconnects. Use the answer as
    ``async with follow_task(conn, task_id) as follow: async for event in follow: ...``.

    Options: ``cursors`` (a :class:`CursorStore`, default in memory), ``after`` (start there
    instead of the stored cursor), ``reconnect(lost_connection, error)`` (answers a new
    :class:`TaskStreamConnection`; without it a lost connection raises
    :class:`ConnectionLostError`), ``on_events_gone`` (``"fail"``, the default, or
    ``"recover"``), ``on_gap(gap)``, ``idle_timeout`` (seconds a stream may stay quiet before it
    is checked and reopened, default 30), ``max_reconnects``, ``max_gone_recoveries``,
    ``require_related_task``."""
    return TaskFollow(connection, task_id, **options)
