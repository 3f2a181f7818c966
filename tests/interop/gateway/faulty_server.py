"""A deliberately misbehaving stdio MCP server (Python standard library only), run behind
`taskstream gateway` by the gateway's fault tests. `python3 faulty_server.py MODE`:

  garbage      writes lines that are not JSON-RPC messages before every answer
  silent       never answers anything (not even initialize)
  exit         exits at once, before initialize
  hang         answers initialize and tools/list; a tools/call gets one progress, never an
               answer; other requests (resources/list, ...) are never answered
  twice        answers each tools/call twice
  stray        sends progress for tokens and answers for ids that do not exist
  flood        sends 20000 progress notifications for a call, then answers it
  bad-result   answers tools/call with a result that is not a CallToolResult
  die          a call whose arguments have "die": true gets one progress, then the server
               exits with status 3; other calls are answered
  ask          a tools/call asks its client sampling/createMessage first, then answers with what
               the client said (or the error it got)
  die-once     as die, but once it has died (MARKER, the second argument, exists) it exits at
               once at every later start
  ok           behaves (one progress, one log message, then a text result)
"""

import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
out = sys.stdout


def send(msg):
    out.write(json.dumps(msg) + "\n")
    out.flush()


def answer(id_, result):
    if MODE == "garbage":
        out.write("this is not JSON\n[1, 2, 3]\n{\"jsonrpc\": \"2.0\"}\n")
    send({"jsonrpc": "2.0", "id": id_, "result": result})


def progress(token, i, total=None):
    p = {"progressToken": token, "progress": i}
    if total is not None:
        p["total"] = total
    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": p})


TOOL = {
    "name": "work",
    "description": "Does some work, or misbehaves",
    "inputSchema": {"type": "object", "properties": {"die": {"type": "boolean"}}},
}


def main():
    if MODE == "exit":
        sys.exit(5)
    marker = sys.argv[2] if len(sys.argv) > 2 else None
    if MODE == "die-once" and marker and os.path.exists(marker):
        sys.exit(6)
    asking = {}  # our request id -> the tools/call id waiting for its answer
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "method" not in msg and msg.get("id") in asking:
            call = asking.pop(msg["id"])
            if "result" in msg:
                text = "client said: " + msg["result"].get("content", {}).get("text", "")
            else:
                text = "client refused: " + msg.get("error", {}).get("message", "")
            answer(call, {"content": [{"type": "text", "text": text}]})
            continue
        if MODE == "silent" or "id" not in msg or "method" not in msg:
            continue
        id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            answer(id_, {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "faulty-" + MODE, "version": "0"},
            })
        elif method == "tools/list":
            answer(id_, {"tools": [TOOL]})
        elif method == "tools/call":
            token = (params.get("_meta") or {}).get("progressToken")
            args = params.get("arguments") or {}
            if MODE == "ask":
                ask = "ask-%s" % id_
                asking[ask] = id_
                send({"jsonrpc": "2.0", "id": ask, "method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "hello?"}}],
                    "maxTokens": 10}})
                continue
            if MODE == "hang":
                progress(token, 1)
                continue
            if MODE == "stray":
                progress("no-such-token", 1)
                send({"jsonrpc": "2.0", "id": 987654, "result": {"content": []}})
            if MODE == "flood":
                for i in range(1, 20001):
                    progress(token, i, 20000)
            if MODE == "die-once" and marker and args.get("die"):
                open(marker, "w").close()
                sys.exit(3)
            if MODE == "die" and args.get("die"):
                progress(token, 1, 2)
                sys.exit(3)
            if MODE == "bad-result":
                answer(id_, {"content": "this should be an array"})
                continue
            progress(token, 1, 1)
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "logger": "work", "data": "working"}})
            result = {"content": [{"type": "text", "text": "done"}]}
            answer(id_, result)
            if MODE == "twice":
                answer(id_, {"content": [{"type": "text", "text": "a second answer"}]})
        elif method == "ping":
            answer(id_, {})
        elif MODE == "hang":
            continue
        else:
            send({"jsonrpc": "2.0", "id": id_,
                  "error": {"code": -32601, "message": "method not found"}})


main()
