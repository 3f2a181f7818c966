"""A scripted MCP server on stdio (2025-11-25) holding one finished task, `t-1`, as
`taskstream serve --retain-from-checkpoint` keeps it: events 0 to 4 dropped, then a checkpoint
(seq 5, covering 0..4), a tick (seq 6) and the terminal status (seq 7). For the checkpoint
tests, until those run against `taskstream serve` itself."""

import json
import sys

TASK = "t-1"
META = {"io.modelcontextprotocol/related-task": {"taskId": TASK}}
EVENTS = [
    {"seq": 5, "type": "dev.taskstream.checkpoint", "payload": {"coversThrough": 4, "state": {"ticks": 4}}},
    {"seq": 6, "type": "dev.taskstream.tick", "payload": {"i": 4}},
    {"seq": 7, "type": "dev.taskstream.task.status", "payload": {"status": "completed"}},
]
EARLIEST, LATEST = 5, 7


def send(message: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def answer(request: dict) -> None:
    method, params, rid = request.get("method"), request.get("params") or {}, request.get("id")
    if method == "initialize":
        send({"id": rid, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {"requests": {}}},
                                    "serverInfo": {"name": "checkpoint-server", "version": "0"}}})
    elif method == "ping":
        send({"id": rid, "result": {}})
    elif method == "tasks/get" and params.get("taskId") == TASK:
        send({"id": rid, "result": {
            "taskId": TASK, "status": "completed", "createdAt": "2026-12-06T00:00:00Z",
            "lastUpdatedAt": "2026-12-06T00:00:00Z", "ttl": 60000, "pollInterval": 1000,
            "_meta": {"dev.taskstream/events": {"earliestSeq": EARLIEST, "latestSeq": LATEST, "nextSeq": LATEST + 1}},
        }})
    elif method == "tasks/stream" and params.get("taskId") == TASK:
        after = params.get("after")
        if after is not None and after + 1 < EARLIEST:
            send({"id": rid, "error": {"code": -32010, "message": "events gone",
                                       "data": {"reason": "events_gone", "earliestSeq": EARLIEST}}})
            return
        for event in EVENTS:
            if after is None or event["seq"] > after:
                send({"method": "notifications/tasks/event", "params": {"taskId": TASK, **event, "_meta": META}})
        send({"id": rid, "result": {}})
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


for line in sys.stdin:
    if line.strip():
        answer(json.loads(line))
