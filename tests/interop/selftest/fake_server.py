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
  no-result-type  leaves `resultType` out of a completed task's inline result (2026-07-28 tasks/get)

With `--http HOST:PORT` it serves the same contract over Streamable HTTP at `/mcp` (one JSON
response per POST, or for `tasks/stream` an SSE stream of the events then the response; a legacy
`initialize` is answered with an `Mcp-Session-Id`), and writes `listening on http://HOST:PORT/mcp`
to stderr, as `taskstream serve --http` does.

Standard library only; accepts the same arguments as `taskstream serve` and ignores the others.
"""
import json
import queue
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
EVENT_STREAMS_EXT = "dev.taskstream/event-streams"
FAULT = ""
args = sys.argv[1:]
if "--fault" in args:
    FAULT = args[args.index("--fault") + 1]
HTTP = args[args.index("--http") + 1] if "--http" in args else None

out_lock = threading.Lock()
# Over HTTP: where each message goes, by the (internal) id of the request it belongs to.
sinks = {}


def send(msg, stream_of=None):
    """Sends a message; `stream_of` names the tasks/stream request a notification belongs to."""
    if HTTP is not None:
        key = msg.get("id") if ("result" in msg or "error" in msg) else stream_of
        with out_lock:
            sink = sinks.get(key)
        if sink is not None:
            sink.put(msg)
        return
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
            v["result"] = dict(self.result) if FAULT == "no-result-type" else {"resultType": "complete", **self.result}
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
                send(event_notification(ev), rid)
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
                "capabilities": {"tools": {"listChanged": False},
                                 "extensions": {TASKS_EXT: {}, EVENT_STREAMS_EXT: {}}},
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


def serve_http(address):
    """The same contract over Streamable HTTP: each POST is one message."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    host, _, port = address.rpartition(":")
    ids = iter(range(1, 1 << 62))

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def answer(self, status, body=b"", ctype="application/json", headers=()):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.answer(405)

        def do_DELETE(self):
            self.answer(200)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                msg = json.loads(body)
            except ValueError:
                msg = None
            if not isinstance(msg, dict):
                self.answer(400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
                return
            if "id" not in msg or "method" not in msg:
                handle(msg)
                self.answer(202)
                return
            rid = msg["id"]
            internal = f"http-{next(ids)}"
            sink = queue.Queue()
            with out_lock:
                sinks[internal] = sink
            try:
                handle({**msg, "id": internal})
                first = sink.get(timeout=60)
                if "id" in first:
                    headers = [("Mcp-Session-Id", str(uuid.uuid4()))] if msg["method"] == "initialize" else []
                    self.answer(200, json.dumps({**first, "id": rid}).encode(), headers=headers)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                m = first
                while True:
                    if "id" in m:
                        m = {**m, "id": rid}
                    self.wfile.write(b"data: " + json.dumps(m).encode() + b"\n\n")
                    self.wfile.flush()
                    if "id" in m:
                        return
                    m = sink.get(timeout=60)
            except (queue.Empty, OSError):
                self.close_connection = True
            finally:
                with out_lock:
                    sinks.pop(internal, None)

    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    sys.stderr.write(f"fake-taskstream listening on http://{host}:{server.server_address[1]}/mcp\n")
    sys.stderr.flush()
    server.serve_forever()


def main():
    if HTTP is not None:
        serve_http(HTTP)
        return
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
