#!/usr/bin/env python3
"""A small stand-in for `taskstream serve`, speaking the legacy (2025-11-25) wire contract.

It exists only to test the interop checks themselves: run correctly it must make every check
pass, and with `--fault NAME` it breaks one property of the contract on purpose, so that the
checks can be shown to fail when the server is wrong (`scripts/interop --self-test`).

Faults:
  seq-gap     skips one seq number in every task's event log (seq 2 is never issued)
  seq-start   numbers events from 1 instead of 0
  meta        puts a wrong taskId in `_meta["io.modelcontextprotocol/related-task"]`
  no-meta     leaves `_meta` out of event notifications
  no-terminal never appends the terminal status event
  no-tools    lists no tools

Standard library only; accepts the same arguments as `taskstream serve` and ignores them.
"""
import json
import sys
import threading
import time
import uuid
from datetime import datetime, timezone

RELATED = "io.modelcontextprotocol/related-task"
PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
TASKS_EXT = "io.modelcontextprotocol/tasks"
MODERN = "2026-07-28"
SERVER_INFO = {"name": "fake-taskstream", "version": "0.0.0"}
SUPPORTED = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
FAULT = ""
args = sys.argv[1:]
if "--fault" in args:
    FAULT = args[args.index("--fault") + 1]

out_lock = threading.Lock()


def send(msg):
    line = json.dumps(msg, separators=(",", ":"))
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def reply(rid, result):
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def error(rid, code, message, data=None):
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    send({"jsonrpc": "2.0", "id": rid, "error": err})


def now():
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


TOOLS = [
    {
        "name": "emit",
        "description": "Emit count synthetic task events",
        "inputSchema": {
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 0},
                "interval_ms": {"type": "integer", "minimum": 0},
                "payload_bytes": {"type": "integer", "minimum": 0},
                "fail_at": {"type": "integer", "minimum": 0},
            },
            "required": ["count"],
        },
        "execution": {"taskSupport": "optional"},
    },
    {
        "name": "run_trace",
        "description": "Replay a bundled trace",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": ["tiny"]}, "speed": {"type": "number"}},
            "required": ["name"],
        },
        "execution": {"taskSupport": "optional"},
    },
]


class Task:
    def __init__(self, ttl):
        self.id = str(uuid.uuid4())
        self.status = "working"
        self.ttl = ttl
        self.created = now()
        self.updated = self.created
        self.events = []
        self.result = None
        self.cond = threading.Condition()
        self.next_seq = 1 if FAULT == "seq-start" else 0

    def view(self):
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttl": self.ttl,
            "pollInterval": 100,
        }

    def view_modern(self):
        """The SEP-2663 task shape; with `detailed`, the inline result of a terminal task."""
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttlMs": self.ttl,
            "pollIntervalMs": 100,
        }

    def detailed(self):
        v = self.view_modern()
        if self.status == "completed":
            v["result"] = {"resultType": "complete", **self.result}
        elif self.status == "failed":
            v["error"] = {"code": -32603, "message": "emit failed"}
        return v

    def append(self, etype, payload):
        with self.cond:
            if FAULT == "seq-gap" and self.next_seq == 2:
                self.next_seq += 1
            self.events.append({"seq": self.next_seq, "taskId": self.id, "type": etype, "payload": payload})
            self.next_seq += 1
            self.cond.notify_all()

    def finish(self, status, result):
        with self.cond:
            self.status = status
            self.updated = now()
            self.result = result
        if FAULT != "no-terminal":
            self.append("dev.taskstream.task.status", {"status": status})
        with self.cond:
            self.cond.notify_all()

    def terminal(self):
        return self.status in ("completed", "failed", "cancelled")


tasks = {}
streams = {}  # request id -> (task id, cancelled flag)
active = set()  # task ids with an open stream
state_lock = threading.Lock()


def run_emit(task, a):
    count = int(a.get("count", 0))
    interval = int(a.get("interval_ms", 0)) / 1000.0
    nbytes = int(a.get("payload_bytes", 0))
    fail_at = a.get("fail_at")
    task.append("dev.taskstream.task.status", {"status": "working"})
    for i in range(count):
        if i and interval:
            time.sleep(interval)
        task.append("dev.taskstream.tick", {"i": i, "data": "x" * nbytes})
        if fail_at is not None and i == int(fail_at):
            task.finish("failed", {"content": [{"type": "text", "text": f"failed at {i}"}], "isError": True})
            return
    task.finish("completed", {"content": [{"type": "text", "text": f"emitted {count} events"}]})


def run_trace(task, a):
    task.append("dev.taskstream.task.status", {"status": "working"})
    task.append("dev.taskstream.content.partial", {"content": [{"type": "text", "text": "hello"}]})
    task.append("dev.taskstream.tool.call", {"name": "grep", "arguments": {}})
    task.append("dev.taskstream.tool.result", {"name": "grep", "content": []})
    task.append("dev.taskstream.artifact", {"uri": "file:///tmp/report.md"})
    task.finish("completed", {"content": [{"type": "text", "text": "trace replayed"}]})


def event_notification(ev):
    params = dict(ev)
    if FAULT != "no-meta":
        meta_id = ev["taskId"] + "-wrong" if FAULT == "meta" else ev["taskId"]
        params["_meta"] = {RELATED: {"taskId": meta_id}}
    return {"jsonrpc": "2.0", "method": "notifications/tasks/event", "params": params}


def serve_stream(rid, task, after, cancelled, final):
    try:
        idx = 0
        with task.cond:
            if after is not None:
                while idx < len(task.events) and task.events[idx]["seq"] <= after:
                    idx += 1
        while True:
            with task.cond:
                while idx >= len(task.events) and not task.terminal() and not cancelled.is_set():
                    task.cond.wait(0.2)
                if cancelled.is_set():
                    return
                batch = task.events[idx:]
                idx = len(task.events)
                done = task.terminal()
            for ev in batch:
                send(event_notification(ev))
            if done and idx >= len(task.events):
                reply(rid, final)
                return
    finally:
        with state_lock:
            if streams.pop(rid, None):
                active.discard(task.id)


def handle(msg):
    method = msg.get("method")
    rid = msg.get("id")
    params = msg.get("params") or {}
    if rid is None:
        if method == "notifications/cancelled":
            with state_lock:
                entry = streams.pop(params.get("requestId"), None)
                if entry:
                    active.discard(entry[0])
                    entry[1].set()
        return
    meta = params.get("_meta") or {}
    modern = PROTOCOL_VERSION in meta
    if modern:
        if meta.get(PROTOCOL_VERSION) != MODERN:
            error(rid, -32022, "Unsupported protocol version", {"supported": [MODERN], "requested": meta.get(PROTOCOL_VERSION)})
            return
        declared = TASKS_EXT in ((meta.get(CLIENT_CAPABILITIES) or {}).get("extensions") or {})
        if method.startswith("tasks/") and not declared:
            error(rid, -32021, "Missing required client capability",
                  {"requiredCapabilities": {"extensions": {TASKS_EXT: {}}}})
            return
        if method == "server/discover":
            reply(rid, {
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {"listChanged": False}, "extensions": {TASKS_EXT: {}}},
                "serverInfo": SERVER_INFO,
                "ttlMs": 0,
                "cacheScope": "public",
            })
            return
        if method == "tools/list":
            reply(rid, {"resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                        "tools": [] if FAULT == "no-tools" else TOOLS})
            return
        if method == "tools/call":
            name = params.get("name")
            if name not in ("emit", "run_trace"):
                error(rid, -32602, f"unknown tool {name}")
                return
            body = run_emit if name == "emit" else run_trace
            task = Task(60000)
            if declared:
                with state_lock:
                    tasks[task.id] = task
                reply(rid, {"resultType": "task", **task.view_modern()})
                threading.Thread(target=body, args=(task, params.get("arguments") or {}), daemon=True).start()
            else:
                body(task, params.get("arguments") or {})
                reply(rid, {"resultType": "complete", **task.result})
            return
        if method == "tasks/get":
            task = tasks.get(params.get("taskId"))
            if task is None:
                error(rid, -32602, "unknown task")
            else:
                reply(rid, {"resultType": "complete", **task.detailed()})
            return
        if method not in ("tasks/stream",):
            error(rid, -32601, f"Method not found: {method}")
            return
    if method == "initialize":
        requested = params.get("protocolVersion")
        reply(rid, {
            "protocolVersion": requested if requested in SUPPORTED else SUPPORTED[0],
            "capabilities": {
                "tools": {"listChanged": False},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}, "eventStreams": {}},
            },
            "serverInfo": SERVER_INFO,
        })
    elif method == "ping":
        reply(rid, {})
    elif method == "tools/list":
        reply(rid, {"tools": [] if FAULT == "no-tools" else TOOLS})
    elif method == "tools/call":
        name = params.get("name")
        a = params.get("arguments") or {}
        if name not in ("emit", "run_trace"):
            error(rid, -32602, f"unknown tool {name}")
            return
        body = run_emit if name == "emit" else run_trace
        if "task" in params:
            task = Task((params.get("task") or {}).get("ttl"))
            with state_lock:
                tasks[task.id] = task
            reply(rid, {"task": task.view()})
            threading.Thread(target=body, args=(task, a), daemon=True).start()
        else:
            task = Task(None)
            body(task, a)
            reply(rid, task.result)
    elif method == "tasks/get":
        task = tasks.get(params.get("taskId"))
        if task is None:
            error(rid, -32602, "unknown task")
        else:
            reply(rid, task.view())
    elif method == "tasks/result":
        task = tasks.get(params.get("taskId"))
        if task is None:
            error(rid, -32602, "unknown task")
            return

        def wait_result():
            with task.cond:
                while not task.terminal():
                    task.cond.wait(0.2)
            res = dict(task.result)
            res["_meta"] = {RELATED: {"taskId": task.id}}
            reply(rid, res)

        threading.Thread(target=wait_result, daemon=True).start()
    elif method == "tasks/list":
        reply(rid, {"tasks": [t.view() for t in tasks.values()]})
    elif method == "tasks/stream":
        task = tasks.get(params.get("taskId"))
        after = params.get("after")
        if task is None:
            error(rid, -32602, "unknown task")
            return
        if "after" in params and (type(after) is not int or after < 0 or after >= task.next_seq):
            error(rid, -32602, "invalid after")
            return
        with state_lock:
            if task.id in active:
                error(rid, -32602, "stream already active", {"reason": "stream_active"})
                return
            active.add(task.id)
            cancelled = threading.Event()
            streams[rid] = (task.id, cancelled)
        final = {"resultType": "complete"} if modern else {}
        threading.Thread(target=serve_stream, args=(rid, task, after, cancelled, final), daemon=True).start()
    else:
        error(rid, -32601, f"Method not found: {method}")


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        handle(msg)


if __name__ == "__main__":
    main()
