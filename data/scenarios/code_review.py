"""code-review: an agent reviews a pull request that adds per-key rate limiting to a gateway.

It reads the diff and the files (one read_file result is a ~20 KiB excerpt), greps, runs the
tests with streamed output, posts review comments and streams a summary."""

from gen_traces import Trace, fixture, line_of, numbered

SEED = 26940001
REPO = "edge-gateway"
PR = 1482
BUCKET = "crates/gateway/src/limiter/bucket.rs"
MIDDLEWARE = "crates/gateway/src/middleware/rate_limit.rs"
ITEST = "crates/gateway/tests/rate_limit.rs"
SERVER = "crates/gateway/src/server.rs"
MANIFEST = "crates/gateway/Cargo.toml"

STEPS = [
    ("diff", "Read the diff stat"),
    ("bucket", "Review limiter/bucket.rs"),
    ("middleware", "Review the middleware and its wiring"),
    ("tests", "Run the limiter tests"),
    ("comments", "Post comments and a verdict"),
]

WIRING_DIFF = """\
diff --git a/crates/gateway/Cargo.toml b/crates/gateway/Cargo.toml
index 5b1e0c4..a93d7f2 100644
--- a/crates/gateway/Cargo.toml
+++ b/crates/gateway/Cargo.toml
@@ -14,4 +14,5 @@ axum = { workspace = true }
 bytes = { workspace = true }
+dashmap = "5.5"
 futures-util = { workspace = true }
 http = { workspace = true }
 hyper = { workspace = true, features = ["server", "http1", "http2"] }
diff --git a/crates/gateway/src/limiter/mod.rs b/crates/gateway/src/limiter/mod.rs
index 0c7d2aa..4e81b95 100644
--- a/crates/gateway/src/limiter/mod.rs
+++ b/crates/gateway/src/limiter/mod.rs
@@ -1,9 +1,6 @@
-//! Request rate limiting (placeholder: a global semaphore until #1320 lands).
+//! Request rate limiting: per-key token buckets ([`bucket`]) applied by
+//! [`crate::middleware::rate_limit`].
 
-use std::sync::Arc;
-use tokio::sync::Semaphore;
+mod bucket;
 
-/// The global in-flight request cap.
-pub fn global_limit(max_in_flight: usize) -> Arc<Semaphore> {
-    Arc::new(Semaphore::new(max_in_flight))
-}
+pub use bucket::{BucketConfig, ConfigError, Decision, Limiter, LimiterStats, Policies};
diff --git a/crates/gateway/src/middleware/mod.rs b/crates/gateway/src/middleware/mod.rs
index 77a0f31..c2d94be 100644
--- a/crates/gateway/src/middleware/mod.rs
+++ b/crates/gateway/src/middleware/mod.rs
@@ -3,3 +3,5 @@
 pub mod cors;
 pub mod request_id;
 pub mod timeout;
+pub mod rate_limit;
+pub use rate_limit::{RateKey, RateLimitLayer};
diff --git a/crates/gateway/src/server.rs b/crates/gateway/src/server.rs
index 2f4b8d1..9e0c6a3 100644
--- a/crates/gateway/src/server.rs
+++ b/crates/gateway/src/server.rs
@@ -88,14 +88,17 @@ pub async fn serve(config: GatewayConfig, shutdown: Shutdown) -> Result<(), ServeError> {
     let auth = Arc::new(Authenticator::from_config(&config.auth)?);
-    let in_flight = limiter::global_limit(config.max_in_flight);
+    let policies = Arc::new(
+        Policies::new(config.rate_limit.default.clone(), config.rate_limit.policies.clone())
+            .map_err(|(name, e)| ServeError::Config(format!("rate_limit.policies.{name}: {e}")))?,
+    );
     let routes = router::build(&config.routes, upstreams.clone())?;
 
     let app = Router::new()
         .merge(routes)
         .merge(admin::routes(admin_state))
         .layer(AuthLayer::new(auth.clone()))
-        .layer(ConcurrencyLimitLayer::with_semaphore(in_flight))
+        .layer(RateLimitLayer::new(Arc::clone(&policies), None))
         .layer(TimeoutLayer::new(config.request_timeout))
         .layer(RequestIdLayer::default())
         .layer(TraceLayer::new_for_http());
 
     let listener = TcpListener::bind(config.listen).await?;
"""

GREP_NOW = """\
crates/gateway/src/clock.rs:9:/// Production code takes a `&dyn Clock` so that tests can drive time; only `SystemClock` calls `Instant::now()`.
crates/gateway/src/clock.rs:21:        Instant::now()
crates/gateway/src/limiter/bucket.rs:{a}:            .or_insert_with(|| Bucket::full(&self.config, Instant::now()));
crates/gateway/src/limiter/bucket.rs:{b}:        let now = Instant::now();
crates/gateway/src/limiter/bucket.rs:{c}:        bucket.refill(&self.config, Instant::now());
crates/gateway/src/limiter/bucket.rs:{d}:        let t0 = Instant::now();
crates/gateway/src/limiter/bucket.rs:{e}:        let t0 = Instant::now();
crates/gateway/src/limiter/bucket.rs:{f}:        let t0 = Instant::now() + Duration::from_secs(5);
crates/gateway/src/limiter/bucket.rs:{g}:        let t0 = Instant::now();
crates/gateway/src/metrics.rs:88:        let started = Instant::now();
crates/gateway/src/upstream/health.rs:57:        let deadline = self.clock.now() + self.interval; // not Instant::now(): see clock.rs
"""

GREP_FORWARDED = """\
crates/gateway/src/access_log.rs:41:    let client = ClientIp::from_request(req, &state.trusted_proxies);
crates/gateway/src/config.rs:133:    /// Proxies whose `X-Forwarded-For` entries are trusted, as CIDR blocks.
crates/gateway/src/config.rs:135:    pub trusted_proxies: Vec<IpNet>,
crates/gateway/src/middleware/rate_limit.rs:{a}:    // address is the balancer's, so prefer the first X-Forwarded-For entry.
crates/gateway/src/middleware/rate_limit.rs:{b}:        .get("x-forwarded-for")
crates/gateway/src/middleware/rate_limit.rs:{c}:            .header("x-forwarded-for", "203.0.113.9")
crates/gateway/src/middleware/rate_limit.rs:{d}:            .header("x-forwarded-for", "203.0.113.9, 10.0.0.2")
crates/gateway/src/net/client_ip.rs:1://! The client's address, from the peer address and the `X-Forwarded-For` entries added by
crates/gateway/src/net/client_ip.rs:2://! trusted proxies only (walked right to left; the first untrusted hop is the client).
crates/gateway/src/net/client_ip.rs:38:    pub fn from_request<B>(req: &Request<B>, trusted: &[IpNet]) -> ClientIp {{
crates/gateway/src/net/client_ip.rs:44:            .get_all("x-forwarded-for")
crates/gateway/tests/rate_limit.rs:{e}:        gw.get("/v1/echo").header("x-forwarded-for", "198.51.100.7").send().await;
"""

BUCKET_TESTS = [
    "a_bad_named_policy_is_reported_by_name",
    "clock_going_backwards_earns_nothing",
    "concurrent_checks_never_overdraw",
    "config_parses_with_default_cost",
    "config_rejects_unknown_fields",
    "cost_is_debited_per_request",
    "debug_shows_key_count_not_keys",
    "deny_reports_when_a_token_will_be_back",
    "keys_do_not_share_buckets",
    "new_key_gets_a_full_burst",
    "peek_does_not_debit",
    "refill_adds_rate_tokens_per_second",
    "refill_is_capped_at_burst",
    "reset_forgets_the_key",
    "slow_steady_traffic_is_never_denied",
    "stats_count_both_outcomes",
    "time_to_earn_rounds_down_to_whole_milliseconds",
    "unknown_policy_falls_back_to_default",
    "validate_rejects_cost_above_burst",
    "validate_rejects_zero_rate",
]

COMPILING = [
    ("dashmap", "5.5.3"),
    ("edge-proto", "0.9.0 (/src/edge-gateway/crates/proto)"),
    ("edge-config", "0.9.0 (/src/edge-gateway/crates/config)"),
    ("edge-gateway", "0.9.0 (/src/edge-gateway/crates/gateway)"),
]


def build():
    tr = Trace(
        "code-review",
        SEED,
        title=f"Review of {REPO} PR #{PR}",
        description=(
            "A review agent reads a pull request that adds per-key token-bucket rate limiting "
            "to an HTTP gateway: diff, files, greps, a test run with streamed output; it posts "
            "nine review comments and streams a summary. Partial content, tool calls and "
            "results (one ~20 KiB file excerpt), review comments."
        ),
        model="example-reviewer-large",
    )
    bucket = fixture("code-review", "bucket.rs.txt")
    middleware = fixture("code-review", "rate_limit.rs.txt")
    itest = fixture("code-review", "tests_rate_limit.rs.txt")
    n_bucket = bucket.count("\n")
    n_middleware = middleware.count("\n")
    n_itest = itest.count("\n")

    L = {
        "refill": line_of(bucket, "let earned = elapsed.as_millis()"),
        "refill_set": line_of(bucket, "self.last_refill = now;"),
        "or_insert": line_of(bucket, ".or_insert_with(|| Bucket::full"),
        "now": line_of(bucket, "let now = Instant::now();"),
        "last_seen": line_of(bucket, "bucket.last_seen = now;"),
        "buckets": line_of(bucket, "buckets: DashMap<K, Bucket>,"),
        "validate": line_of(bucket, "if self.cost > self.burst {"),
        "retry": line_of(middleware, "HeaderValue::from(retry_after.as_millis() as u64)"),
        "xff": line_of(middleware, "and_then(|v| v.split(',').next())"),
        "api_key": line_of(middleware, "return Some(RateKey::ApiKey(key.to_owned()));"),
        "sleep": line_of(itest, "std::thread::sleep"),
    }
    peek_now = line_of(bucket, "bucket.refill(&self.config, Instant::now());")
    t0_lines = [n for n, l in enumerate(bucket.split("\n"), 1) if "let t0 = Instant::now()" in l]

    # --- 1. the shape of the change -------------------------------------------------------
    tr.plan(STEPS, done=0, active=0)
    tr.stream_text(
        f"I'll review PR #{PR}, \u201climiter: per-key token bucket with lazy refill\u201d. "
        "First the shape of the change, so I know where the risk is.",
        stop_reason="tool_use",
    )
    stat = (
        f" {MANIFEST:<46}|   1 +\n"
        f" {BUCKET:<46}| {n_bucket:>3} {'+' * 40}\n"
        f" {'crates/gateway/src/limiter/mod.rs':<46}|  11 ++++-------\n"
        f" {'crates/gateway/src/middleware/mod.rs':<46}|   2 +\n"
        f" {MIDDLEWARE:<46}| {n_middleware:>3} {'+' * 13}\n"
        f" {SERVER:<46}|   7 +++++--\n"
        f" {ITEST:<46}|  {n_itest:>2} +++++\n"
        f" 7 files changed, {n_bucket + n_middleware + n_itest + 12} insertions(+), 9 deletions(-)\n"
    )
    tr.tool(
        "git_diff",
        {"repository": REPO, "base": "origin/main", "head": f"pull/{PR}/head", "stat": True},
        stat,
        latency=(90, 220),
    )

    # --- 2. the bucket ----------------------------------------------------------------------
    tr.plan(STEPS, done=1, active=1)
    tr.stream_text(
        f"Most of the change is the new `limiter/bucket.rs` ({n_bucket} lines) and the "
        "middleware that puts it in front of the router. Whether the limiter is correct at "
        "all depends on the refill arithmetic, so I'll read the bucket first.",
        stop_reason="tool_use",
    )
    tr.tool(
        "read_file",
        {"repository": REPO, "ref": f"pull/{PR}/head", "path": BUCKET},
        numbered(bucket),
        latency=(25, 60),
    )
    tr.stream_text(
        "The structure is reasonable: one `DashMap<K, Bucket>`, lazy refill on `check`, a full "
        "bucket for a key seen for the first time, counters for `/metrics`. Three things need a "
        "closer look.\n\n"
        f"1. `Bucket::refill` (line {L['refill']}) computes `elapsed.as_millis() as u64 * rate / "
        f"1000` and then sets `last_refill = now` unconditionally (line {L['refill_set']}). The "
        "fractional token is thrown away *and* the time that earned it is forgotten. With "
        "`rate = 50`, a key whose requests arrive less than 20 ms apart earns 0 tokens on every "
        "call, forever: once its burst is spent it is denied until it goes quiet. Denied "
        "requests call `refill` too, so a client that retries makes it worse.\n"
        f"2. `check` reads `Instant::now()` after taking the shard lock (line {L['now']}), and "
        f"the `or_insert_with` closure on line {L['or_insert']} reads it a second time. That is "
        "not wrong, but it puts a clock read inside the critical section and makes the refill "
        "impossible to test without sleeping.\n"
        f"3. `last_seen` is written on every request (line {L['last_seen']}) but nothing reads "
        "it. There is no eviction, so the map grows with every distinct key ever seen.\n\n"
        "The unit tests only refill in steps of 100 ms or more, which is why (1) does not show "
        "up. Let me check where else the crate reads the clock.",
        stop_reason="tool_use",
    )
    grep_now = GREP_NOW.format(
        a=L["or_insert"], b=L["now"], c=peek_now, d=t0_lines[0], e=t0_lines[1],
        f=line_of(bucket, "let t0 = Instant::now() + Duration"), g=t0_lines[-1],
    )
    tr.tool(
        "grep",
        {"repository": REPO, "pattern": r"Instant::now\(\)", "path": "crates/gateway/src"},
        grep_now,
        latency=(40, 110),
    )

    # --- 3. the middleware ------------------------------------------------------------------
    tr.plan(STEPS, done=2, active=2)
    tr.stream_text(
        "There is already a `Clock` trait in `src/clock.rs` (the upstream health checks use "
        "it), so the limiter can take `now` from its caller instead of calling `Instant::now()` "
        "itself. Now the middleware.",
        stop_reason="tool_use",
    )
    tr.tool(
        "read_file",
        {"repository": REPO, "ref": f"pull/{PR}/head", "path": MIDDLEWARE},
        numbered(middleware),
        latency=(20, 50),
    )
    tr.stream_text(
        "Two problems in the middleware:\n\n"
        f"- `too_many_requests` (line {L['retry']}) puts `retry_after.as_millis()` into "
        "`Retry-After`. RFC 9110 defines that header as delay-seconds, so a client told "
        "`Retry-After: 250` waits four minutes instead of a quarter of a second. It should be "
        "whole seconds, rounded up (250 ms becomes 1).\n"
        f"- `rate_key` (line {L['xff']}) trusts the first `X-Forwarded-For` entry from anyone. A "
        "client can put any address there and get a fresh bucket per request. The key is also "
        f"taken from `x-api-key` (line {L['api_key']}) before authentication, so an invalid key "
        "gets a bucket too. Together with the missing eviction, that is memory growth the "
        "client controls.\n\n"
        "Let me see how the rest of the gateway resolves client addresses.",
        stop_reason="tool_use",
    )
    grep_fwd = GREP_FORWARDED.format(
        a=line_of(middleware, "prefer the first X-Forwarded-For"),
        b=line_of(middleware, '.get("x-forwarded-for")'),
        c=line_of(middleware, '.header("x-forwarded-for", "203.0.113.9")'),
        d=line_of(middleware, '"203.0.113.9, 10.0.0.2"'),
        e=line_of(itest, '"198.51.100.7").send()'),
    )
    tr.tool(
        "grep",
        {"repository": REPO, "pattern": "forwarded", "path": "crates/gateway", "ignoreCase": True},
        grep_fwd,
        latency=(45, 120),
    )
    tr.stream_text(
        "`net::client_ip::ClientIp::from_request` already resolves the address against the "
        "`trusted_proxies` list from `gateway.toml`, and the access log uses it; the middleware "
        "should too. Next, the wiring and the manifest.",
        stop_reason="tool_use",
    )
    tr.tool(
        "git_diff",
        {
            "repository": REPO,
            "base": "origin/main",
            "head": f"pull/{PR}/head",
            "paths": [MANIFEST, "crates/gateway/src/limiter/mod.rs",
                      "crates/gateway/src/middleware/mod.rs", SERVER],
        },
        WIRING_DIFF,
        latency=(70, 160),
    )
    # New-side line of `.layer(RateLimitLayer::new(..))` in the server.rs hunk (+88,17).
    server_line = 99
    tr.stream_text(
        "The new layer is added after `AuthLayer`. In axum the layer added last is the "
        "outermost, so rate limiting runs *before* authentication, which confirms that "
        "unauthenticated API keys get buckets. The manifest adds `dashmap = \"5.5\"` although "
        "the workspace already pins `dashmap` 6.1 (the upstream pool uses it): two copies in "
        "the build. Now the integration tests.",
        stop_reason="tool_use",
    )
    tr.tool(
        "read_file",
        {"repository": REPO, "ref": f"pull/{PR}/head", "path": ITEST},
        numbered(itest),
        latency=(18, 45),
    )

    # --- 4. run the tests, output streamed ------------------------------------------------
    tr.plan(STEPS, done=3, active=3)
    tr.stream_text(
        f"`bucket_refills_after_a_second` (line {L['sleep']}) blocks the runtime with "
        "`std::thread::sleep` inside a `#[tokio::test]`. It only works because the test gateway "
        "runs on another thread, and it costs 1.1 s per run. Let me run the limiter tests to "
        "see the current state.",
        stop_reason="tool_use",
    )
    command = "cargo test -p edge-gateway --locked limiter"
    call_id = tr.tool_call("run_command", {"repository": REPO, "command": command, "timeoutSecs": 600})
    started = tr.t
    out = []

    def line(stream, text, lo, hi):
        tr.jitter(lo, hi)
        tr.emit("tool.output", {"callId": call_id, "stream": stream, "text": text})
        out.append(text)

    line("stderr", "    Blocking waiting for file lock on build directory", 300, 700)
    for name, version in COMPILING:
        line("stderr", f"   Compiling {name} v{version}", 400, 1500)
    line("stderr", "warning: field `last_seen` is never read", 2600, 3400)
    line("stderr", f"   --> {BUCKET}:{line_of(bucket, 'last_seen: Instant,')}:5", 1, 4)
    line("stderr", "warning: `edge-gateway` (lib test) generated 1 warning", 2000, 3800)
    build_secs = (tr.t - started) / 1000 + 0.4
    line("stderr", f"    Finished `test` profile [unoptimized + debuginfo] target(s) in {build_secs:.2f}s", 300, 500)
    line("stderr", "     Running unittests src/lib.rs (target/debug/deps/edge_gateway-3f9c1d2a7b6e5f40)", 100, 250)
    line("stdout", "", 1, 3)
    line("stdout", f"running {len(BUCKET_TESTS)} tests", 1, 5)
    order = list(BUCKET_TESTS)
    tr.rng.shuffle(order)
    for name in order:
        line("stdout", f"test limiter::bucket::tests::{name} ... ok", 0, 9 if name != "concurrent_checks_never_overdraw" else 40)
    line("stdout", "", 0, 2)
    line("stdout", f"test result: ok. {len(BUCKET_TESTS)} passed; 0 failed; 0 ignored; 0 measured; 184 filtered out; finished in 0.05s", 0, 2)
    line("stdout", "", 0, 2)
    line("stderr", "     Running tests/rate_limit.rs (target/debug/deps/rate_limit-9a1e2f3b4c5d6e7f)", 80, 200)
    line("stdout", "", 1, 3)
    line("stdout", "running 0 tests", 1, 3)
    line("stdout", "", 0, 2)
    line("stdout", "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.00s", 0, 2)
    line("stdout", "", 0, 2)
    tr.jitter(60, 140)
    tr.tool_result(
        call_id,
        "run_command",
        "exit status: 0\n\n" + "\n".join(out) + "\n",
        started,
        structured={"exitCode": 0, "passed": len(BUCKET_TESTS), "failed": 0, "filteredOut": 187},
    )

    # --- 5. comments ------------------------------------------------------------------------
    tr.plan(STEPS, done=4, active=4)
    tr.stream_text(
        f"All {len(BUCKET_TESTS)} unit tests pass, but none calls `refill` at intervals shorter "
        "than `1000 / rate` ms, which is exactly where the truncation bites: "
        "`slow_steady_traffic_is_never_denied` with 10 ms steps instead of 100 ms would fail "
        "today. The `last_seen` warning in the build output is finding 3 again. Posting the "
        "comments now.",
        stop_reason="tool_use",
    )
    comments = [
        (BUCKET, L["refill"], "error", "Refill forgets the time it did not pay out",
         "`last_refill = now` runs even when `earned` is 0, so the fraction of a token earned "
         "since the last call is lost. Any key that sends faster than one request per "
         "`1000 / rate` ms earns nothing at all once its burst is spent, and stays denied for "
         "as long as it keeps sending (denied requests refill too). Keep `last_refill` when "
         "nothing was earned, and advance it only by the time the whole tokens took:",
         "fn refill(&mut self, config: &BucketConfig, now: Instant) {\n"
         "    let burst = u64::from(config.burst);\n"
         "    let elapsed = now.saturating_duration_since(self.last_refill);\n"
         "    let earned = elapsed.as_nanos() * u128::from(config.rate) / 1_000_000_000;\n"
         "    if earned == 0 {\n"
         "        return; // keep accruing: the next call sees the longer interval\n"
         "    }\n"
         "    let tokens = self.tokens.saturating_add(u64::try_from(earned).unwrap_or(u64::MAX));\n"
         "    if tokens >= burst {\n"
         "        self.tokens = burst;\n"
         "        self.last_refill = now;\n"
         "    } else {\n"
         "        self.tokens = tokens;\n"
         "        // Advance by what the whole tokens cost, so the remainder carries over.\n"
         "        let nanos = earned * 1_000_000_000 / u128::from(config.rate);\n"
         "        self.last_refill += Duration::from_nanos(nanos as u64);\n"
         "    }\n"
         "}"),
        (BUCKET, L["now"], "suggestion", "Take `now` from the caller",
         "The clock is read after the shard lock is taken, twice for a new key. Taking "
         "`now: Instant` as a parameter (`check_at(&self, key, now)`, with `check` reading "
         "`crate::clock::Clock`) keeps the critical section to arithmetic, and lets the tests "
         "drive time instead of sleeping.", None),
        (BUCKET, L["buckets"], "error", "No eviction: the map grows with every key ever seen",
         "`last_seen` is maintained but never read (the build warns about it). With keys taken "
         "from an unauthenticated header (see the middleware), a client can create buckets "
         "without bound. Add `evict_idle(&self, idle: Duration, now: Instant)` using "
         "`DashMap::retain`, call it from the existing housekeeping task, and cap the number of "
         "keys (`max_keys`, refusing or evicting the least recently seen when full).", None),
        (BUCKET, L["validate"], "warning", "`cost = 0` disables the policy silently",
         "`validate` accepts `cost = 0`, which admits every request without debiting "
         "anything. A typo in `gateway.toml` should fail at load time; add "
         "`ConfigError::ZeroCost`.", None),
        (MIDDLEWARE, L["retry"], "error", "`Retry-After` is in seconds, not milliseconds",
         "RFC 9110 \u00a710.2.3: `Retry-After` is a delay in seconds. A client told "
         "`Retry-After: 250` will wait four minutes. Round up to whole seconds:",
         "let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);\n"
         "resp.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));"),
        (MIDDLEWARE, L["xff"], "error", "Spoofable client address",
         "The first `X-Forwarded-For` entry is whatever the client sent, so every request can "
         "pick its own bucket. Use `ClientIp::from_request(&req, &trusted_proxies)` from "
         "`net/client_ip.rs`, as the access log does; it walks the header right to left and "
         "stops at the first untrusted hop.", None),
        (SERVER, server_line, "warning", "Rate limiting runs before authentication",
         "The layer added last is the outermost, so `RateLimitLayer` sees requests before "
         "`AuthLayer` has verified the API key. Key the per-key policy on the authenticated "
         "principal (layer it inside `AuthLayer`), and keep a per-address policy outside it "
         "for anonymous floods.", None),
        (MANIFEST, 15, "nit", "Use the workspace `dashmap`",
         "The workspace already pins `dashmap = \"6.1\"`; `dashmap.workspace = true` avoids "
         "compiling 5.5 as a second copy.", None),
        (ITEST, L["sleep"], "nit", "Blocking sleep in an async test",
         "`std::thread::sleep` blocks the test's runtime thread for 1.1 s. With the clock "
         "injected (see the comment on `check`), advance a test clock instead; until then, "
         "`tokio::time::sleep` at least does not block the runtime.", None),
    ]
    for path, line_no, severity, title, body, suggestion in comments:
        arguments = {"repository": REPO, "pullRequest": PR, "path": path, "line": line_no,
                     "severity": severity, "body": f"**{title}**\n\n{body}"}
        if suggestion:
            arguments["suggestion"] = suggestion
        call_id = tr.tool_call("add_review_comment", arguments, think_chars=len(body) // 3)
        started = tr.t
        tr.jitter(180, 520)
        comment_id = f"rc-{tr.rng.randint(4_000_000, 4_999_999)}"
        tr.tool_result(call_id, "add_review_comment", f"Comment {comment_id} posted on {path}:{line_no}.", started)
        payload = {"commentId": comment_id, "callId": call_id, "path": path, "line": line_no,
                   "side": "RIGHT", "severity": severity, "title": title, "body": body}
        if suggestion:
            payload["suggestion"] = {"replacement": suggestion}
        tr.emit("review.comment", payload)

    summary = (
        f"## Review of #{PR}: changes requested\n\n"
        "The design (one lazily refilled bucket per key in a sharded map, named policies with "
        "a default, counters for `/metrics`) is the right shape for the gateway, and the code "
        "is easy to follow. Four findings block the merge:\n\n"
        f"1. **Refill loses time** (`bucket.rs:{L['refill']}`). Integer truncation combined with "
        "an unconditional `last_refill = now` means a key sending faster than one request per "
        "`1000 / rate` ms never refills once its burst is spent. This is the core function of "
        "the limiter; it needs the fix and a test at 10 ms spacing.\n"
        f"2. **Unbounded key map** (`bucket.rs:{L['buckets']}`). Nothing is ever evicted, and "
        "keys come from client-controlled input.\n"
        f"3. **Spoofable address key** (`rate_limit.rs:{L['xff']}`). Use `ClientIp::from_request` "
        "with `trusted_proxies`.\n"
        f"4. **`Retry-After` in milliseconds** (`rate_limit.rs:{L['retry']}`). Clients will back "
        "off 1000 times too long.\n\n"
        "Also worth doing in this PR: take `now` from the caller (and the `Clock` trait), reject "
        "`cost = 0`, put the per-key policy inside `AuthLayer`, use the workspace `dashmap`, and "
        "replace the blocking sleep in the integration test.\n\n"
        f"`cargo test -p edge-gateway limiter`: {len(BUCKET_TESTS)} passed, 0 failed; the "
        "failing case in (1) is not covered yet. 9 inline comments posted."
    )
    tr.stream_text(summary, stop_reason="tool_use")
    call_id = tr.tool_call("submit_review", {"repository": REPO, "pullRequest": PR,
                                             "verdict": "request_changes", "body": summary})
    started = tr.t
    tr.jitter(250, 600)
    review_id = f"rv-{tr.rng.randint(900_000, 999_999)}"
    tr.tool_result(call_id, "submit_review", f"Review {review_id} submitted: changes requested.", started)
    tr.emit("review.submitted", {"reviewId": review_id, "pullRequest": PR,
                                 "verdict": "request_changes", "commentCount": len(comments),
                                 "body": summary})
    tr.plan(STEPS, done=len(STEPS))
    return tr.lines("completed", summary)
