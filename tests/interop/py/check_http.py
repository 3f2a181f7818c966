"""Interop check over Streamable HTTP: the official Python MCP SDK's streamable HTTP client
(2025-11-25 era: a session, `Mcp-Session-Id`) against `taskstream serve --http`, with exactly the
steps of `check.py` (initialize, tools, tasks through the SDK's Tasks API, `tasks/stream` answered
as SSE, resume with `after`, cursor rules, a failing task, every bundled trace).

Environment: TASKSTREAM_BIN (required) the server binary; TASKSTREAM_ARGS (optional) its
arguments, default `serve --in-memory --durability none` (`--http 127.0.0.1:0` is added).
"""

import os
import queue
import re
import subprocess
import sys
import threading

import anyio

import check
import mcp.types as types
from mcp import ClientSession

try:
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # older name
    from mcp.client.streamable_http import streamablehttp_client as http_client


def start_server() -> tuple[subprocess.Popen, str]:
    binary = os.environ.get("TASKSTREAM_BIN")
    check.check(bool(binary), "TASKSTREAM_BIN is not set")
    args = os.environ.get("TASKSTREAM_ARGS", "serve --in-memory --durability none").split()
    proc = subprocess.Popen([binary, *args, "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=20)
        except queue.Empty:
            proc.kill()
            raise check.CheckFailed("the server wrote no `listening on` line in 20 s")
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", line)
        if m:
            return proc, m.group(1)


async def main() -> None:
    proc, url = start_server()
    try:
        with anyio.fail_after(60):
            async with http_client(url) as streams:
                read, write = streams[0], streams[1]
                sink, tapped_read = anyio.create_memory_object_stream(100)
                tapped_write, source = anyio.create_memory_object_stream(100)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(check.tap, read, sink)
                    tg.start_soon(check.tap_write, source, write)
                    try:
                        async with ClientSession(tapped_read, tapped_write, client_info=types.Implementation(
                                name="taskstream-interop-py-http", version="1.0.0")) as session:
                            await check.run(session)
                    except BaseException:
                        print("  --- last wire messages:")
                        for d, m in check.wire[-12:]:
                            print(f"  {d} {check.show(m)[:400]}")
                        raise
                    tg.cancel_scope.cancel()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def entry() -> int:
    return check.entry(main)


if __name__ == "__main__":
    sys.exit(entry())
