#!/usr/bin/env python3
"""Generates the bundled traces in data/traces/ (see data/README.md for the line format).

Deterministic: every scenario draws from its own random.Random with a fixed seed, and nothing
reads the clock or the environment, so two runs write byte-identical files. Standard library
only.

    python3 data/gen_traces.py            # (re)write data/traces/*.jsonl
    python3 data/gen_traces.py --check    # exit 1 if a committed trace differs from the output
"""

import argparse
import hashlib
import json
import random
import re
import sys
import uuid
from pathlib import Path

sys.dont_write_bytecode = True

HERE = Path(__file__).resolve().parent
TRACES = HERE / "traces"
FIXTURES = HERE / "fixtures"

FORMAT = 1
PREFIX = "dev.taskstream."
# a reverse-DNS namespace of at least two labels plus a name (the rule core/src/event.rs
# enforces): three or more labels of [A-Za-z0-9_-], the first starting with a letter.
TYPE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+){2,}$")
MAX_TYPE_BYTES = 128
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# The server's defaults (docs/interface.md): a trace must replay under them without loss.
MAX_PAYLOAD_BYTES = 65536
MAX_EVENTS = 10000 - 2  # the server adds a working and a terminal status event
MAX_FILE_BYTES = 2 * 1024 * 1024
# The server emits these itself; a trace must not.
RESERVED_TYPES = {PREFIX + "task.status"}


def compact(value):
    """The one serialisation used for lines and for measuring payloads."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sha256_hex(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fixture(*parts):
    return FIXTURES.joinpath(*parts).read_text(encoding="utf-8")


def line_of(text, needle, start=1):
    """1-based number of the first line at or after `start` that contains `needle`."""
    for number, line in enumerate(text.split("\n"), 1):
        if number >= start and needle in line:
            return number
    raise ValueError(f"{needle!r} not found")


def numbered(text, first=1, last=None):
    """`cat -n` style excerpt, as a read_file tool shows it."""
    lines = text.rstrip("\n").split("\n")
    last = len(lines) if last is None else min(last, len(lines))
    return "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(first, last + 1))


_TOKEN_RE = re.compile(r"\s*[A-Za-z]+|\s*\d{1,3}|\s*[^\sA-Za-z\d]|\s+")


def tokens(text):
    """Splits text roughly the way a model's tokenizer would: words, short digit runs and
    single punctuation marks, each with its leading white space; long words in pieces."""
    out = []
    for piece in _TOKEN_RE.findall(text):
        while len(piece) > 9:
            out.append(piece[:6])
            piece = piece[6:]
        out.append(piece)
    assert "".join(out) == text
    return out


class Trace:
    """Accumulates the events of one trace on a virtual clock (milliseconds)."""

    def __init__(self, name, seed, title, description, model):
        assert NAME_RE.match(name), name
        self.name = name
        self.title = title
        self.description = description
        self.model = model
        self.rng = random.Random(seed)
        self.t = 0
        self.events = []
        self.messages = 0
        self.context_tokens = 1800  # system prompt and tool definitions

    # --- clock and ids -------------------------------------------------------------------

    def wait(self, ms):
        self.t += max(0, int(round(ms)))

    def jitter(self, lo, hi):
        self.wait(self.rng.uniform(lo, hi))

    def hex_id(self, prefix, digits=12):
        return f"{prefix}{self.rng.getrandbits(4 * digits):0{digits}x}"

    def uuid4(self):
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    # --- events --------------------------------------------------------------------------

    def emit(self, kind, payload):
        kind = PREFIX + kind
        assert isinstance(payload, dict), kind
        self.events.append({"t_ms": self.t, "type": kind, "payload": payload})

    def stream_text(self, text, stop_reason="end_turn", ttft=(700, 2400), role="assistant"):
        """One model turn: time to first token, then text deltas that grow one message, then
        the complete message and the turn's token usage. Returns the message id."""
        self.messages += 1
        message_id = f"msg-{self.messages:03d}"
        self.jitter(*ttft)
        pieces = tokens(text)
        index = 0
        i = 0
        while i < len(pieces):
            take = self.rng.choices((1, 2, 3), weights=(55, 35, 10))[0]
            delta = "".join(pieces[i : i + take])
            i += take
            self.emit(
                "content.partial",
                {
                    "messageId": message_id,
                    "role": role,
                    "index": index,
                    "content": [{"type": "text", "text": delta}],
                },
            )
            index += 1
            gap = min(90.0, max(8.0, self.rng.gauss(27, 9))) * take / 1.6
            if self.rng.random() < 0.015:
                gap += self.rng.uniform(120, 600)
            self.wait(gap)
        self.emit(
            "content.done",
            {
                "messageId": message_id,
                "role": role,
                "stopReason": stop_reason,
                "deltas": index,
                "content": [{"type": "text", "text": text}],
            },
        )
        self.usage(message_id, output_chars=len(text))
        return message_id

    def usage(self, message_id, output_chars):
        output_tokens = max(1, output_chars // 4 + self.rng.randint(0, 12))
        cached = int(self.context_tokens * self.rng.uniform(0.82, 0.97))
        self.emit(
            "model.usage",
            {
                "messageId": message_id,
                "model": self.model,
                "inputTokens": self.context_tokens,
                "cacheReadTokens": cached,
                "outputTokens": output_tokens,
            },
        )
        self.context_tokens += output_tokens

    def tool_call(self, name, arguments, think_chars=0):
        """The model emits a tool call; generating its arguments takes time."""
        self.wait(len(compact(arguments)) / 4 * self.rng.uniform(14, 22) + think_chars / 4 * 20)
        call_id = self.hex_id("call-", 10)
        self.emit("tool.call", {"callId": call_id, "name": name, "arguments": arguments})
        self.context_tokens += len(compact(arguments)) // 4 + 20
        return call_id

    def tool_result(self, call_id, name, text, started_at, is_error=False, structured=None):
        payload = {
            "callId": call_id,
            "name": name,
            "isError": is_error,
            "durationMs": self.t - started_at,
            "content": [{"type": "text", "text": text}],
        }
        if structured is not None:
            payload["structuredContent"] = structured
        self.emit("tool.result", payload)
        self.context_tokens += len(text) // 4 + 20

    def tool(self, name, arguments, text, latency, is_error=False, structured=None):
        """A tool call whose result arrives after `latency` (ms, or a (lo, hi) range)."""
        call_id = self.tool_call(name, arguments)
        started = self.t
        if isinstance(latency, tuple):
            self.jitter(*latency)
        else:
            self.wait(latency)
        self.tool_result(call_id, name, text, started, is_error, structured)
        return call_id

    def plan(self, steps, done, active=()):
        """The agent's plan: steps before `done` are done, those in `active` in progress."""
        active = {active} if isinstance(active, int) else set(active)
        items = []
        for i, (step_id, title) in enumerate(steps):
            status = "done" if i < done else ("in_progress" if i in active else "pending")
            items.append({"id": step_id, "title": title, "status": status})
        self.emit("plan.updated", {"steps": items})

    # --- output --------------------------------------------------------------------------

    def lines(self, outcome, result_text, status_message=None, tail_ms=400):
        duration = self.t + tail_ms
        header = {
            "format": FORMAT,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "duration_ms": duration,
            "event_count": len(self.events),
            "outcome": outcome,
        }
        if status_message is not None:
            header["status_message"] = status_message
        header["result"] = {
            "content": [{"type": "text", "text": result_text}],
            "isError": outcome == "failed",
        }
        return [compact({"trace": header})] + [compact(e) for e in self.events]


def check(lines):
    """Checks one trace against the rules of data/README.md; returns a summary dict."""
    header = json.loads(lines[0])["trace"]
    assert header["format"] == FORMAT
    assert NAME_RE.match(header["name"])
    assert header["outcome"] in ("completed", "failed")
    assert header["result"]["isError"] == (header["outcome"] == "failed")
    assert header["event_count"] == len(lines) - 1 <= MAX_EVENTS
    last = 0
    largest = 0
    types = {}
    for line in lines[1:]:
        event = json.loads(line)
        assert set(event) == {"t_ms", "type", "payload"}, event
        t, kind, payload = event["t_ms"], event["type"], event["payload"]
        assert isinstance(t, int) and t >= last, (t, last)
        last = t
        assert TYPE_RE.match(kind) and len(kind) <= MAX_TYPE_BYTES, kind
        assert kind.startswith(PREFIX) and kind not in RESERVED_TYPES, kind
        assert isinstance(payload, dict), kind
        size = len(compact(payload).encode("utf-8"))
        assert size <= MAX_PAYLOAD_BYTES, (kind, size)
        largest = max(largest, size)
        types[kind] = types.get(kind, 0) + 1
    assert header["duration_ms"] >= last
    text = "\n".join(lines) + "\n"
    assert "\u2028" not in text and "\u2029" not in text
    size = len(text.encode("utf-8"))
    assert size <= MAX_FILE_BYTES, size
    return {
        "name": header["name"],
        "events": len(lines) - 1,
        "duration_ms": header["duration_ms"],
        "bytes": size,
        "largest_payload": largest,
        "types": types,
    }


def build_all():
    from scenarios import agent_delegation, build_and_test, code_review

    return {
        "code-review": code_review.build(),
        "build-and-test": build_and_test.build(),
        "agent-delegation": agent_delegation.build(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with data/traces/, write nothing")
    parser.add_argument("--stats", action="store_true", help="print per-type event counts")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    stale = []
    for name, lines in build_all().items():
        summary = check(lines)
        assert summary["name"] == name
        text = "\n".join(lines) + "\n"
        path = TRACES / f"{name}.jsonl"
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            TRACES.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
        print(
            f"{name}: {summary['events']} events, {summary['duration_ms'] / 1000:.1f} s, "
            f"{summary['bytes']} bytes, largest payload {summary['largest_payload']} bytes"
        )
        if args.stats:
            for kind, count in sorted(summary["types"].items()):
                print(f"    {count:6d}  {kind}")
    if stale:
        print("out of date: " + ", ".join(stale) + " (run python3 data/gen_traces.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
