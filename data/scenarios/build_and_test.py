"""build-and-test: a CI run of the gateway workspace after review: checkout, toolchain, fetch,
build (with compiler warnings), tests under nextest (one fails), then the remaining steps are
skipped and the run fails. Many log lines, structured diagnostics and test results, artifacts
referenced by URI."""

from gen_traces import Trace, sha256_hex

SEED = 26940002
RUN = "ci-run-58213"
COMMIT = "4e1c9b27d0a3f1e85c6b93d2a4f70e1b9c8d5a36"
ARTIFACT_BASE = f"https://artifacts.example.com/edge-gateway/runs/{RUN}"
FAILING = "limiter::bucket::tests::steady_traffic_at_twice_the_rate_keeps_half"

PHASES = [
    ("checkout", "Check out"),
    ("toolchain", "Set up toolchain"),
    ("fetch", "Fetch dependencies"),
    ("build", "Build"),
    ("test", "Unit and integration tests"),
    ("lint", "Clippy"),
    ("docs", "Docs"),
    ("package", "Package"),
]

# (crate, version) in the order cargo would finish them on two cores; the workspace's own
# crates come last. Versions are those of a lock file of the period.
DEPENDENCIES = """
proc-macro2 1.0.95 unicode-ident 1.0.18 libc 0.2.172 cfg-if 1.0.0 autocfg 1.4.0 version_check 0.9.5
once_cell 1.21.3 memchr 2.7.4 pin-project-lite 0.2.16 bytes 1.10.1 itoa 1.0.15 smallvec 1.15.0
quote 1.0.40 shlex 1.3.0 scopeguard 1.2.0 log 0.4.27 fnv 1.0.7 futures-core 0.3.31 futures-sink 0.3.31
syn 2.0.101 cc 1.2.24 serde 1.0.219 lock_api 0.4.12 parking_lot_core 0.9.10 tracing-core 0.1.33
futures-task 0.3.31 pin-utils 0.1.0 futures-io 0.3.31 slab 0.4.9 hashbrown 0.15.3 equivalent 1.0.2
percent-encoding 2.3.1 ryu 1.0.20 tinyvec_macros 0.1.1 typenum 1.18.0 generic-array 0.14.7
stable_deref_trait 1.2.0 writeable 0.6.1 litemap 0.8.0 zerofrom 0.1.6 yoke 0.8.0 zerovec 0.11.2
tinystr 0.8.1 icu_locale_core 2.0.0 potential_utf 0.1.2 zerotrie 0.2.2 icu_collections 2.0.0
icu_normalizer_data 2.0.0 icu_properties_data 2.0.1 icu_provider 2.0.0 icu_properties 2.0.1
icu_normalizer 2.0.0 idna_adapter 1.2.1 utf8_iter 1.0.4 idna 1.0.3 form_urlencoded 1.2.1 url 2.5.4
serde_derive 1.0.219 tokio-macros 2.5.0 tracing-attributes 0.1.28 futures-macro 0.3.31
thiserror-impl 2.0.12 thiserror 2.0.12 mio 1.0.3 socket2 0.5.10 signal-hook-registry 1.4.5
parking_lot 0.12.3 tokio 1.45.1 tracing 0.1.41 futures-channel 0.3.31 futures-util 0.3.31
http 1.3.1 http-body 1.0.1 http-body-util 0.1.3 httparse 1.10.1 httpdate 1.0.3 atomic-waker 1.1.2
want 0.3.1 try-lock 0.2.5 h2 0.4.10 indexmap 2.9.0 tokio-util 0.7.15 hyper 1.6.0 hyper-util 0.1.13
tower-layer 0.3.3 tower-service 0.3.3 sync_wrapper 1.0.2 tower 0.5.2 mime 0.3.17 matchit 0.8.4
axum-core 0.5.2 serde_urlencoded 0.7.1 serde_json 1.0.140 serde_path_to_error 0.1.17 axum 0.8.4
bitflags 2.9.1 tower-http 0.6.4 getrandom 0.3.3 rand_core 0.9.3 ppv-lite86 0.2.21 zerocopy 0.8.25
rand_chacha 0.9.0 rand 0.9.1 untrusted 0.9.0 spin 0.9.8 ring 0.17.14 zeroize 1.8.1 rustls-pki-types 1.12.0
rustls-webpki 0.103.3 subtle 2.6.1 rustls 0.23.27 tokio-rustls 0.26.2 rustls-pemfile 2.2.0
base64 0.22.1 hex 0.4.3 crypto-common 0.1.6 block-buffer 0.10.4 digest 0.10.7 cpufeatures 0.2.17
sha2 0.10.9 hmac 0.12.1 time-core 0.1.4 time-macros 0.2.22 deranged 0.4.0 num-conv 0.1.0
powerfmt 0.2.0 time 0.3.41 simple_asn1 0.6.3 num-traits 0.2.19 num-integer 0.1.46 num-bigint 0.4.6
pem 3.0.5 jsonwebtoken 9.3.1 toml_datetime 0.6.9 serde_spanned 0.6.8 winnow 0.7.10 toml_edit 0.22.26
toml 0.8.22 ipnet 2.11.0 crossbeam-utils 0.8.21 dashmap 6.1.0 dashmap 5.5.3 arc-swap 1.7.1
regex-syntax 0.8.5 aho-corasick 1.1.3 regex-automata 0.4.9 regex 1.11.1 lazy_static 1.5.0
sharded-slab 0.1.7 thread_local 1.1.8 nu-ansi-term 0.46.0 overload 0.1.1 tracing-log 0.2.0
matchers 0.1.0 tracing-subscriber 0.3.19 prometheus-client-derive-encode 0.4.2 dtoa 1.0.10
prometheus-client 0.23.1 humantime 2.2.0 anstyle 1.0.10 anstyle-parse 0.2.6 anstyle-query 1.1.2
utf8parse 0.2.2 colorchoice 1.0.3 is_terminal_polyfill 1.70.1 anstream 0.6.18 clap_lex 0.7.4
strsim 0.11.1 heck 0.5.0 clap_derive 4.5.32 clap_builder 4.5.38 clap 4.5.38 either 1.15.0
fastrand 2.3.0 rustix 1.0.7 linux-raw-sys 0.9.4 tempfile 3.20.0 similar 2.7.0 console 0.15.11
insta 1.43.1 rstest_macros 0.25.0 rstest 0.25.0 relative-path 1.9.3 glob 0.3.2 wiremock 0.6.3
deadpool 0.12.2 assert-json-diff 2.0.2 reqwest 0.12.15 hyper-rustls 0.27.6 webpki-roots 1.0.0
encoding_rs 0.8.35 mime_guess 2.0.5 unicase 2.8.1 ipnetwork 0.21.1 pretty_assertions 1.4.1
diff 0.1.13 yansi 1.0.1 proptest 1.6.0 bit-set 0.8.0 bit-vec 0.8.0 rand_xorshift 0.4.0
quick-error 1.2.3 rusty-fork 0.3.0 wait-timeout 0.2.1 unarray 0.1.4
"""

WORKSPACE = [("edge-proto", "crates/proto"), ("edge-config", "crates/config"),
             ("edge-gateway", "crates/gateway"), ("edge-admin", "crates/admin"),
             ("edge-gateway-cli", "crates/cli")]

# Test names per (crate, binary): (module, [names]); some names expand into rstest cases.
TESTS = {
    ("edge-proto", "lib"): [
        ("frame::tests", ["decodes_empty_frame", "decodes_max_size_frame", "rejects_oversized_frame",
                          "rejects_truncated_header", "roundtrips_every_kind", "keeps_unknown_flags",
                          "splits_at_any_offset", "reports_offset_of_bad_byte"]),
        ("varint::tests", ["roundtrip_1_byte", "roundtrip_2_bytes", "roundtrip_4_bytes", "roundtrip_8_bytes",
                           "rejects_non_minimal_encoding", "rejects_overlong", "max_value"]),
        ("header::tests", ["parses_lowercase", "rejects_uppercase_name", "rejects_obs_fold",
                           "rejects_nul_in_value", "keeps_duplicate_order", "trims_ows"]),
        ("status::tests::reason_phrase", [f"case_{i:02d}" for i in range(1, 64)]),
        ("codec::tests", ["encode_then_decode_is_identity", "partial_reads_resume", "eof_mid_frame_is_error",
                          "back_pressure_stops_reads", "zero_length_payload"]),
        ("codec::prop", ["arbitrary_frames_roundtrip", "arbitrary_chunking_roundtrips"]),
    ],
    ("edge-config", "lib"): [
        ("load::tests", ["minimal_file", "full_example_file", "missing_file_is_error", "utf8_bom_is_accepted",
                         "relative_paths_resolve_against_file", "includes_are_merged", "include_cycle_is_error"]),
        ("env::tests", ["overrides_scalar", "overrides_nested", "ignores_unrelated_vars", "bad_number_names_var"]),
        ("validate::tests::rejects", [f"case_{i:02d}" for i in range(1, 72)]),
        ("routes::tests", ["path_params", "wildcard_suffix", "conflicting_routes_error", "trailing_slash_policy",
                           "host_routing", "method_filter", "upstream_must_exist"]),
        ("rate_limit::tests", ["default_policy_required", "named_policies_parse", "unknown_policy_in_route_is_error",
                               "burst_defaults_to_rate"]),
        ("snapshots", ["example_gateway_toml", "example_minimal_toml", "example_tls_toml", "example_admin_toml"]),
    ],
    ("edge-gateway", "lib"): [
        ("limiter::bucket::tests", [
            "a_bad_named_policy_is_reported_by_name", "clock_going_backwards_earns_nothing",
            "concurrent_checks_never_overdraw", "config_parses_with_default_cost", "config_rejects_unknown_fields",
            "cost_is_debited_per_request", "debug_shows_key_count_not_keys", "deny_reports_when_a_token_will_be_back",
            "keys_do_not_share_buckets", "new_key_gets_a_full_burst", "peek_does_not_debit",
            "refill_adds_rate_tokens_per_second", "refill_is_capped_at_burst", "reset_forgets_the_key",
            "slow_steady_traffic_is_never_denied", "stats_count_both_outcomes",
            "steady_traffic_at_twice_the_rate_keeps_half",
            "time_to_earn_rounds_down_to_whole_milliseconds", "unknown_policy_falls_back_to_default",
            "validate_rejects_cost_above_burst", "validate_rejects_zero_rate"]),
        ("middleware::rate_limit::tests", ["api_key_wins_over_address", "first_forwarded_entry_is_used"]),
        ("middleware::cors::tests", ["preflight_allowed_origin", "preflight_denied_origin", "credentials_need_exact_origin",
                                     "vary_header_is_set", "max_age_is_capped"]),
        ("middleware::timeout::tests", ["times_out_slow_upstream", "does_not_time_out_streaming_body", "timeout_is_504"]),
        ("middleware::request_id::tests", ["generates_when_missing", "keeps_valid_incoming", "replaces_invalid_incoming"]),
        ("router::tests::matches", [f"case_{i:03d}" for i in range(1, 131)]),
        ("router::tests", ["longest_prefix_wins", "method_not_allowed_lists_allow", "percent_decoding_once",
                           "double_slash_is_not_collapsed", "host_header_with_port"]),
        ("upstream::pool::tests", ["reuses_idle_connection", "evicts_after_idle_timeout", "caps_per_host",
                                   "retries_on_reset_before_write", "no_retry_after_body_sent", "h2_multiplexes"]),
        ("upstream::health::tests", ["marks_down_after_three_failures", "marks_up_after_two_successes",
                                     "jitter_stays_in_bounds", "uses_injected_clock"]),
        ("upstream::balance::tests::weighted", [f"case_{i:02d}" for i in range(1, 61)]),
        ("auth::jwt::tests", ["accepts_valid_hs256", "accepts_valid_es256", "rejects_expired", "rejects_not_yet_valid",
                              "leeway_is_applied", "rejects_wrong_audience", "rejects_none_alg", "rejects_bad_signature",
                              "kid_selects_key", "unknown_kid_is_401"]),
        ("auth::api_key::tests", ["constant_time_compare", "hashed_keys_match", "revoked_key_is_403", "missing_key_is_401"]),
        ("net::client_ip::tests::resolves", [f"case_{i:02d}" for i in range(1, 43)]),
        ("access_log::tests", ["common_format", "json_format", "redacts_authorization", "logs_client_ip_not_peer"]),
        ("metrics::tests", ["counters_render", "histogram_buckets", "labels_are_escaped"]),
        ("tls::tests", ["loads_pem_chain", "rejects_key_mismatch", "sni_selects_cert", "reloads_on_sighup"]),
        ("clock::tests", ["test_clock_advances", "system_clock_is_monotonic"]),
    ],
    ("edge-gateway", "tests/rate_limit.rs"): [
        ("", ["burst_then_429_with_retry_after", "bucket_refills_after_a_second",
              "anonymous_clients_are_limited_per_address"]),
    ],
    ("edge-gateway", "tests/routing.rs"): [
        ("", ["routes_by_prefix", "routes_by_host", "strips_prefix", "adds_forwarded_headers", "websocket_upgrade",
              "streams_large_response", "propagates_trailers", "upstream_down_is_502", "slow_upstream_is_504"]),
        ("proxy_headers", [f"case_{i:02d}" for i in range(1, 37)]),
    ],
    ("edge-gateway", "tests/tls.rs"): [
        ("", ["handshake_tls13", "handshake_tls12", "alpn_h2", "alpn_http11", "client_cert_required",
              "expired_cert_is_rejected", "hot_reload_keeps_connections"]),
    ],
    ("edge-gateway", "tests/auth.rs"): [
        ("", ["jwt_from_header", "jwt_from_cookie", "api_key_header", "admin_routes_need_admin_role",
              "unauthenticated_is_401_with_challenge", "jwks_refresh"]),
    ],
    ("edge-admin", "lib"): [
        ("api::limits::tests", ["lists_policies", "shows_stats", "reset_key_needs_admin"]),
        ("api::routes::tests", ["lists_routes", "shows_upstream_health", "etag_changes_on_reload"]),
        ("render::tests", [f"snapshot_{n}" for n in ("index", "routes", "limits", "upstreams", "errors", "empty")]),
    ],
    ("edge-gateway-cli", "bin/edge-gateway"): [
        ("cli::tests", ["parses_serve", "parses_check", "check_reports_line_numbers", "version_flag",
                        "config_flag_overrides_env", "unknown_flag_suggests"]),
    ],
}
# Doc tests: (crate, [(file, item, [lines of its examples])]).
DOCTESTS = [
    ("edge-proto", [
        ("crates/proto/src/frame.rs", "frame::Frame", [14, 31]),
        ("crates/proto/src/frame.rs", "frame::Frame::decode", [88]),
        ("crates/proto/src/frame.rs", "frame::Frame::encode", [121]),
        ("crates/proto/src/varint.rs", "varint", [5]),
        ("crates/proto/src/varint.rs", "varint::VarInt::from_u64", [42]),
        ("crates/proto/src/varint.rs", "varint::VarInt::encode", [77]),
        ("crates/proto/src/header.rs", "header::HeaderName::new", [36, 49]),
        ("crates/proto/src/header.rs", "header::HeaderMap", [112]),
        ("crates/proto/src/codec.rs", "codec::FrameCodec", [11]),
        ("crates/proto/src/status.rs", "status::StatusCode::reason", [60]),
    ]),
    ("edge-config", [
        ("crates/config/src/lib.rs", "", [3]),
        ("crates/config/src/load.rs", "load::load", [19, 38]),
        ("crates/config/src/load.rs", "load::Loader::with_env", [92]),
        ("crates/config/src/env.rs", "env::apply_overrides", [24]),
        ("crates/config/src/routes.rs", "routes::Route", [15, 27, 44]),
        ("crates/config/src/routes.rs", "routes::RouteTable::resolve", [131]),
        ("crates/config/src/rate_limit.rs", "rate_limit::RateLimitConfig", [8]),
        ("crates/config/src/validate.rs", "validate::validate", [30]),
    ]),
    ("edge-gateway", [
        ("crates/gateway/src/lib.rs", "", [7, 25]),
        ("crates/gateway/src/router.rs", "router::build", [54]),
        ("crates/gateway/src/router.rs", "router::Router::route", [140, 162]),
        ("crates/gateway/src/upstream/pool.rs", "upstream::pool::Pool", [33]),
        ("crates/gateway/src/upstream/pool.rs", "upstream::pool::Pool::checkout", [118]),
        ("crates/gateway/src/upstream/balance.rs", "upstream::balance::Weighted", [21, 40]),
        ("crates/gateway/src/upstream/health.rs", "upstream::health::HealthCheck", [18]),
        ("crates/gateway/src/auth/jwt.rs", "auth::jwt::Verifier::verify", [97]),
        ("crates/gateway/src/auth/api_key.rs", "auth::api_key::KeyStore", [26]),
        ("crates/gateway/src/net/client_ip.rs", "net::client_ip::ClientIp::from_request", [29]),
        ("crates/gateway/src/middleware/cors.rs", "middleware::cors::CorsLayer", [12]),
        ("crates/gateway/src/middleware/timeout.rs", "middleware::timeout::TimeoutLayer", [9]),
        ("crates/gateway/src/middleware/rate_limit.rs", "middleware::rate_limit::RateLimitLayer::new", [64]),
        ("crates/gateway/src/clock.rs", "clock::TestClock", [31]),
        ("crates/gateway/src/metrics.rs", "metrics::Metrics::register", [45]),
        ("crates/gateway/src/tls.rs", "tls::TlsConfig::from_pem", [58]),
    ]),
    ("edge-admin", [
        ("crates/admin/src/lib.rs", "", [4]),
        ("crates/admin/src/api/limits.rs", "api::limits::routes", [12]),
        ("crates/admin/src/render.rs", "render::Page", [20, 33]),
    ]),
]
IGNORED = {("edge-gateway", "tests/tls.rs", "hot_reload_keeps_connections"),
           ("edge-gateway", "lib", "tls::tests::reloads_on_sighup"),
           ("edge-gateway", "tests/auth.rs", "jwks_refresh")}

FAILURE_STDOUT = f"""
running 1 test
test {FAILING} ... FAILED

failures:

failures:
    {FAILING}

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 212 filtered out; finished in 0.03s
"""

FAILURE_STDERR = f"""thread '{FAILING}' panicked at crates/gateway/src/limiter/bucket.rs:531:9:
assertion `left == right` failed: admitted 10 of 200 requests sent 10 ms apart at rate = 50, burst = 10
  left: 10
 right: 105
stack backtrace:
   0: rust_begin_unwind
             at /rustc/6b00bc3880198600130e1cf62b8f8a93494488cc/library/std/src/panicking.rs:697:5
   1: core::panicking::panic_fmt
             at /rustc/6b00bc3880198600130e1cf62b8f8a93494488cc/library/core/src/panicking.rs:75:14
   2: core::panicking::assert_failed_inner
   3: core::panicking::assert_failed
             at /rustc/6b00bc3880198600130e1cf62b8f8a93494488cc/library/core/src/panicking.rs:380:5
   4: edge_gateway::limiter::bucket::tests::steady_traffic_at_twice_the_rate_keeps_half
             at ./src/limiter/bucket.rs:531:9
   5: edge_gateway::limiter::bucket::tests::steady_traffic_at_twice_the_rate_keeps_half::{{{{closure}}}}
             at ./src/limiter/bucket.rs:518:52
   6: core::ops::function::FnOnce::call_once
             at /rustc/6b00bc3880198600130e1cf62b8f8a93494488cc/library/core/src/ops/function.rs:250:5
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
"""

WARNINGS = [
    {
        "crate": "edge-gateway", "code": "dead_code", "message": "field `last_seen` is never read",
        "path": "crates/gateway/src/limiter/bucket.rs", "line": 115, "column": 5,
        "rendered": (
            "warning: field `last_seen` is never read\n"
            "   --> crates/gateway/src/limiter/bucket.rs:115:5\n"
            "    |\n"
            "109 | struct Bucket {\n"
            "    |        ------ field in this struct\n"
            "...\n"
            "115 |     last_seen: Instant,\n"
            "    |     ^^^^^^^^^\n"
            "    |\n"
            "    = note: `Bucket` has a derived impl for the trait `Debug`, but this is intentionally ignored during dead code analysis\n"
            "    = note: `#[warn(dead_code)]` on by default"
        ),
    },
    {
        "crate": "edge-admin", "code": "unused_variables", "message": "unused variable: `policy`",
        "path": "crates/admin/src/api/limits.rs", "line": 47, "column": 13,
        "rendered": (
            "warning: unused variable: `policy`\n"
            "  --> crates/admin/src/api/limits.rs:47:13\n"
            "   |\n"
            "47 |         let policy = state.policies.get(Some(&name));\n"
            "   |             ^^^^^^ help: if this is intentional, prefix it with an underscore: `_policy`\n"
            "   |\n"
            "   = note: `#[warn(unused_variables)]` on by default"
        ),
    },
]


def build():
    tr = Trace(
        "build-and-test",
        SEED,
        title="CI: edge-gateway PR #1482 (after review)",
        description=(
            "A CI run of a Rust workspace: checkout, toolchain, dependency fetch, a build with "
            f"two compiler warnings, {count_doctests()} doc tests, then {count_tests() - len(IGNORED)} unit "
            f"and integration tests under nextest ({len(IGNORED)} more ignored) of which one fails; "
            "clippy, docs and packaging are skipped and the run fails. Phases, many log lines, "
            "structured diagnostics and test results, log and JUnit artifacts by URI."
        ),
        model="ci",
    )
    log_lines = []

    def log(phase, text, stream="stderr", gap=(3, 25)):
        tr.jitter(*gap)
        tr.emit("log", {"phaseId": phase, "stream": stream, "line": text})
        log_lines.append(text)

    phase_started = {}

    def start(phase, command=None):
        index = [p for p, _ in PHASES].index(phase)
        payload = {"phaseId": phase, "name": PHASES[index][1], "index": index, "total": len(PHASES)}
        if command:
            payload["command"] = command
        tr.emit("phase.started", payload)
        phase_started[phase] = tr.t
        log(phase, f"##[group]{PHASES[index][1]}", "stdout", (0, 2))
        if command:
            log(phase, f"$ {command}", "stdout", (1, 4))

    def finish(phase, status, exit_code=0, **extra):
        log(phase, "##[endgroup]", "stdout", (0, 3))
        payload = {"phaseId": phase, "status": status, "durationMs": tr.t - phase_started[phase],
                   "exitCode": exit_code}
        payload.update(extra)
        tr.emit("phase.completed", payload)

    # --- checkout --------------------------------------------------------------------------
    start("checkout", "git fetch --depth=50 origin +refs/pull/1482/merge && git checkout FETCH_HEAD")
    for text in [
        "remote: Enumerating objects: 412, done.",
        "remote: Counting objects: 100% (412/412), done.",
        "remote: Compressing objects: 100% (187/187), done.",
        "remote: Total 412 (delta 236), reused 301 (delta 175), pack-reused 0 (from 0)",
        "Receiving objects: 100% (412/412), 188.31 KiB | 3.02 MiB/s, done.",
        "Resolving deltas: 100% (236/236), completed with 61 local objects.",
        "From https://git.example.com/edge/edge-gateway",
        " * branch            refs/pull/1482/merge -> FETCH_HEAD",
        f"HEAD is now at {COMMIT[:7]} Merge 7d0a3f1 into 91b5e62",
    ]:
        log("checkout", text, gap=(60, 260))
    finish("checkout", "succeeded", commit=COMMIT)

    # --- toolchain -------------------------------------------------------------------------
    start("toolchain", "rustup show active-toolchain && rustc -Vv && cargo -V")
    for text in ["1.88.0-x86_64-unknown-linux-gnu (overridden by '/src/edge-gateway/rust-toolchain.toml')",
                 "rustc 1.88.0 (6b00bc388 2025-06-23)", "binary: rustc",
                 "commit-hash: 6b00bc3880198600130e1cf62b8f8a93494488cc", "commit-date: 2025-06-23",
                 "host: x86_64-unknown-linux-gnu", "release: 1.88.0", "LLVM version: 20.1.5",
                 "cargo 1.88.0 (873a06493 2025-05-10)"]:
        log("toolchain", text, "stdout", (20, 120))
    finish("toolchain", "succeeded", toolchain="1.88.0")

    # --- fetch -----------------------------------------------------------------------------
    deps = DEPENDENCIES.split()
    deps = list(zip(deps[0::2], deps[1::2]))
    start("fetch", "cargo fetch --locked")
    log("fetch", "    Updating crates.io index", gap=(300, 700))
    fresh = [d for i, d in enumerate(deps) if (i * 7) % 3 == 0]
    total_kb = 0
    for name, version in fresh:
        log("fetch", f"  Downloaded {name} v{version}", gap=(15, 90))
        total_kb += tr.rng.randint(12, 420)
    fetch_secs = (tr.t - phase_started["fetch"]) / 1000
    log("fetch", f"  Downloaded {len(fresh)} crates ({total_kb / 1000:.1f} MB) in {fetch_secs:.2f}s", gap=(20, 60))
    finish("fetch", "succeeded", downloaded=len(fresh))

    # --- build -----------------------------------------------------------------------------
    units = [(n, v, None) for n, v in deps] + [(n, "0.9.0", p) for n, p in WORKSPACE]
    start("build", "cargo build --workspace --all-targets --locked")
    warnings = 0
    for i, (name, version, path) in enumerate(units, 1):
        heavy = name in ("syn", "serde_derive", "tokio", "hyper", "h2", "ring", "rustls", "regex-automata",
                         "axum", "clap_builder", "reqwest", "tower-http", "edge-gateway", "proptest")
        shown = f"{version} (/src/edge-gateway/{path})" if path else version
        log("build", f"   Compiling {name} v{shown}", gap=(350, 1400) if heavy else (25, 190))
        if name == "ring":
            log("build", "warning: ring@0.17.14: Compiler family detection failed due to error: "
                "ToolNotFound: failed to find tool \"clang\": No such file or directory (os error 2)", gap=(300, 900))
        if path and name in ("edge-gateway", "edge-admin"):
            tr.jitter(1800, 4200)
            for w in WARNINGS:
                if w["crate"] != name:
                    continue
                warnings += 1
                tr.emit("build.diagnostic", {
                    "phaseId": "build", "crate": name, "level": "warning", "code": w["code"],
                    "message": w["message"],
                    "spans": [{"path": w["path"], "line": w["line"], "column": w["column"]}],
                    "rendered": w["rendered"],
                })
                for text in w["rendered"].split("\n"):
                    log("build", text, gap=(0, 2))
                log("build", "", gap=(0, 2))
            count = sum(1 for w in WARNINGS if w["crate"] == name)
            log("build", f"warning: `{name}` (lib) generated {count} warning{'s' if count != 1 else ''}", gap=(1, 5))
        if i % 12 == 0 or i == len(units):
            tr.emit("phase.progress", {"phaseId": "build", "completed": i, "total": len(units), "unit": "crates"})
    secs = (tr.t - phase_started["build"]) / 1000 + 0.3
    log("build", f"    Finished `dev` profile [unoptimized + debuginfo] target(s) in {secs:.2f}s", gap=(200, 500))
    finish("build", "succeeded", warnings=warnings, units=len(units))

    # --- test ------------------------------------------------------------------------------
    cases = []
    for (crate, binary), groups in TESTS.items():
        for module, names in groups:
            for name in names:
                full = f"{module}::{name}" if module else name
                cases.append((crate, binary, full))
    ignored = [c for c in cases if c in IGNORED]
    run = [c for c in cases if c not in IGNORED]
    binaries = len(TESTS)
    start("test", "cargo test --doc --workspace --locked && "
                  "cargo nextest run --workspace --locked --no-fail-fast --profile ci")
    log("test", "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.38s", gap=(300, 700))
    doc_started = tr.t
    doc_total = 0
    for crate, items in DOCTESTS:
        log("test", f"   Doc-tests {crate.replace('-', '_')}", gap=(150, 400))
        log("test", "", "stdout", (0, 2))
        examples = [(path, item, line) for path, item, lines in items for line in lines]
        log("test", f"running {len(examples)} tests", "stdout", (1, 4))
        tr.rng.shuffle(examples)
        for path, item, line in examples:
            log("test", f"test {path} - {item + ' ' if item else ''}(line {line}) ... ok", "stdout", (40, 260))
        doc_total += len(examples)
        log("test", "", "stdout", (0, 2))
        secs = tr.rng.uniform(0.8, 2.9)
        log("test", f"test result: ok. {len(examples)} passed; 0 failed; 0 ignored; 0 measured; "
            f"0 filtered out; finished in {secs:.2f}s", "stdout", (0, 2))
        log("test", "", "stdout", (0, 2))
    tr.emit("test.summary", {"phaseId": "test", "kind": "doctest", "passed": doc_total, "failed": 0,
                             "ignored": 0, "durationMs": tr.t - doc_started, "failures": []})
    log("test", f"    Starting {len(run)} tests across {binaries} binaries ({len(ignored)} tests skipped)",
        gap=(400, 900))
    tr.rng.shuffle(run)
    # nextest runs slow binaries' tests late; keep integration tests mostly at the end
    run.sort(key=lambda c: (c[1] != "lib") * tr.rng.random())
    passed = failed = 0
    results_xml = []
    test_started = tr.t
    for crate, binary, name in run:
        if binary.startswith("tests/"):
            duration = tr.rng.uniform(40, 1300) if "tls" not in binary else tr.rng.uniform(300, 2100)
        elif name.endswith("bucket_refills_after_a_second"):
            duration = 1104.0
        elif "prop" in name or "concurrent" in name or "snapshots" in name:
            duration = tr.rng.uniform(120, 900)
        else:
            duration = tr.rng.lognormvariate(1.3, 0.9)
        duration = round(duration, 0 if duration > 10 else 1)
        tr.jitter(2, 55)
        shown = f"{crate}::{binary.split('/')[-1].removesuffix('.rs')}" if binary != "lib" else crate
        if binary.startswith("bin/"):
            shown = f"{crate}::bin/{binary.split('/')[-1]}"
        is_failing = name == FAILING
        if is_failing:
            failing_duration = duration
        status = "failed" if is_failing else "passed"
        verdict = "FAIL" if is_failing else "PASS"
        log("test", f"        {verdict} [{duration / 1000:>8.3f}s] {shown} {name}", gap=(0, 1))
        payload = {"phaseId": "test", "suite": shown, "name": name, "status": status,
                   "durationMs": duration}
        if is_failing:
            failed += 1
            payload["failure"] = {
                "message": "assertion `left == right` failed: admitted 10 of 200 requests sent 10 ms "
                           "apart at rate = 50, burst = 10\n  left: 10\n right: 105",
                "location": {"path": "crates/gateway/src/limiter/bucket.rs", "line": 531, "column": 9},
                "stdout": FAILURE_STDOUT,
                "stderr": FAILURE_STDERR,
            }
            log("test", "", gap=(0, 1))
            log("test", f"--- STDOUT:              {shown} {name} ---", gap=(0, 1))
            for text in FAILURE_STDOUT.split("\n"):
                log("test", text, gap=(0, 1))
            log("test", f"--- STDERR:              {shown} {name} ---", gap=(0, 1))
            for text in FAILURE_STDERR.rstrip("\n").split("\n"):
                log("test", text, gap=(0, 1))
            log("test", "", gap=(0, 1))
        else:
            passed += 1
        tr.emit("test.result", payload)
        results_xml.append((shown, name, duration, is_failing))
    for crate, binary, name in ignored:
        shown = f"{crate}::{binary.split('/')[-1].removesuffix('.rs')}" if binary != "lib" else crate
        tr.emit("test.result", {"phaseId": "test", "suite": shown, "name": name, "status": "ignored",
                                "durationMs": 0})
    elapsed = (tr.t - test_started) / 1000
    log("test", "------------", "stderr", (5, 20))
    log("test", f"     Summary [{elapsed:>8.3f}s] {len(run)} tests run: {passed} passed, {failed} failed, "
        f"{len(ignored)} skipped", gap=(0, 2))
    log("test", f"        FAIL [{failing_duration / 1000:>8.3f}s] edge-gateway {FAILING}", gap=(0, 2))
    log("test", "error: test run failed", gap=(0, 2))
    tr.emit("test.summary", {"phaseId": "test", "kind": "nextest", "passed": passed, "failed": failed,
                             "ignored": len(ignored),
                             "durationMs": int(elapsed * 1000),
                             "failures": [{"suite": "edge-gateway", "name": FAILING}]})

    junit = junit_xml(results_xml, ignored, elapsed)
    junit_id = tr.hex_id("art-", 10)
    tr.jitter(300, 700)
    tr.emit("artifact", {
        "artifactId": junit_id, "name": "junit.xml", "uri": f"{ARTIFACT_BASE}/junit.xml",
        "mimeType": "application/xml", "size": len(junit.encode("utf-8")), "sha256": sha256_hex(junit),
        "phaseId": "test", "description": "nextest JUnit report",
    })
    finish("test", "failed", exit_code=100, failed=failed)

    for phase in ("lint", "docs", "package"):
        tr.jitter(20, 60)
        name = dict(PHASES)[phase]
        tr.emit("phase.completed", {"phaseId": phase, "status": "skipped", "durationMs": 0,
                                    "reason": "an earlier phase failed: test"})
        log(phase, f"{name}: skipped (an earlier phase failed)", "stdout", (0, 3))

    full_log = "\n".join(log_lines) + "\n"
    tr.jitter(400, 900)
    tr.emit("artifact", {
        "artifactId": tr.hex_id("art-", 10), "name": "build.log", "uri": f"{ARTIFACT_BASE}/build.log",
        "mimeType": "text/plain; charset=utf-8", "size": len(full_log.encode("utf-8")),
        "sha256": sha256_hex(full_log), "description": "the complete log of this run",
    })
    status_message = f"1 test failed: edge-gateway {FAILING}"
    result = (
        f"CI run {RUN} for edge-gateway PR #1482 at {COMMIT[:7]}: failed.\n\n"
        f"- build: succeeded with {warnings} warnings\n"
        f"- tests: {passed} passed, {failed} failed, {len(ignored)} skipped in {elapsed:.1f}s\n"
        f"  - FAIL edge-gateway {FAILING}\n"
        "    assertion `left == right` failed: admitted 10 of 200 requests sent 10 ms apart "
        "at rate = 50, burst = 10 (left: 10, right: 105), crates/gateway/src/limiter/bucket.rs:531:9\n"
        "- clippy, docs, package: skipped\n\n"
        f"JUnit report: {ARTIFACT_BASE}/junit.xml\nFull log: {ARTIFACT_BASE}/build.log"
    )
    return tr.lines("failed", result, status_message=status_message, tail_ms=250)


def count_doctests():
    return sum(len(lines) for _, items in DOCTESTS for _, _, lines in items)


def count_tests():
    return sum(len(names) for groups in TESTS.values() for _, names in groups)


def junit_xml(results, ignored, elapsed):
    def esc(s):
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")

    suites = {}
    for suite, name, duration, failing in results:
        suites.setdefault(suite, []).append((name, duration, failing))
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="nextest-run" tests="{len(results) + len(ignored)}" failures="1" errors="0" '
           f'time="{elapsed:.3f}">']
    for suite in sorted(suites):
        cases = suites[suite]
        out.append(f'    <testsuite name="{esc(suite)}" tests="{len(cases)}" '
                   f'failures="{sum(1 for c in cases if c[2])}" errors="0">')
        for name, duration, failing in sorted(cases):
            out.append(f'        <testcase name="{esc(name)}" classname="{esc(suite)}" time="{duration / 1000:.3f}"'
                       + (">" if failing else "/>"))
            if failing:
                out.append('            <failure type="test failure">' + esc(FAILURE_STDERR) + "</failure>")
                out.append("        </testcase>")
        out.append("    </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
