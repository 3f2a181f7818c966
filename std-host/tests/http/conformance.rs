//! The conformance suite over HTTP (`taskstream conformance --url`) against this server: its
//! long-lived group passes, and it catches a server whose tasks die with their connection (the
//! suite's `KillOnDisconnect` proxy in front of this server).

use std::time::Duration;

use taskstream_conformance::faulty::KillOnDisconnect;
use taskstream_conformance::{run, Config, Era, Outcome};

use super::client::Server;

fn config(url: &str, era: Era) -> Config {
    let mut config = Config::new(vec![url.to_owned()]);
    config.eras = vec![era];
    config.timeout = Duration::from_secs(5);
    config.stream_probe = 12;
    config
}

#[test]
fn the_long_lived_group_catches_tasks_that_die_with_their_connection() {
    let server = Server::start(&[]);
    for era in Era::BOTH {
        // The real server: the long-lived group runs, and TS-08 holds.
        let report = run(&config(&server.url, era));
        let got = report.era(era).expect("the era ran");
        let render = got.render();
        assert!(
            got.notes
                .iter()
                .any(|n| n.starts_with("RAN long-lived group")),
            "{render}"
        );
        assert_eq!(got.failed(), Vec::<&str>::new(), "{render}");
        assert_eq!(got.outcome("TS-08"), Some(&Outcome::Pass), "{render}");

        // The same server behind a proxy that cancels a task when its stream's connection
        // closes: TS-08 fails. In 2025-11-25 only the long-lived group closes a stream's
        // connection without cancelling it, so the failure is the group's; in 2026-07-28 closing
        // the response is how any stream is cancelled, so the cancel scenario sees it first.
        let proxy = KillOnDisconnect::start(&server.url).expect("the proxy");
        let report = run(&config(&proxy.url, era));
        let got = report.era(era).expect("the era ran");
        let render = got.render();
        match (era, got.outcome("TS-08")) {
            (Era::Legacy, Some(Outcome::Fail(seen))) => assert!(
                seen.contains("ended when the connection"),
                "TS-08 failed for another reason: {seen}\n{render}"
            ),
            (Era::Modern, Some(Outcome::Fail(_))) => {}
            (_, other) => panic!("TS-08 was {other:?}\n{render}"),
        }
    }
}
