//! A thousand concurrent tasks, each with a stream, on one connection, while other requests
//! are answered.

use std::collections::HashMap;

use serde_json::json;

use super::client::Server;

#[test]
fn a_thousand_tasks_and_streams_on_one_connection() {
    const N: usize = 1000;
    let mut s = Server::legacy(&["--max-streams", "1000"]);
    let mut ids = Vec::new();
    for _ in 0..N {
        ids.push(s.request(
            "tools/call",
            json!({"name": "emit", "arguments": {"count": 3, "interval_ms": 50}, "task": {}}),
        ));
    }
    let mut tasks = Vec::new();
    for id in ids {
        let r = s.response(id);
        tasks.push(
            r["result"]["task"]["taskId"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
    }
    let mut streams = HashMap::new();
    for t in &tasks {
        streams.insert(s.request("tasks/stream", json!({"taskId": t})), t.clone());
    }
    // Answered while a thousand streams flow.
    assert_eq!(s.ok("ping", json!({})), json!({}));
    assert_eq!(
        s.ok("tasks/get", json!({"taskId": tasks[0]}))["taskId"],
        tasks[0].as_str()
    );
    let mut seen: HashMap<String, Vec<u64>> = HashMap::new();
    let mut done = 0;
    while done < N {
        let v = s.recv("stream traffic", |v| {
            v["method"] == "notifications/tasks/event"
                || v["id"].as_i64().is_some_and(|i| streams.contains_key(&i))
        });
        if v["method"] == "notifications/tasks/event" {
            let t = v["params"]["taskId"].as_str().expect("taskId").to_owned();
            seen.entry(t)
                .or_default()
                .push(v["params"]["seq"].as_u64().expect("seq"));
        } else {
            assert_eq!(v["result"], json!({}), "{v}");
            let t = &streams[&v["id"].as_i64().expect("id")];
            assert_eq!(
                seen.get(t).cloned().unwrap_or_default(),
                [0, 1, 2, 3, 4],
                "{t}"
            );
            done += 1;
        }
    }
}
