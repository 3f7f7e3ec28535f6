use async_nats::jetstream;
use gantry_indexer::Config;
use gantry_indexer::error::StreamError;
use gantry_indexer::stream::{ChainStream, MAX_BATCH};
use gantry_protocol::names;

use crate::harness::{Harness, PATIENCE, assert_commits_follow_their_events};
use crate::link::Link;

/// The race of issue 16: a writer's next block sits in its client while NATS restarts;
/// a new leader resumes from the tail and appends its own block; then the old writer
/// reconnects and its client sends the buffered block. The block is refused as a whole.
/// (Fenced message by message, its commit would have matched the tail the new leader left
/// and landed without its events.)
#[tokio::test]
async fn a_block_buffered_by_a_deposed_writer_is_refused_whole_when_it_reconnects() {
    let mut h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    h.emit_postings(batcher, 2, 2).await;
    let config = h.config_for(batcher);
    let first = h.spawn(config.clone());
    h.wait_for_head().await;
    first.stop().await.expect("clean stop");

    // The deposed writer reads the tail; its next block is three messages (two events
    // and a commit: a copy of the last block's).
    let link = Link::to(h.nats().port()).await;
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let client = async_nats::ConnectOptions::new()
        .event_callback(move |event| {
            let events_tx = events_tx.clone();
            async move {
                let _ = events_tx.send(event);
            }
        })
        .connect(link.url())
        .await
        .expect("nats connects");
    let js = jetstream::ContextBuilder::new()
        .timeout(PATIENCE)
        .build(client);
    let deposed = ChainStream::open(js, h.chain_id(), 1)
        .await
        .expect("stream opens");
    let tail = deposed.tail().await.expect("tail");
    let block = h.stored(tail.last_sequence - 2..=tail.last_sequence).await;
    assert!(matches!(block.last(), Some(m) if m.subject.contains(".block.")));

    // NATS dies and comes back; the writer stays cut off, its block buffered in its client
    // (appended once the client knows it is disconnected: it holds it for the next
    // connection rather than writing it into the lost one).
    link.cut();
    while let Some(event) = events.recv().await {
        if event == async_nats::Event::Disconnected {
            break;
        }
    }
    h.nats_mut().restart().expect("nats restarts");
    let mut publisher = deposed.publisher(tail.last_sequence, MAX_BATCH);
    let stale = tokio::spawn(async move { publisher.append(block).await });

    // A new leader resumes from the tail and appends the next block: one event, a commit.
    h.emit_postings(batcher, 1, 1).await;
    let leader = h.spawn(config);
    h.wait_for_head().await;
    assert_eq!(h.last_sequence().await, tail.last_sequence + 2);

    // The old writer reconnects and its client sends the block.
    link.restore();
    let refused = stale.await.expect("publisher task");
    assert!(
        matches!(refused, Err(StreamError::Conflict(_))),
        "the stale block is refused: {refused:?}"
    );
    leader.stop().await.expect("clean stop");

    assert_eq!(h.last_sequence().await, tail.last_sequence + 2);
    let messages = h.messages().await;
    assert_commits_follow_their_events(&messages);
    let expected = h.chain_events(batcher, batcher).await;
    assert_eq!(h.applied_events().await, expected, "exactly once");
}

/// NATS is SIGKILLed under a leader in the middle of a backfill, with publishes in flight.
/// The leader stays cut off while NATS restarts; the standby takes the lease and resumes
/// from the tail; the old leader reconnects while the new one is appending, and its client
/// sends whatever it buffered. The stream ends with every event once, each block's commit
/// right after its own events.
#[tokio::test]
async fn nats_killed_under_a_leader_then_a_late_reconnect_loses_and_duplicates_nothing() {
    let mut h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    // Blocks with events between empty ones: a backfill commits the blocks with events and
    // the last block of each range, and ranges grow, so two writers starting at different
    // blocks put different messages at the same stream sequences.
    for _ in 0..60 {
        h.emit_postings(batcher, 1, 40).await;
        h.mine(2).await;
    }
    let mut config = h.config_for(batcher);
    config.initial_range = 1;
    config.max_range = 8;
    let link = Link::to(h.nats().port()).await;
    let leader = h.spawn(instance(&config, "indexer-a", link.url()));
    h.wait_for_messages(300).await;
    let standby = h.spawn(instance(&config, "indexer-b", h.nats().url()));

    link.cut();
    h.nats_mut().restart().expect("nats restarts");
    let tail = h.last_sequence().await;
    // The standby takes over once the lease expires, and appends.
    h.wait_for_messages(tail + 1).await;
    // The old leader reconnects in the middle of the new leader's backfill.
    link.restore();
    h.wait_for_head().await;
    eprintln!(
        "tail after the restart {tail}, stream at the head {}",
        h.last_sequence().await
    );
    let js = h.jetstream().await;
    let lease = js
        .get_key_value(names::INDEXER_LEASE_BUCKET)
        .await
        .expect("lease bucket");
    let holder = lease
        .get(format!("chain-{}", h.chain_id()))
        .await
        .expect("lease read")
        .expect("a leader");
    assert_eq!(&holder[..], b"indexer-b", "the standby leads");
    leader.stop().await.expect("the old leader stops cleanly");
    standby.stop().await.expect("the new leader stops cleanly");

    let messages = h.messages().await;
    assert_commits_follow_their_events(&messages);
    let expected = h.chain_events(batcher, batcher).await;
    let events = messages
        .iter()
        .filter(|m| matches!(m, crate::harness::Message::Event(_)))
        .count();
    assert_eq!(events, expected.len(), "no event lost or repeated");
    assert_eq!(h.applied_events().await, expected);
}

fn instance(config: &Config, name: &str, nats_url: String) -> Config {
    let mut config = config.clone();
    config.nats.nats_url = nats_url;
    config.instance.instance_id = Some(name.to_owned());
    config
}
