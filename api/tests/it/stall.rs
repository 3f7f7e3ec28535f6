//! A damaged chain stream ends nothing: the projection stalls at the last good block and
//! reads on once the missing block is published again whole. The stream is written by
//! hand (no indexer): blocks 1 and 2 whole, then block 3's commit counting an event that
//! never arrived and a message that does not decode, then block 4 whole; the repair
//! publishes blocks 3 and 4 again, as an indexer re-publishing from the damage on would.

use std::time::Duration;

use gantry_api::project::Progress;
use gantry_protocol::names;
use gantry_testkit::TestNet;
use gantry_testkit::hand_stream::{HandStream, node_registered};
use reqwest::StatusCode;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::harness::{Api, sqlite};
use crate::live::metrics;

const WAIT: Duration = Duration::from_secs(30);

async fn until(
    progress: &mut watch::Receiver<Progress>,
    what: &str,
    f: impl Fn(&Progress) -> bool,
) {
    let reached = tokio::time::timeout(WAIT, progress.wait_for(|p| f(p)))
        .await
        .map(|reached| *reached.expect("the projection runs"));
    if reached.is_err() {
        panic!("timed out waiting until {what}: {:?}", *progress.borrow());
    }
}

/// `/readyz`: its status and body.
async fn readyz(api: &Api) -> (StatusCode, serde_json::Value) {
    let response = reqwest::get(format!("{}/readyz", api.base)).await.unwrap();
    (response.status(), response.json().await.unwrap())
}

/// The value of the API's sample of `metric` whose labels include every one of `labels`.
fn sample(metric: &str, labels: &[&str]) -> Option<f64> {
    metrics().render().lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        let matches = name.starts_with(&format!("{metric}{{"))
            && name.contains("service=\"api\"")
            && labels.iter().all(|label| name.contains(label));
        matches.then(|| value.parse().unwrap())
    })
}

async fn nodes(api: &Api) -> usize {
    let url = format!("{}/v1/nodes", api.base);
    let body: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    body["items"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_whose_events_were_lost_stalls_the_projection_until_it_is_published_whole() {
    let chain = TestNet::builder().nats().start().await.unwrap();
    let stream = HandStream::create(&chain).await;
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();

    // Given blocks 1 and 2, one node registered in each, projected,
    stream.block(1, &[node_registered(1)]).await;
    let good = stream.block(2, &[node_registered(2)]).await;
    let api = Api::start(&chain, &sqlite(dir.path()), &stop, Some(metrics())).await;
    let mut progress = api.progress.clone();
    until(&mut progress, "block 2 is projected", |p| p.block == 2).await;
    assert_eq!(readyz(&api).await.0, StatusCode::OK);
    assert_eq!(nodes(&api).await, 2);

    // when block 3's commit arrives without its event, then a message that does not
    // decode, then block 4 whole,
    stream.commit(3, 1).await;
    stream
        .garbage(names::event(stream.chain_id(), "NodeRegistered", "9"))
        .await;
    let passed_over = stream.block(4, &[node_registered(4)]).await;
    until(&mut progress, "block 4 is read", |p| p.read >= passed_over).await;

    // then the projection stays at block 2 (rows and checkpoint), says it waits for block
    // 3 and is not ready, and the metrics count the damage; the process runs on.
    let stalled = *progress.borrow();
    assert_eq!((stalled.block, stalled.checkpoint), (2, good));
    assert_eq!(stalled.stalled, Some(3));
    let (status, body) = readyz(&api).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["stalled"], 3);
    assert_eq!(body["block"], 2);
    assert_eq!(nodes(&api).await, 2, "nothing of block 3 or 4 is applied");
    // (The stalled and missing-block gauges are process-wide: another test's projection
    // starting in this process resets them, so they are checked in the matcher's stall
    // test, where the service is a process of its own; readiness above says the same.)
    assert_eq!(
        sample(
            "gantry_chain_stream_damaged_blocks_total",
            &["kind=\"count_mismatch\""]
        ),
        Some(1.0)
    );
    for reason in ["undecodable", "stalled"] {
        assert_eq!(
            sample(
                "gantry_chain_stream_skipped_messages_total",
                &[&format!("reason=\"{reason}\"")]
            ),
            Some(1.0),
            "{reason}"
        );
    }

    // When the repair publishes block 3 whole and block 4 again, the projection catches
    // up by itself, ready again, and reads on.
    stream.block(3, &[node_registered(3)]).await;
    stream.block(4, &[node_registered(4)]).await;
    until(&mut progress, "block 4 is projected", |p| {
        p.block == 4 && p.stalled.is_none()
    })
    .await;
    let next = stream.block(5, &[]).await;
    until(&mut progress, "block 5 is projected", |p| {
        p.checkpoint == next
    })
    .await;
    assert_eq!(readyz(&api).await.0, StatusCode::OK);
    assert_eq!(nodes(&api).await, 4);
    assert_eq!(sample("gantry_chain_stream_stalled", &[]), Some(0.0));
    stop.cancel();
    api.stopped().await;
}
