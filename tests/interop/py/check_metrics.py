"""The operations endpoints of `taskstream serve --http`, read by the Prometheus project's own
Python client: a known workload (an `emit` task of N events, streamed once from the start, then
a cursor retention has passed), then `/metrics` parsed with
`prometheus_client.parser.text_string_to_metric_families` and its values checked; `/healthz` and
`/readyz` answer 200.

Environment: TASKSTREAM_BIN (required) the server binary.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

MODERN = "2026-07-28"
N = 20
RETAINED = 8


def fail(message: str) -> None:
    # The interop runner's convention: the last line says `error: ...` (or `ok`).
    print(f"error: {message}")
    sys.exit(1)


def check(ok: bool, message: str) -> None:
    if not ok:
        fail(message)


def request(c: httpx.Client, url: str, rid: int, method: str, params: dict) -> httpx.Response:
    params = dict(params)
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    }
    headers = {"accept": "application/json, text/event-stream", "mcp-method": method}
    name = params.get("name") or params.get("taskId")
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    return c.post(url, json=body, headers=headers)


def main() -> None:
    binary = os.environ.get("TASKSTREAM_BIN")
    check(bool(binary), "TASKSTREAM_BIN is not set")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [binary, "serve", "--data-dir", f"{tmp}/d", "--max-events-per-task", str(RETAINED),
             "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            run(proc)
        finally:
            proc.kill()
            proc.wait()


def run(proc: subprocess.Popen) -> None:
    assert proc.stderr is not None
    url = None
    for line in proc.stderr:  # the server writes its address first; a dead one ends the loop
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/mcp", line)
        if m:
            url = m.group(1)
            break
    check(url is not None, "the server wrote no `listening on` line")
    mcp = f"{url}/mcp"
    with httpx.Client(timeout=20) as c:
        created = request(c, mcp, 1, "tools/call",
                          {"name": "emit", "arguments": {"count": N}}).json()
        task = created["result"]["taskId"]
        deadline = time.monotonic() + 20
        while True:
            got = request(c, mcp, 2, "tasks/get", {"taskId": task}).json()
            if got["result"]["status"] == "completed":
                break
            check(time.monotonic() < deadline, f"task still {got['result']['status']}")
        seqs = []
        with c.stream("POST", mcp, headers={
                "accept": "application/json, text/event-stream", "mcp-method": "tasks/stream",
                "mcp-name": task}, json={"jsonrpc": "2.0", "id": 3, "method": "tasks/stream",
                                         "params": {"taskId": task, "_meta": {
                                             "io.modelcontextprotocol/protocolVersion": MODERN,
                                             "io.modelcontextprotocol/clientCapabilities": {
                                                 "extensions": {
                                                     "io.modelcontextprotocol/tasks": {}}}}}}) as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    msg = json.loads(line[5:])
                    if msg.get("method") == "notifications/tasks/event":
                        seqs.append(msg["params"]["seq"])
        check(len(seqs) == RETAINED, f"streamed {seqs}")
        gone = request(c, mcp, 4, "tasks/stream", {"taskId": task, "after": 0})
        check("-32010" in gone.text, f"no events_gone: {gone.text}")

        text = c.get(f"{url}/metrics").text
        samples = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                key = s.name + "".join(f"[{k}={v}]" for k, v in sorted(s.labels.items()))
                samples[key] = s.value
        appended = seqs[-1] + 1
        want = {
            "taskstream_events_appended_total[store=data_dir]": appended,
            "taskstream_replays_total": 1,
            "taskstream_replayed_events_total": RETAINED,
            "taskstream_streams_open": 0,
            "taskstream_events_gone_total[reason=cursor]": 1,
            "taskstream_tasks[status=completed]": 1,
            "taskstream_ready": 1,
        }
        for key, value in want.items():
            check(samples.get(key) == value, f"{key} = {samples.get(key)}, wanted {value}")
        batches = samples.get("taskstream_commit_batch_records_count", 0)
        check(batches >= 1, "no group commit counted")
        check(samples.get("taskstream_commit_batch_records_sum", 0) >= appended,
              "the commits hold fewer records than the events appended")
        check(samples.get("taskstream_append_durable_seconds_count") == batches,
              "one append-to-durable wait per commit")
        for path in ("/healthz", "/readyz"):
            check(c.get(f"{url}{path}").status_code == 200, f"{path} not 200")
    print(f"check_metrics: {len(samples)} samples parsed, {appended} events appended, "
          f"{int(batches)} group commits")
    print("ok")


if __name__ == "__main__":
    main()
