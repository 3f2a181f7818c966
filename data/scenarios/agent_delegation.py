"""agent-delegation: an orchestrator investigates a latency regression by delegating to
subagents (two in parallel, one that fails and is retried, one whose draft is streamed through),
and produces artifacts referenced by URI (uri, mimeType, size, sha256), never embedded."""

from gen_traces import Trace, sha256_hex, tokens

SEED = 26940003
ARTIFACTS = "https://artifacts.example.com/edge-gateway/investigations/inv-0517"
CULPRIT = ("7d0a3f1", "limiter: per-key token bucket with lazy refill (#1482)")

STEPS = [
    ("when", "Find when the regression started"),
    ("which", "Bisect 0.8.4..0.9.0 under load"),
    ("why", "Profile the first bad build"),
    ("report", "Write the incident report"),
]

COMMITS = [
    "91b5e62 config: accept trailing slash policy per route",
    "c3e07aa upstream: h2 keep-alive pings every 20 s",
    "5f1d2b8 deps: bump tokio to 1.45.1",
    "e8a4c71 router: precompute host table",
    "0b6f9d3 tls: reload certificates on SIGHUP",
    "a17c5e0 metrics: histogram for upstream connect time",
    "3d9b8f4 auth: cache JWKS for max-age",
    "fa2e6c1 access_log: JSON format",
    "6c0d4a9 docs: gateway.toml reference",
    "b4e1f72 upstream: retry on reset before write",
    "2a8c3d5 cli: `check` reports line numbers",
    CULPRIT[0] + " " + CULPRIT[1],
    "d51f0e8 admin: /admin/limits endpoint",
    "8e3a6b2 middleware: request id on 429 responses",
    "47c9d0f tests: rate-limit integration tests",
    "9f2b1e6 config: rate_limit.policies",
    "1c7e4a3 upstream: weighted balancing",
    "e0d5b97 deps: bump rustls to 0.23.27",
    "73a1f8c proto: reject obs-fold",
    "c9b46e2 cors: cap max-age",
    "5e8f3a0 metrics: label escaping",
    "ab02d7e router: method filter",
    "4f61c95 release: 0.9.0",
]
GOOD_P99, BAD_P99 = 41, 214

FRAMES = [
    ("hyper_util::server::conn::auto::Connection::poll", 0),
    ("tower::util::map_response::MapResponseFuture::poll", 1),
    ("edge_gateway::middleware::request_id::RequestId::call", 2),
    ("edge_gateway::middleware::timeout::Timeout::call", 3),
    ("edge_gateway::middleware::rate_limit::RateLimit::call", 4),
]
HOT = [
    ("edge_gateway::limiter::bucket::Limiter::check;dashmap::DashMap::entry;"
     "dashmap::lock::RawRwLock::lock_exclusive_slow;parking_lot_core::parking_lot::park;"
     "std::sys::pal::unix::futex::futex_wait;syscall", 38.4),
    ("edge_gateway::limiter::bucket::Limiter::check;dashmap::DashMap::entry;"
     "dashmap::lock::RawRwLock::lock_exclusive_slow;core::hint::spin_loop", 14.9),
    ("edge_gateway::limiter::bucket::Limiter::check;std::time::Instant::now;"
     "std::sys::pal::unix::time::Timespec::now;clock_gettime;__vdso_clock_gettime", 7.8),
    ("edge_gateway::limiter::bucket::Limiter::check;<edge_gateway::middleware::rate_limit::RateKey as "
     "core::hash::Hash>::hash;core::hash::sip::Hasher::write", 2.1),
    ("edge_gateway::limiter::bucket::Limiter::check;alloc::string::String::clone;"
     "alloc::alloc::alloc;malloc", 1.7),
    ("edge_gateway::auth::AuthLayer::call;edge_gateway::auth::jwt::Verifier::verify;"
     "ring::signature::verify", 6.2),
    ("edge_gateway::router::Router::route;matchit::Router::at", 2.4),
    ("edge_gateway::upstream::pool::Pool::checkout;hyper_util::client::legacy::pool::Pool::checkout", 4.6),
    ("hyper::proto::h1::dispatch::Dispatcher::poll_write;tokio::net::TcpStream::poll_write;writev", 9.3),
    ("hyper::proto::h1::dispatch::Dispatcher::poll_read;tokio::net::TcpStream::poll_read;recvfrom", 7.1),
    ("edge_gateway::access_log::AccessLog::call;serde_json::ser::to_writer", 2.8),
    ("edge_gateway::metrics::Metrics::observe;prometheus_client::metrics::histogram::Histogram::observe", 1.2),
]

REPORT = """\
# Incident report: p99 latency regression in edge-gateway 0.9.0

**Status:** root cause identified, fix in review · **Severity:** SEV-3 (degraded, no outage)
**Window:** 2026-05-17 14:02 UTC to ongoing · **Service:** edge-gateway, all regions

## Summary

After the 0.9.0 rollout at 14:02 UTC on 2026-05-17, gateway p99 latency rose from about
{good} ms to about {bad} ms, and the share of requests answered `429 Too Many Requests` rose
from 0.1 % to 5.8 %. p50 did not move. The regression was bisected to {sha} \u201c{subject}\u201d,
which replaced the global in-flight semaphore with per-key token buckets.

## Impact

- Requests from the 40 busiest API keys (71 % of traffic) waited on a shared lock; p99 for
  those keys was up to {bad} ms, while keys with little traffic were unaffected.
- Clients that send faster than one request per `1000 / rate` ms were refused even below
  their configured rate, because the bucket never refilled (see \u201cSecond defect\u201d).
- No errors beyond 429s; upstream latency was unchanged.

## Timeline (UTC)

| time | event |
| --- | --- |
| 05-17 13:40 | 0.9.0 canary (5 %) starts; canary checks watch error rate only |
| 05-17 14:02 | 0.9.0 promoted to 100 % |
| 05-17 14:10 | p99 alert threshold (150 ms) crossed; alert routed to a muted channel |
| 05-18 08:55 | support ticket: partner reports intermittent 429s below contract rate |
| 05-18 09:20 | investigation starts |
| 05-18 09:22 | regression window pinned to the 14:02 rollout from request metrics |
| 05-18 09:23 | bisect across 23 commits lands on {sha} |
| 05-18 09:24 | CPU profile of {sha} under load: lock contention in `Limiter::check` |

## Root cause

`Limiter::check` takes the `DashMap` shard lock for the request's key through `entry()`,
which locks the shard exclusively, and then reads the clock while holding it. All requests
for one API key therefore serialise on one lock; under 2 000 rps from 40 keys, the profile
shows 53 % of on-CPU samples beneath `Limiter::check` parked or spinning in
`RawRwLock::lock_exclusive_slow`, and another 8 % in `clock_gettime` inside the critical
section. The old semaphore was uncontended on the fast path.

## Second defect

`Bucket::refill` truncates the tokens earned to whole tokens and then sets `last_refill = now`
unconditionally, discarding the fraction. A key sending every 10 ms at `rate = 50` earns
nothing on every call. This explains the 429s below contract rate; it was also raised in the
review of #1482 but the PR merged before the review was submitted.

## Remediation

1. Take `now` before locking and keep only arithmetic under the shard lock (fix in review).
2. Keep the unpaid fraction of a token in `refill`, with a regression test at 10 ms spacing.
3. Use `get_mut` for existing keys and `entry` only for a key's first request, so that the
   common path takes the shard's lock for the shortest time; shard count from 4 \u00d7 cores.
4. Load-test stage in CI that fails on a p99 regression of more than 20 %.
5. Route the gateway p99 alert to the on-call rotation, and make canary checks include p99.

## Evidence

- Hourly latency and status counts: `latency-by-hour.csv`
- Bisect log with per-commit load-test results: `bisect.log`
- CPU profile of {sha} under load: `flamegraph-{sha}.svg`
"""


def latency_csv(rng):
    rows = ["hour_utc,requests,p50_ms,p95_ms,p99_ms,status_429_pct,status_5xx_pct"]
    for h in range(48):
        day, hour = (17, h) if h < 24 else (18, h - 24)
        bad = (day, hour) >= (17, 14)
        load = 0.55 + 0.45 * abs(((hour + 8) % 24) - 12) / 12
        requests = int(2_400_000 * (1.6 - load) * rng.uniform(0.93, 1.07))
        p50 = rng.uniform(6.5, 8.2)
        p95 = rng.uniform(18, 24) * (2.6 if bad else 1)
        p99 = (BAD_P99 if bad else GOOD_P99) * rng.uniform(0.9, 1.1) * (1.6 - load)
        r429 = rng.uniform(5.1, 6.4) if bad else rng.uniform(0.06, 0.14)
        rows.append(f"2026-05-{day}T{hour:02d}:00Z,{requests},{p50:.1f},{p95:.1f},{p99:.1f},"
                    f"{r429:.2f},{rng.uniform(0.01, 0.04):.3f}")
    return "\n".join(rows) + "\n"


def folded_stacks(rng, total_samples):
    """perf-style folded stacks of the profile, as the read_artifact tool summarises it."""
    lines = []
    base = ";".join(f for f, _ in FRAMES)
    for stack, pct in HOT:
        parts = stack.split(";")
        for depth in range(1, len(parts) + 1):
            share = pct * (0.55 ** (len(parts) - depth)) if depth < len(parts) else pct
            samples = int(total_samples * share / 100 * rng.uniform(0.97, 1.03))
            lines.append((samples, f"tokio::runtime::task::harness::Harness::poll;{base};{';'.join(parts[:depth])}"))
    lines.sort(key=lambda x: -x[0])
    return lines


def flamegraph_svg(folded, total):
    out = ['<?xml version="1.0" standalone="no"?>',
           '<svg version="1.1" width="1200" height="742" xmlns="http://www.w3.org/2000/svg">',
           '<style>text{font-family:monospace;font-size:12px}rect:hover{stroke:#000}</style>',
           f'<text x="600" y="24" text-anchor="middle">edge-gateway {CULPRIT[0]}: 2000 rps, 40 keys, 30 s, {total} samples</text>']
    x = 10.0
    for samples, stack in folded:
        width = 1180.0 * samples / total / 3
        for depth, frame in enumerate(stack.split(";")):
            y = 720 - 16 * depth
            name = frame.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            out.append(f'<g><title>{name} ({samples} samples, {100 * samples / total:.2f}%)</title>'
                       f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="15" fill="rgb(230,{90 + 7 * depth % 140},40)"/>'
                       f'<text x="{x + 3:.1f}" y="{y + 11}">{name[: max(0, int(width / 7))]}</text></g>')
        x += width
    out.append("</svg>")
    return "\n".join(out) + "\n"


def build():
    tr = Trace(
        "agent-delegation",
        SEED,
        title="Investigate the p99 latency regression in edge-gateway 0.9.0",
        description=(
            "An orchestrator agent delegates to four subagents: metrics analysis and a git "
            "bisect under load run in parallel, a profiler subtask fails and is retried with "
            "another sampler, and a writer's draft is streamed through. Subtask "
            "started/progress/completed events carry each child task id; artifacts are "
            "referenced by URI with mimeType, size and sha256."
        ),
        model="example-orchestrator-large",
    )
    rng = tr.rng
    events = []  # (t, order, kind, payload) from parallel branches, merged at the end

    def at(t, kind, payload):
        events.append((int(t), len(events), kind, payload))

    def artifact(t, child, name, mime, text, description):
        art = {"artifactId": tr.hex_id("art-", 10), "childTaskId": child, "name": name,
               "uri": f"{ARTIFACTS}/{name}", "mimeType": mime, "size": len(text.encode("utf-8")),
               "sha256": sha256_hex(text), "description": description}
        at(t, "artifact", art)
        return art

    def delegate(agent, title, instructions):
        """The orchestrator calls its delegate tool; the child task starts."""
        call_id = tr.tool_call("delegate", {"agent": agent, "title": title, "instructions": instructions})
        started = tr.t
        tr.jitter(60, 180)
        child = tr.uuid4()
        tr.tool_result(call_id, "delegate", f"Started {agent} as task {child}.", started,
                       structured={"childTaskId": child, "status": "working"})
        tr.emit("subtask.started", {"childTaskId": child, "parentCallId": call_id, "agent": agent,
                                    "title": title, "instructions": instructions})
        return child

    def progress(t, child, done, total, message):
        at(t, "subtask.progress", {"childTaskId": child, "progress": done, "total": total,
                                   "message": message})

    def completed(t, child, started, status, summary, artifacts=(), error=None):
        payload = {"childTaskId": child, "status": status, "durationMs": int(t - started)}
        if summary:
            payload["summary"] = summary
        if error:
            payload["error"] = error
        payload["artifacts"] = [a["artifactId"] for a in artifacts]
        at(t, "subtask.completed", payload)

    def flush():
        """Merges the scheduled events of the parallel branches into the trace, in time order;
        the sort is stable, so events at the same millisecond keep their order."""
        now = tr.t
        for t, _, kind, payload in sorted(events, key=lambda e: (e[0], e[1])):
            tr.t = t
            tr.emit(kind, payload)
        events.clear()
        tr.events.sort(key=lambda e: e["t_ms"])
        tr.t = max(now, tr.events[-1]["t_ms"])

    # --- 1. split the work ------------------------------------------------------------------
    tr.plan(STEPS, done=0, active=0)
    tr.stream_text(
        "p99 latency on edge-gateway went from about 40 ms to over 200 ms some time after the "
        "0.9.0 rollout, and a partner reports 429s below their contract rate. I'll split the "
        "investigation: one agent reads the last 48 hours of request metrics to pin down when it "
        "started, and another bisects the 23 commits between 0.8.4 and 0.9.0 under a load test. "
        "Once we know the commit, a third profiles that build.",
        stop_reason="tool_use",
    )
    metrics_child = delegate(
        "metrics-analyst", "When did p99 and the 429 rate change?",
        "Query edge-gateway request metrics for 2026-05-17T00:00Z..2026-05-19T00:00Z, hourly. "
        "Report p50/p95/p99 and the 429 and 5xx shares, the first bad hour, and correlate with "
        "deploy events. Write the hourly table as CSV.")
    metrics_start = tr.t
    tr.plan(STEPS, done=0, active=(0, 1))
    bisect_child = delegate(
        "bisect-runner", "Bisect 0.8.4..0.9.0 for the p99 regression",
        "git bisect between tags v0.8.4 (good) and v0.9.0 (bad). At each step build release, "
        "run the standard load profile (2 000 rps, 40 API keys, 30 s warm-up, 30 s measured) and "
        "mark the commit bad if p99 > 100 ms. Report the first bad commit and each step's numbers.")
    bisect_start = tr.t

    # metrics-analyst: one progress event per hourly partition scanned
    csv = latency_csv(rng)
    t = metrics_start + rng.uniform(800, 1600)
    progress(t, metrics_child, 0, 48, "Resolved metrics source: prometheus/edge-prod, 3 regions")
    rows = csv.strip().split("\n")[1:]
    for i, row in enumerate(rows, 1):
        t += rng.uniform(350, 900)
        hour, requests, _, _, p99, r429, _ = row.split(",")
        progress(t, metrics_child, i, 48,
                 f"{hour}: {int(requests) / 1e6:.2f}M requests, p99 {float(p99):.0f} ms, 429 {float(r429):.2f}%")
    t += rng.uniform(600, 1200)
    progress(t, metrics_child, 48, 48, "Correlating with deploy events (12 deploys in window)")
    t += rng.uniform(1500, 2600)
    csv_art = artifact(t, metrics_child, "latency-by-hour.csv", "text/csv; charset=utf-8", csv,
                       "Hourly request count, latency percentiles and 429/5xx shares, 48 h")
    t += rng.uniform(100, 300)
    good = [float(r.split(",")[4]) for r in rows[:14]]
    bad = [float(r.split(",")[4]) for r in rows[14:]]
    r429 = [float(r.split(",")[5]) for r in rows[14:]]
    completed(t, metrics_child, metrics_start, "completed",
              f"First bad hour: 2026-05-17T14:00Z. Hourly p99 went from {min(good):.0f}-{max(good):.0f} ms "
              f"to {min(bad):.0f}-{max(bad):.0f} ms (higher at peak load) and the 429 share from about "
              f"0.1% to {min(r429):.1f}-{max(r429):.1f}%; p50 and 5xx unchanged. The step coincides with "
              "deploy dep-88213 (edge-gateway 0.9.0 to 100%, 14:02Z); no other deploy, config change "
              "or traffic shift in the window. The hourly table is in latency-by-hour.csv.",
              [csv_art])
    metrics_end = t

    # bisect-runner: build and load-test each step
    lo, hi = 0, len(COMMITS) - 1  # COMMITS[hi] is known bad (v0.9.0), v0.8.4 is below index 0
    culprit = COMMITS.index(CULPRIT[0] + " " + CULPRIT[1])
    t = bisect_start + rng.uniform(1500, 2500)
    progress(t, bisect_child, 0, 5, f"bisecting: {len(COMMITS) - 1} revisions left to test after this (roughly 5 steps)")
    step = 0
    bisect_log = [f"git bisect start v0.9.0 v0.8.4  # {len(COMMITS)} commits"]
    lo = -1
    while hi - lo > 1:
        step += 1
        mid = (lo + hi) // 2
        sha, subject = COMMITS[mid].split(" ", 1)
        t += rng.uniform(300, 600)
        progress(t, bisect_child, step - 1, 5, f"step {step}: {sha} {subject}: building (release)")
        t += rng.uniform(4200, 6800)
        progress(t, bisect_child, step - 1, 5, f"step {step}: {sha}: load test warm-up, 2000 rps from 40 keys")
        t += rng.uniform(2500, 3500)
        bad = mid >= culprit
        p99 = BAD_P99 * rng.uniform(0.92, 1.08) if bad else GOOD_P99 * rng.uniform(0.9, 1.1)
        p50 = rng.uniform(6.4, 7.9)
        verdict = "bad" if bad else "good"
        progress(t, bisect_child, step, 5,
                 f"step {step}: {sha}: p50 {p50:.1f} ms, p99 {p99:.0f} ms \u2192 {verdict}")
        bisect_log.append(f"# step {step}: {sha} {subject}: p50={p50:.1f}ms p99={p99:.0f}ms")
        bisect_log.append(f"git bisect {verdict} {sha}")
        if bad:
            hi = mid
        else:
            lo = mid
    sha, subject = COMMITS[hi].split(" ", 1)
    bisect_log.append(f"# first bad commit: {sha} {subject}")
    bisect_text = "\n".join(bisect_log) + "\n"
    t += rng.uniform(400, 900)
    log_art = artifact(t, bisect_child, "bisect.log", "text/plain; charset=utf-8", bisect_text,
                       "git bisect log with the load-test result of each step")
    t += rng.uniform(80, 200)
    completed(t, bisect_child, bisect_start, "completed",
              f"First bad commit: {sha} \u201c{subject}\u201d after {step} steps. p99 at its parent "
              f"{COMMITS[hi - 1].split(' ')[0]}: ~{GOOD_P99} ms; at {sha}: ~{BAD_P99} ms, reproducible "
              "(3 reruns within 6%). p50 unchanged at ~7 ms: the cost is in the tail, which points at "
              "contention rather than extra work per request.",
              [log_art])
    bisect_end = t
    flush()
    tr.t = int(max(tr.t, metrics_end, bisect_end))
    tr.plan(STEPS, done=2, active=2)

    # --- 2. profile: the first attempt fails, the retry succeeds --------------------------
    tr.stream_text(
        f"Both agents agree: the step is the 14:02 rollout on 2026-05-17, and the bisect lands on "
        f"{sha} \u201c{subject}\u201d. p50 did not move, so this looks like contention. Next, a CPU "
        "profile of that build under the same load.",
        stop_reason="tool_use",
    )
    profile_instructions = (f"Build {sha} (release, debug symbols), run the standard load profile and "
                            "record an on-CPU profile for 30 s with perf at 999 Hz. Produce a flame graph "
                            "and the folded stacks.")
    child = delegate("profiler", f"CPU profile of {sha} under load", profile_instructions)
    start = tr.t
    t = start + rng.uniform(900, 1500)
    progress(t, child, 0, 3, f"Building {sha} with profile=release-debug")
    t += rng.uniform(5200, 7400)
    progress(t, child, 1, 3, "Load generator warm-up: 2000 rps from 40 keys")
    t += rng.uniform(2000, 2600)
    progress(t, child, 1, 3, "perf record -F 999 -g -p 41877")
    t += rng.uniform(150, 400)
    completed(t, child, start, "failed", None, error={
        "code": "profiler_unavailable",
        "message": "perf_event_open failed: Permission denied (perf_event_paranoid = 4 in the "
                   "load-test sandbox). Kernel sampling is not available here."})
    flush()
    tr.stream_text(
        "The profiler could not attach: `perf_event_open` is denied in the load-test sandbox. "
        "I'll retry with the userspace sampler, which needs no kernel support and is accurate "
        "enough for a lock-contention question.",
        stop_reason="tool_use",
    )
    child = delegate("profiler", f"CPU profile of {sha} under load (userspace sampler)",
                     profile_instructions.replace("with perf at 999 Hz", "with the in-process "
                                                  "userspace sampler at 999 Hz (perf is unavailable)"))
    start = tr.t
    total_samples = 29_970 * 2
    folded = folded_stacks(rng, total_samples)
    svg = flamegraph_svg(folded, total_samples)
    t = start + rng.uniform(600, 1000)
    progress(t, child, 0, 3, f"Reusing the {sha} release-debug build")
    t += rng.uniform(1500, 2500)
    progress(t, child, 1, 3, "Load generator warm-up: 2000 rps from 40 keys")
    for second in range(5, 31, 5):
        t += rng.uniform(4800, 5200)
        progress(t, child, 2, 3, f"Sampling: {second}/30 s, {second * 999 * 2} samples")
    t += rng.uniform(1200, 2000)
    svg_art = artifact(t, child, f"flamegraph-{sha}.svg", "image/svg+xml", svg,
                       f"On-CPU flame graph of {sha}, 2000 rps from 40 keys, 30 s")
    folded_text = "\n".join(f"{stack} {samples}" for samples, stack in folded) + "\n"
    folded_art = artifact(t + 20, child, f"profile-{sha}.folded", "text/plain; charset=utf-8", folded_text,
                          "Folded stacks (one stack per line, sample count last)")
    t += rng.uniform(200, 400)
    completed(t, child, start, "completed",
              f"{total_samples} samples over 30 s on 2 worker threads. Hottest path: "
              "RateLimit::call \u2192 Limiter::check \u2192 DashMap::entry \u2192 "
              "RawRwLock::lock_exclusive_slow (parked or spinning), then clock_gettime under the "
              "same lock.", [svg_art, folded_art])
    flush()

    # --- 3. read the profile, then delegate the report -------------------------------------
    text = (f"{folded_art['name']}: {folded_art['mimeType']}, {folded_art['size']} bytes, "
            f"sha256 {folded_art['sha256']}\n\n" + folded_text)
    tr.tool("read_artifact", {"uri": folded_art["uri"], "maxBytes": 65536}, text, latency=(120, 300))
    tr.plan(STEPS, done=3, active=3)
    tr.stream_text(
        "The profile is unambiguous. More than half of the on-CPU samples under `Limiter::check` "
        "are in `RawRwLock::lock_exclusive_slow`: `DashMap::entry` locks the key's shard "
        "exclusively, so every request for the same API key serialises, and `Instant::now()` is "
        "called while the lock is held. With 40 keys at 50 rps each, the busiest shards queue. "
        "The 429s below contract rate are a separate defect in `Bucket::refill`, already raised in "
        "the review of #1482. I'll have the report written up with the evidence attached.",
        stop_reason="tool_use",
    )
    child = delegate("writer", "Incident report: edge-gateway 0.9.0 p99 regression",
                     "Write a blameless incident report in Markdown: summary, impact, timeline, root "
                     "cause, second defect, remediation, evidence. Use the subtask summaries and "
                     f"artifacts {csv_art['artifactId']}, {log_art['artifactId']}, {svg_art['artifactId']}.")
    start = tr.t
    report = REPORT.format(good=GOOD_P99, bad=BAD_P99, sha=sha, subject=subject)
    # The writer's draft is streamed through as subtask content, delta by delta.
    t = start + rng.uniform(1200, 2400)
    sections = report.count("\n## ")
    pieces = tokens(report)
    i = index = done_sections = 0
    while i < len(pieces):
        take = rng.choices((1, 2, 3), weights=(55, 35, 10))[0]
        delta = "".join(pieces[i:i + take])
        i += take
        at(t, "subtask.content.partial", {"childTaskId": child, "messageId": "msg-001", "role": "assistant",
                                          "index": index, "content": [{"type": "text", "text": delta}]})
        index += 1
        t += min(80.0, max(6.0, rng.gauss(22, 7))) * take / 1.6
        if "\n## " in delta or delta.startswith("## "):
            done_sections += 1
            progress(t, child, done_sections, sections, f"Drafting section {done_sections} of {sections}")
    t += rng.uniform(300, 700)
    report_art = artifact(t, child, "incident-report.md", "text/markdown; charset=utf-8", report,
                          "Incident report, Markdown")
    t += rng.uniform(60, 160)
    completed(t, child, start, "completed", "Report written: 7 sections, 5 remediation items.", [report_art])
    flush()

    final = (
        "## Findings\n\n"
        f"**Cause.** {sha} \u201c{subject}\u201d replaced the global semaphore with per-key token "
        "buckets in a `DashMap`. `Limiter::check` takes the key's shard lock exclusively and reads "
        f"the clock inside it, so requests for busy keys serialise: p99 went from ~{GOOD_P99} ms to "
        f"~{BAD_P99} ms at the 14:02 UTC rollout on 2026-05-17, with p50 unchanged.\n\n"
        "**Also.** `Bucket::refill` discards fractional tokens and the time that earned them, so "
        "fast clients are refused below their rate (429 share 0.1% \u2192 ~6%).\n\n"
        "**Next.** Take `now` before locking and keep only arithmetic under the lock; fix the "
        "refill remainder with a 10 ms-spacing test; add a p99 gate to the load-test stage; route "
        "the p99 alert to on-call.\n\n"
        "**Artifacts**\n"
        f"- Report: {report_art['uri']}\n"
        f"- Flame graph: {svg_art['uri']}\n"
        f"- Hourly metrics: {csv_art['uri']}\n"
        f"- Bisect log: {log_art['uri']}\n\n"
        "One profiler run failed (kernel sampling is not permitted in the load-test sandbox) and "
        "was rerun with the userspace sampler."
    )
    tr.stream_text(final)
    tr.plan(STEPS, done=len(STEPS))
    return tr.lines("completed", final)
