"""Interop check: the official Python MCP SDK (`mcp` 1.x, 2025-11-25 era, SEP-1686 tasks) as a
client of `taskstream gateway` in front of a FastMCP server (tests/interop/gateway/
fastmcp_server.py, on the same SDK), which reports progress and log messages as any FastMCP
tool does and knows nothing of taskstream.

It calls the server's `count` tool as a task through the SDK's experimental Tasks API, follows
the task with `tasks/stream`, cuts the stream part way (`notifications/cancelled`; the task goes
on), resumes with `after` = the last seq it processed, and checks that every progress step and
log message arrived exactly once, seq gap-free, ending in the status `tasks/get` reports, with
FastMCP's result; then reads a resource and a prompt through the gateway. Exit 1 with a last
line `error: ...` on any violated property.

Environment: TASKSTREAM_BIN (required) the taskstream binary.
"""

import os
import sys
import warnings
from pathlib import Path

import anyio

import mcp.types as types
from mcp import ClientSession

from check import (STATUS_TYPE, check, check_empty, check_envelopes, events, events_of,
                   run_over_stdio, show, step, stream, wire)
from check import entry as check_entry

warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*experimental tasks API.*")

PROGRESS_TYPE = "dev.taskstream.progress"
LOG_TYPE = "dev.taskstream.log"
N = 8


async def run(session: ClientSession) -> None:
    init = await session.initialize()
    caps = init.capabilities.model_dump(by_alias=True, exclude_none=True)
    check("eventStreams" in (caps.get("tasks") or {}), f"gateway capabilities lack tasks.eventStreams: {show(caps)}")
    check("resources" in caps and "prompts" in caps, f"the inner server's resources and prompts are not offered: {show(caps)}")
    tools = (await session.list_tools()).tools
    check(any(t.name == "count" for t in tools), f"tools/list: {[t.name for t in tools]}")
    step(f"initialize and tools/list through the gateway: {[t.name for t in tools]}")

    created = await session.experimental.call_tool_as_task("count", {"n": N, "delay_ms": 100}, ttl=60_000)
    task_id = created.task.taskId

    # Follow, then cut after a few events.
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream, session, task_id)
        with anyio.fail_after(20):
            while len(events_of(task_id)) < 4:
                await anyio.sleep(0.02)
        sent = [m for d, m in wire if d == "->" and m.get("method") == "tasks/stream"]
        check(len(sent) == 1, f"{len(sent)} tasks/stream requests sent")
        await session.send_notification(types.ClientNotification(types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=sent[0]["id"], reason="cut"))))
        tg.cancel_scope.cancel()
    seen = events_of(task_id)
    last = seen[-1]["seq"]
    step(f"task {task_id}: followed to seq {last}, then cut the stream; resuming with after {last}")
    check_empty(await stream(session, task_id, after=last), "tasks/stream after")

    evs = sorted({e["seq"]: e for e in events_of(task_id)}.values(), key=lambda e: e["seq"])
    check_envelopes(evs, task_id, 0)
    check(evs[0]["type"] == STATUS_TYPE and evs[0]["payload"].get("status") == "working", f"first event {show(evs[0])}")
    progress = [e["payload"] for e in evs if e["type"] == PROGRESS_TYPE]
    logs = [e["payload"] for e in evs if e["type"] == LOG_TYPE]
    check(progress == [{"progress": float(i), "total": float(N), "message": f"step {i} of {N}"} for i in range(1, N + 1)],
          f"progress events {show(progress)}")
    check([l.get("data") for l in logs] == [f"step {i}" for i in range(1, N + 1)] and all(l.get("level") == "info" for l in logs),
          f"log events {show(logs)}")
    check(len(evs) == 2 * N + 2, f"{len(evs)} events: {[e['type'] for e in evs]}")
    got = await session.experimental.get_task(task_id)
    check(got.status == "completed" and evs[-1]["payload"].get("status") == "completed", f"tasks/get {got.status}, last {show(evs[-1])}")
    result = await session.experimental.get_task_result(task_id, types.CallToolResult)
    check(result.content and result.content[0].text == f"counted to {N}", f"result {result}")
    step(f"resumed stream: {N} progress and {N} log events once each, seq 0..{2 * N + 1} gap-free, completed; result {result.content[0].text!r}")

    note = await session.read_resource("note://hello")
    check(note.contents[0].text == "hello from the inner server", f"resources/read: {note}")
    prompt = await session.get_prompt("greet", {"name": "Ada"})
    check("Ada" in prompt.messages[0].content.text, f"prompts/get: {prompt}")
    step("resources/read and prompts/get passed on to the FastMCP server")


async def main() -> None:
    binary = os.environ.get("TASKSTREAM_BIN")
    check(bool(binary), "TASKSTREAM_BIN is not set")
    here = Path(__file__).resolve().parent
    server = here.parent / "gateway" / "fastmcp_server.py"
    args = ["gateway", "--in-memory", "--durability", "none", "--", sys.executable, str(server)]
    await run_over_stdio(binary, args, "taskstream-interop-py-gateway", run)


def entry() -> int:
    return check_entry(main)


if __name__ == "__main__":
    sys.exit(entry())
