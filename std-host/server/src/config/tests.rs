use super::*;

fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<ServeCommand, ConfigError> {
    let env: Vec<(String, OsString)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
        .collect();
    parse_serve(args.iter().map(OsString::from), move |k| {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    })
}

#[track_caller]
fn run(args: &[&str], env: &[(&str, &str)]) -> ServeConfig {
    match parse(args, env) {
        Ok(ServeCommand::Run(c)) => *c,
        other => panic!("{other:?}"),
    }
}

/// The message of a refused command line.
#[track_caller]
fn refused(args: &[&str]) -> String {
    match parse(args, &[("HOME", "/h")]) {
        Err(ConfigError::Usage(m)) => m,
        other => panic!("{args:?} should be refused, got {other:?}"),
    }
}

#[test]
fn defaults_follow_the_interface() {
    let c = run(&[], &[("HOME", "/home/u")]);
    assert_eq!(
        c.data_dir,
        Some(PathBuf::from("/home/u/.local/share/taskstream"))
    );
    assert_eq!(c.retention, RetentionPolicy::DEFAULT);
    assert_eq!(c.max_message_bytes, 1_048_576);
    assert_eq!(c.max_store_bytes, 1 << 30);
    assert_eq!(c.index_cache_bytes, 64 << 20);
    assert_eq!(c.max_streams, 16);
    assert_eq!(c.max_running_tasks, 1024);
    assert_eq!(c.max_total_running_tasks, MAX_RUNNING_TASKS_CAPACITY);
    assert_eq!(c.max_failed_lookups_per_minute, 100);
    assert_eq!(c.principal, "local");
    assert_eq!(c.durability, Durability::Group);
    assert_eq!(c.http, None);
    assert_eq!(c.socket, None);
    // The command line's defaults are the library's: a builder's config starts the same.
    let mut from_builder = ServeConfig::in_memory();
    from_builder.data_dir.clone_from(&c.data_dir);
    assert_eq!(c, from_builder);
}

#[test]
fn store_takes_a_postgres_url_instead_of_a_data_dir() {
    let c = run(&["--store", "postgres://u@h:5432/db"], &[("HOME", "/h")]);
    assert_eq!(c.store_url.as_deref(), Some("postgres://u@h:5432/db"));
    assert_eq!(c.data_dir, None, "no data dir with --store");
    assert_eq!(c.lease_timeout, taskstream_store::DEFAULT_LEASE_TIMEOUT);
    let c = run(
        &["--store=postgresql://u@h/db", "--lease-timeout", "3"],
        &[],
    );
    assert_eq!(c.lease_timeout, std::time::Duration::from_secs(3));
    assert!(refused(&["--store", "mysql://u@h/db"]).contains("postgres://"));
    for conflict in [
        &["--store", "postgres://u@h/db", "--in-memory"][..],
        &["--store", "postgres://u@h/db", "--data-dir", "/d"],
        &["--store", "postgres://u@h/db", "--socket"],
    ] {
        assert!(
            refused(conflict).contains("cannot be used with"),
            "{conflict:?}"
        );
    }
    assert!(
        refused(&["--store", "postgres://u@h/db", "--lease-timeout", "0"]).contains("1..=86400")
    );
    assert!(refused(&["--lease-timeout", "5", "--in-memory"]).contains("--store"));
}

#[test]
fn data_dir_precedence() {
    let c = run(&[], &[("HOME", "/h"), ("XDG_DATA_HOME", "/x")]);
    assert_eq!(c.data_dir, Some(PathBuf::from("/x/taskstream")));
    let c = run(&[], &[("HOME", "/h"), ("XDG_DATA_HOME", "relative")]);
    assert_eq!(
        c.data_dir,
        Some(PathBuf::from("/h/.local/share/taskstream"))
    );
    let c = run(
        &[],
        &[
            ("HOME", "/h"),
            ("XDG_DATA_HOME", "/x"),
            ("TASKSTREAM_DATA_DIR", "/t"),
        ],
    );
    assert_eq!(c.data_dir, Some(PathBuf::from("/t")));
    let c = run(&["--data-dir", "/d"], &[("TASKSTREAM_DATA_DIR", "/t")]);
    assert_eq!(c.data_dir, Some(PathBuf::from("/d")));
    assert_eq!(run(&["--in-memory"], &[]).data_dir, None);
    assert_eq!(parse(&[], &[]), Err(ConfigError::NoDataDir));
    assert!(refused(&["--in-memory", "--data-dir", "/d"]).contains("cannot be used with"));
}

#[test]
fn a_data_dir_that_is_not_utf8_is_kept_as_given() {
    use std::os::unix::ffi::OsStrExt;
    let raw = std::ffi::OsStr::from_bytes(b"/data/\xff\xfe");
    let got = parse_serve([OsString::from("--data-dir"), raw.to_owned()], |_| None);
    let Ok(ServeCommand::Run(c)) = got else {
        panic!("refused: {got:?}");
    };
    assert_eq!(c.data_dir.as_deref(), Some(std::path::Path::new(raw)));
}

#[test]
fn every_flag_is_read() {
    let c = run(
        &[
            "--in-memory",
            "--max-events-per-task",
            "5",
            "--max-event-age=60",
            "--terminal-retention",
            "0",
            "--max-payload-bytes",
            "100",
            "--max-store-bytes=5000",
            "--index-cache-mib",
            "8",
            "--max-message-bytes",
            "4096",
            "--max-streams",
            "1000",
            "--max-running-tasks",
            "7",
            "--max-total-running-tasks",
            "9",
            "--max-failed-lookups-per-minute=3",
            "--principal",
            "alice",
            "--durability",
            "none",
        ],
        &[("TASKSTREAM_PRINCIPAL", "bob")],
    );
    assert_eq!(c.retention.max_events, 5);
    assert_eq!(c.retention.max_event_age, Millis(60_000));
    assert_eq!(c.retention.terminal_retention, Millis(0));
    assert_eq!(c.retention.max_payload_bytes, 100);
    assert_eq!(c.max_store_bytes, 5000);
    assert_eq!(c.index_cache_bytes, 8 << 20);
    assert_eq!(c.max_message_bytes, 4096);
    assert_eq!(c.max_streams, 1000);
    assert_eq!(c.max_running_tasks, 7);
    assert_eq!(c.max_total_running_tasks, 9);
    assert_eq!(c.max_failed_lookups_per_minute, 3);
    assert_eq!(c.principal, "alice");
    assert_eq!(c.durability, Durability::None);
    let c = run(&["--in-memory"], &[("TASKSTREAM_PRINCIPAL", "bob")]);
    assert_eq!(c.principal, "bob");
    assert_eq!(
        parse(&["--in-memory"], &[("TASKSTREAM_PRINCIPAL", "a\u{7}b")]),
        Err(ConfigError::BadPrincipal("a\u{7}b".into()))
    );
}

#[test]
fn a_repeated_option_takes_its_last_value() {
    let c = run(
        &[
            "--in-memory",
            "--max-streams",
            "3",
            "--max-streams=4",
            "--in-memory",
            "--durability",
            "event",
            "--durability",
            "none",
        ],
        &[],
    );
    assert_eq!((c.max_streams, c.durability), (4, Durability::None));
    let c = run(
        &[
            "--store",
            "postgres://a@h/db",
            "--lease-timeout",
            "2",
            "--lease-timeout",
            "3",
        ],
        &[],
    );
    assert_eq!(c.lease_timeout, std::time::Duration::from_secs(3));
}

#[test]
fn http_options() {
    let c = run(
        &[
            "--in-memory",
            "--http",
            "127.0.0.1:0",
            "--auth-token-file",
            "/t",
            "--allowed-origin",
            "https://a",
            "--allowed-origin=https://b",
            "--max-sessions",
            "3",
        ],
        &[],
    );
    assert_eq!(
        c.http,
        Some(HttpConfig {
            bind: "127.0.0.1:0".into(),
            auth_token_file: Some(PathBuf::from("/t")),
            oauth: None,
            allowed_origins: vec!["https://a".into(), "https://b".into()],
            max_body_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_sessions: 3,
            limits: HttpLimits::default(),
            drain: std::time::Duration::ZERO,
            status_page: true,
        })
    );
    let c = run(
        &["--in-memory", "--http", "h:1", "--max-body-bytes", "100"],
        &[],
    );
    assert_eq!(c.http.map(|h| h.max_body_bytes), Some(100));
    assert!(refused(&["--in-memory", "--auth-token-file", "/t"]).contains("--http"));
    assert!(refused(&["--in-memory", "--allowed-origin", "x"]).contains("--http"));
    let c = run(
        &[
            "--in-memory",
            "--http",
            "h:1",
            "--oauth-issuer",
            "https://id.example",
            "--oauth-resource",
            "https://mcp.example/mcp",
            "--oauth-scope",
            "mcp:tasks",
            "--oauth-scope",
            "mcp:read",
        ],
        &[],
    );
    assert_eq!(
        c.http.and_then(|h| h.oauth),
        Some(OAuthConfig {
            issuer: "https://id.example".into(),
            resource: "https://mcp.example/mcp".into(),
            scopes: vec!["mcp:tasks".into(), "mcp:read".into()],
            principal_claim: "sub".into(),
        })
    );
    let oauth = [
        "--oauth-issuer",
        "https://i",
        "--oauth-resource",
        "https://r",
    ];
    assert!(refused(&[&["--in-memory"][..], &oauth].concat()).contains("--http"));
    assert!(refused(&[
        "--in-memory",
        "--http",
        "h:1",
        "--oauth-issuer",
        "https://i"
    ])
    .contains("--oauth-resource"));
    let both = [
        &["--in-memory", "--http", "h:1", "--auth-token-file", "/t"][..],
        &oauth,
    ]
    .concat();
    assert!(
        refused(&both).contains("cannot be used with"),
        "{}",
        refused(&both)
    );
}

#[test]
fn bad_input_is_an_error_that_says_what_is_allowed() {
    assert!(refused(&["--bogus"]).contains("--bogus"));
    assert!(refused(&["--max-streams"]).contains("--max-streams"));
    // Ranges are in the message.
    for (bad, allowed) in [
        (&["--max-streams", "0"][..], "1..=2048"),
        (&["--max-streams", "99999"], "1..=2048"),
        (&["--max-running-tasks", "0"], "1..=16384"),
        (&["--max-store-bytes", "0"], "1.."),
        (&["--index-cache-mib", "0"], "1.."),
        (&["--max-failed-lookups-per-minute", "0"], "1..=1000000"),
        (&["--max-message-bytes", "63"], "64..=1073741824"),
    ] {
        let m = refused(bad);
        assert!(m.contains(allowed), "{bad:?}: {m}");
    }
    for bad in [
        &["--max-events-per-task", "-1"][..],
        &["--max-event-age", "1.5"],
        &["--principal", ""],
        &["--in-memory=yes"],
    ] {
        refused(bad);
    }
    assert!(refused(&["--durability", "fast"]).contains("event, group, none"));
    assert_eq!(parse(&["--help"], &[]), Ok(ServeCommand::Help));
    assert_eq!(parse(&["-h"], &[]), Ok(ServeCommand::Help));
}

#[test]
fn the_help_names_every_option_and_its_default() {
    let help = serve_help();
    for option in [
        "--data-dir",
        "--in-memory",
        "--store",
        "--lease-timeout",
        "--max-events-per-task",
        "--max-event-age",
        "--terminal-retention",
        "--max-payload-bytes",
        "--max-store-bytes",
        "--max-message-bytes",
        "--max-streams",
        "--max-running-tasks",
        "--max-total-running-tasks",
        "--max-failed-lookups-per-minute",
        "--principal",
        "--durability",
        "--http",
        "--auth-token-file",
        "--allowed-origin",
        "--max-body-bytes",
        "--max-sessions",
        "--socket",
        "--idle-exit",
        "--detach",
    ] {
        assert!(help.contains(option), "{option} missing from:\n{help}");
    }
    assert!(help.contains("[default: 10000]"), "{help}");
    assert!(help.contains("[default: group]"), "{help}");
}

#[test]
fn socket_options() {
    let c = run(&["--data-dir", "d", "--socket"], &[]);
    assert_eq!(
        c.socket,
        Some(SocketConfig {
            idle_exit_secs: DEFAULT_IDLE_EXIT_SECS,
            detach: false
        })
    );
    let c = run(
        &[
            "--data-dir",
            "d",
            "--socket",
            "--idle-exit",
            "0",
            "--detach",
        ],
        &[],
    );
    assert_eq!(
        c.socket,
        Some(SocketConfig {
            idle_exit_secs: 0,
            detach: true
        })
    );
    assert!(refused(&["--data-dir", "d", "--idle-exit", "5"]).contains("--socket"));
    assert!(refused(&["--data-dir", "d", "--detach"]).contains("--socket"));
    refused(&["--in-memory", "--socket"]);
    // Not let go when the needed option conflicts with one given.
    assert!(refused(&["--in-memory", "--idle-exit", "5"]).contains("--idle-exit needs --socket"));
    assert!(refused(&["--in-memory", "--detach"]).contains("--detach needs --socket"));
    assert!(
        refused(&["--socket", "--lease-timeout", "5", "--data-dir", "d"])
            .contains("--lease-timeout needs --store")
    );
    refused(&["--socket", "--http", "127.0.0.1:0", "--data-dir", "d"]);
    refused(&["--data-dir", "d", "--socket", "--idle-exit", "-1"]);
}
