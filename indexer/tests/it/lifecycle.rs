use crate::harness::{Harness, Message};

/// Every event of a scripted market lifecycle appears exactly once, in chain order, with
/// the fields `eth_getLogs` reports, and each block's commit follows its events.
#[tokio::test]
async fn every_event_of_a_lifecycle_appears_exactly_once_in_order() {
    let h = Harness::start().await;
    let indexer = h.spawn(h.indexer_config());
    gantry_testkit::scenario::lifecycle(&h.devnet)
        .await
        .expect("scenario runs");
    let head = h.head().await;
    h.wait_for_commit(head).await;
    indexer.stop().await.expect("clean stop");

    let d = h.devnet.deployment;
    let expected = h.chain_events(d.market, d.registry).await;
    let names: Vec<&str> = expected.iter().map(|e| e.event.name.as_str()).collect();
    for name in [
        "NodeRegistered",
        "NodeHeartbeat",
        "JobPosted",
        "JobAssigned",
        "ResultSubmitted",
        "JobCompleted",
        "JobCancelled",
        "JobRejected",
        "JobRequeued",
        "NodeEarningsWithdrawn",
        "NodeExitBegun",
    ] {
        assert!(names.contains(&name), "the scenario emits {name}");
    }
    assert_eq!(h.applied_events().await, expected);

    // Commits are in block order, and every message of an event names its block's commit.
    let mut last_block = 0;
    for message in h.messages().await {
        if let Message::Commit(commit) = message {
            assert!(commit.block_number > last_block, "commits in order");
            last_block = commit.block_number;
        }
    }
    assert_eq!(last_block, head);
}

/// A chain stream created before atomic batches is updated to allow them, keeping deny
/// delete and purge, and the indexer publishes into it.
#[tokio::test]
async fn a_stream_made_before_atomic_batches_is_updated_and_keeps_its_guards() {
    let h = Harness::start().await;
    let js = h.jetstream().await;
    let before = gantry_protocol::storage::chain_stream(h.chain_id(), 1);
    js.create_stream(async_nats::jetstream::stream::Config {
        allow_atomic_publish: false,
        ..before
    })
    .await
    .expect("the old stream is created");
    let indexer = h.spawn(h.indexer_config());
    h.wait_for_head().await;
    indexer.stop().await.expect("clean stop");

    let mut stream = js
        .get_stream(gantry_protocol::names::stream_name(h.chain_id()))
        .await
        .expect("stream exists");
    let config = stream.info().await.expect("stream info").config.clone();
    assert!(config.allow_atomic_publish, "atomic batches allowed");
    assert!(config.deny_delete && config.deny_purge, "still append-only");
    let d = h.devnet.deployment;
    assert_eq!(
        h.applied_events().await,
        h.chain_events(d.market, d.registry).await
    );
}
