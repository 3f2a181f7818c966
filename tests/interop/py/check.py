"""Interop check: the official Python MCP SDK (`mcp` 1.x, 2025-11-25 era, SEP-1686 tasks) as a
client of `taskstream serve`.

It spawns the server with the SDK's `stdio_client`, runs the initialize handshake through
`ClientSession`, lists the tools, calls `emit` as a task through the SDK's experimental Tasks API
(`session.experimental.call_tool_as_task`, `poll_task`, `get_task_result`), streams the task's
events with a raw `tasks/stream` request sent through `session.send_request`, and checks resume
and the cursor rules. Any violated property fails the run (exit 1, last line `error: ...`).

The SDK validates incoming notifications against its closed union of known server notifications
and drops the rest with a logged warning, so `notifications/tasks/event` never reaches a
`message_handler`. The check therefore taps the stdio transport's read stream, between the
transport and the session, and takes the event notifications out there.

Environment: TASKSTREAM_BIN (required) the server binary; TASKSTREAM_ARGS (optional) its
arguments, default `serve --in-memory --durability none`.
"""

import json
import os
import re
import sys
import warnings
from typing import Any, Literal

import anyio
from pydantic import ConfigDict

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage

# The SDK marks its SEP-1686 client API deprecated (tasks moved to an extension in 2026-07-28);
# it is exactly the legacy-era API this check exercises.
warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*experimental tasks API.*")

RELATED = "io.modelcontextprotocol/related-task"
STATUS_TYPE = "dev.taskstream.task.status"
TICK_TYPE = "dev.taskstream.tick"
PREFIXED = re.compile(r"^[A-Za-z0-9-]+(\.[A-Za-z0-9_-]+){2,}$")


class CheckFailed(Exception):
    pass


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def show(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"))


def step(msg: str) -> None:
    print(f"  ok  {msg}", flush=True)


class TaskStreamParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")
    taskId: str
    after: Any = None  # left out of the request when None


class TaskStreamRequest(types.Request[TaskStreamParams, Literal["tasks/stream"]]):
    method: Literal["tasks/stream"] = "tasks/stream"
    params: TaskStreamParams


class PermissiveResult(types.Result):
    model_config = ConfigDict(extra="allow")


wire: list[tuple[str, dict]] = []
events: list[dict] = []


def events_of(task_id: str) -> list[dict]:
    return [e for e in events if e.get("taskId") == task_id]


def check_envelopes(evs: list[dict], task_id: str, first: int) -> None:
    for i, e in enumerate(evs):
        want = first + i
        check(e.get("seq") == want and type(e.get("seq")) is int,
              f"event #{i} of task {task_id}: seq {show(e.get('seq'))}, expected {want} (seqs seen: {show([x.get('seq') for x in evs])})")
        check(e.get("taskId") == task_id, f"event seq {want}: taskId {show(e.get('taskId'))}, expected {show(task_id)}")
        related = (e.get("_meta") or {}).get(RELATED)
        check(isinstance(related, dict) and related.get("taskId") == task_id,
              f"event seq {want}: _meta[\"{RELATED}\"] is {show(related)}, expected {{\"taskId\":{show(task_id)}}}")
        check(isinstance(e.get("type"), str) and PREFIXED.match(e["type"]) is not None,
              f"event seq {want}: type {show(e.get('type'))} is not vendor-prefixed")
        check(isinstance(e.get("payload"), dict), f"event seq {want}: payload {show(e.get('payload'))} is not a JSON object")


def check_emit_stream(evs: list[dict], task_id: str, ticks: int, terminal: str, payload_bytes: int | None = None) -> None:
    check(len(evs) == ticks + 2,
          f"task {task_id}: {len(evs)} events, expected {ticks + 2} ({ticks} ticks + 2 status events); seqs {show([e.get('seq') for e in evs])}")
    check_envelopes(evs, task_id, 0)
    check(evs[0]["type"] == STATUS_TYPE and evs[0]["payload"].get("status") == "working",
          f"first event is {show(evs[0])}, expected {STATUS_TYPE} {{\"status\":\"working\"}}")
    for i in range(ticks):
        e = evs[i + 1]
        check(e["type"] == TICK_TYPE, f"event seq {e['seq']}: type {show(e['type'])}, expected {TICK_TYPE}")
        check(e["payload"].get("i") == i, f"event seq {e['seq']}: payload.i {show(e['payload'].get('i'))}, expected {i}")
        if payload_bytes is not None:
            data = e["payload"].get("data")
            check(isinstance(data, str) and len(data) == payload_bytes,
                  f"event seq {e['seq']}: payload.data {show(data)}, expected a string of {payload_bytes} characters")
    last = evs[-1]
    check(last["type"] == STATUS_TYPE and last["payload"].get("status") == terminal,
          f"last event is {show(last)}, expected {STATUS_TYPE} {{\"status\":\"{terminal}\"}}")


def check_empty(result: PermissiveResult, what: str) -> None:
    extra = result.model_extra or {}
    check(not extra, f"{what}: result {show(result.model_dump(by_alias=True, exclude_none=True))}, expected the empty result {{}}")


async def stream(session: ClientSession, task_id: str, after: Any = None) -> PermissiveResult:
    return await session.send_request(TaskStreamRequest(params=TaskStreamParams(taskId=task_id, after=after)), PermissiveResult)


async def expect_error(coro, code: int, what: str) -> types.ErrorData:
    try:
        r = await coro
    except McpError as e:
        check(e.error.code == code, f"{what}: error code {e.error.code} ({e.error.message}), expected {code}")
        return e.error
    raise CheckFailed(f"{what}: expected error {code}, got result {r!r}")


async def tap(source, sink) -> None:
    """Copies the transport's read stream to the session, taking out task event notifications."""
    async with sink:
        async for item in source:
            if isinstance(item, SessionMessage):
                raw = item.message.model_dump(by_alias=True, mode="json", exclude_none=True)
                wire.append(("<-", raw))
                if raw.get("method") == "notifications/tasks/event":
                    events.append(raw.get("params") or {})
                    continue  # the session would only drop it with a warning
            await sink.send(item)


async def tap_write(source, sink) -> None:
    """Copies what the session sends to the transport's write stream, recording it."""
    async with sink:
        async for item in source:
            if isinstance(item, SessionMessage):
                wire.append(("->", item.message.model_dump(by_alias=True, mode="json", exclude_none=True)))
            await sink.send(item)


async def run(session: ClientSession) -> None:
    # 1. initialize
    init = await session.initialize()
    step(f"initialize: protocolVersion {init.protocolVersion}, server {init.serverInfo.name} {init.serverInfo.version}")
    caps = init.capabilities
    check(caps.tools is not None, f"server capabilities lack tools: {caps!r}")
    check(caps.tasks is not None and caps.tasks.requests is not None and caps.tasks.requests.tools is not None
          and caps.tasks.requests.tools.call is not None,
          f"server capabilities lack tasks.requests.tools.call (SEP-1686): {caps.tasks!r}")
    check("eventStreams" in (caps.tasks.model_extra or {}), f"server capabilities lack tasks.eventStreams: {caps.tasks!r}")
    step(f"capabilities: tasks {show(caps.tasks.model_dump(by_alias=True, exclude_none=True))}")

    # 2. tools/list
    tools = (await session.list_tools()).tools
    names = [t.name for t in tools]
    check("emit" in names and "run_trace" in names, f"tools/list gave {names}, expected emit and run_trace")
    emit = next(t for t in tools if t.name == "emit")
    check(emit.execution is not None and emit.execution.taskSupport == "optional",
          f"emit: execution {emit.execution!r}, expected taskSupport \"optional\"")
    step(f"tools/list: {names}")

    # 3. emit as a task via the SDK's Tasks API, streamed while it runs
    n, payload_bytes = 10, 16
    created = await session.experimental.call_tool_as_task(
        "emit", {"count": n, "interval_ms": 40, "payload_bytes": payload_bytes}, ttl=60_000)
    task_id = created.task.taskId
    step(f"tools/call emit {{count:{n}}} as a task: taskId {task_id}, status {created.task.status}")
    box: dict[str, Any] = {}

    async def consume() -> None:
        box["result"] = await stream(session, task_id)
        box["events_at_end"] = len(events_of(task_id))

    statuses: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        async for status in session.experimental.poll_task(task_id):
            statuses.append(status.status)
    check(statuses[-1] == "completed", f"poll_task ended with {statuses[-1]}, expected completed")
    result = await session.experimental.get_task_result(task_id, types.CallToolResult)
    check(bool(result.content) and result.content[0].type == "text" and not result.isError,
          f"tasks/result: {result!r}, expected a text block")
    check((result.meta or {}).get(RELATED, {}).get("taskId") == task_id,
          f"tasks/result: _meta[\"{RELATED}\"] is {show((result.meta or {}).get(RELATED))}, expected {{\"taskId\":{show(task_id)}}}")
    step(f"poll_task (tasks/get) statuses {statuses}; tasks/result: {show(result.content[0].text)} with related-task _meta")
    check_empty(box["result"], "tasks/stream")
    evs = events_of(task_id)
    check_emit_stream(evs, task_id, n, "completed", payload_bytes)
    check(box["events_at_end"] == n + 2,
          f"tasks/stream answered after {box['events_at_end']} of {n + 2} events: the result must follow the last event")
    step(f"tasks/stream: {len(evs)} events, seq 0..{n + 1} gap-free, related-task _meta on each, result {{}}")

    # 4. resume after a cursor on the terminal task
    k = 3
    before = len(events)
    check_empty(await stream(session, task_id, after=k), "tasks/stream after")
    replay = events[before:]
    check_envelopes(replay, task_id, k + 1)
    check(len(replay) == n + 2 - (k + 1), f"tasks/stream {{after:{k}}}: {len(replay)} events, expected {n + 2 - (k + 1)}")
    for e in replay:
        check(e == evs[e["seq"]], f"replayed event seq {e['seq']} differs from the first delivery: {show(e)} vs {show(evs[e['seq']])}")
    step(f"tasks/stream {{after:{k}}}: seq {k + 1}..{n + 1}, identical to the first delivery")

    before = len(events)
    check_empty(await stream(session, task_id, after=n + 1), "tasks/stream at end")
    await anyio.sleep(0.1)
    check(len(events) == before, f"tasks/stream {{after:{n + 1}}} on a terminal task sent {len(events) - before} events, expected none")
    step(f"tasks/stream {{after:{n + 1}}}: immediate {{}} and no events")

    # 5. invalid cursors and unknown tasks
    for bad in (-1, 2.5, n + 2, "1"):
        await expect_error(stream(session, task_id, after=bad), -32602, f"tasks/stream {{after:{show(bad)}}}")
    await expect_error(stream(session, "no-such-task"), -32602, "tasks/stream on an unknown task")
    step("tasks/stream with after -1, 2.5, past the end, \"1\", and an unknown taskId: -32602 each")

    # 6. a failing task
    failing = await session.experimental.call_tool_as_task("emit", {"count": 5, "fail_at": 1}, ttl=60_000)
    fid = failing.task.taskId
    check_empty(await stream(session, fid), "tasks/stream (failing task)")
    fevs = events_of(fid)
    check(len(fevs) >= 2, f"failing task: {len(fevs)} events")
    check_envelopes(fevs, fid, 0)
    check(fevs[-1]["type"] == STATUS_TYPE and fevs[-1]["payload"].get("status") == "failed",
          f"failing task: last event {show(fevs[-1])}, expected status failed")
    ticks = [e["payload"].get("i") for e in fevs if e["type"] == TICK_TYPE]
    check(ticks == list(range(len(ticks))) and 1 in ticks and len(ticks) <= 5, f"failing task (fail_at 1): tick indices {ticks}")
    fstatus = (await session.experimental.get_task(fid)).status
    check(fstatus == "failed", f"failing task: tasks/get status {fstatus}, expected failed")
    step(f"emit {{fail_at:1}} as a task: {len(fevs)} events ending in status failed; tasks/get: failed")

    # 7. every bundled trace (the names run_trace's schema offers), replayed fast as a task
    trace_tool = next(t for t in tools if t.name == "run_trace")
    traces = ((trace_tool.inputSchema.get("properties") or {}).get("name") or {}).get("enum") or []
    check(bool(traces), f"run_trace: inputSchema.properties.name has no enum of trace names: {show(trace_tool.inputSchema)}")
    summary = []
    for name in traces:
        created = await session.experimental.call_tool_as_task("run_trace", {"name": name, "speed": 100_000}, ttl=60_000)
        tid = created.task.taskId
        check_empty(await stream(session, tid), f"tasks/stream (trace {name})")
        tevs = events_of(tid)
        check(len(tevs) >= 3, f"trace {name}: {len(tevs)} events")
        check_envelopes(tevs, tid, 0)
        check(tevs[0]["type"] == STATUS_TYPE and tevs[0]["payload"].get("status") == "working", f"trace {name}: first event {show(tevs[0])}")
        tstatus = (await session.experimental.get_task(tid)).status
        check(tstatus in ("completed", "failed", "cancelled"), f"trace {name}: tasks/get status {tstatus} after the stream ended")
        check(tevs[-1]["type"] == STATUS_TYPE and tevs[-1]["payload"].get("status") == tstatus,
              f"trace {name}: last event {show(tevs[-1])}, but tasks/get says {tstatus}")
        kinds = {e["type"] for e in tevs if e["type"] != STATUS_TYPE}
        check(len(kinds) >= 3, f"trace {name}: only event types {sorted(kinds)}")
        summary.append(f"{name}: {len(tevs)} events, {len(kinds)} types, {tstatus}")
    step(f"run_trace as a task, every bundled trace: {'; '.join(summary)}")


async def run_over_stdio(binary: str, args: list[str], client_name: str, steps) -> None:
    """Starts `binary args` as a stdio MCP server, connects the SDK's ClientSession to it
    through the wire taps, and runs `steps(session)`; prints the last wire messages if it fails."""
    params = StdioServerParameters(command=binary, args=args, env=dict(os.environ))
    errlog = open(os.devnull, "w") if os.environ.get("INTEROP_QUIET_STDERR") else sys.stderr
    with anyio.fail_after(60):
        async with stdio_client(params, errlog=errlog) as (read, write):
            sink, tapped_read = anyio.create_memory_object_stream(100)
            tapped_write, source = anyio.create_memory_object_stream(100)
            async with anyio.create_task_group() as tg:
                tg.start_soon(tap, read, sink)
                tg.start_soon(tap_write, source, write)
                try:
                    async with ClientSession(tapped_read, tapped_write, client_info=types.Implementation(
                            name=client_name, version="1.0.0")) as session:
                        await steps(session)
                except BaseException:
                    print("  --- last wire messages:")
                    for d, m in wire[-12:]:
                        print(f"  {d} {show(m)[:400]}")
                    raise
                tg.cancel_scope.cancel()


async def main() -> None:
    binary = os.environ.get("TASKSTREAM_BIN")
    check(bool(binary), "TASKSTREAM_BIN is not set")
    args = os.environ.get("TASKSTREAM_ARGS", "serve --in-memory --durability none").split()
    await run_over_stdio(binary, args, "taskstream-interop-py", run)


def entry(check_main=None) -> int:
    """Runs `check_main` (this check's `main` by default) and prints `ok` or why it failed."""
    try:
        anyio.run(check_main or main)
    except BaseException as exc:  # noqa: BLE001 - report anything, including exception groups
        e = exc
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        if isinstance(e, CheckFailed):
            print(f"error: {e}")
        elif isinstance(e, TimeoutError):
            print("error: timed out after 60 s")
        else:
            print(f"error: {type(e).__name__}: {e}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(entry())
