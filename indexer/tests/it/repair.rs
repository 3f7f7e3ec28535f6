//! `gantry-indexer --repair`: a stream damaged as a writer before atomic batches could
//! leave it (a block's commit stored without its events) stalls every reader at that
//! block. The repair finds the block as a reader does, publishes it and the later blocks
//! again whole from the chain, and a reader then holds exactly the chain's events; a
//! second repair finds nothing to do, and the indexer resumes after it.

use alloy::eips::BlockId;
use alloy::providers::Provider;
use async_nats::HeaderMap;
use gantry_indexer::repair::{Repaired, repair};
use gantry_indexer::stream::{ChainStream, Outgoing};
use gantry_protocol::chain_stream::{BlockAssembler, Stall};
use gantry_protocol::envelope::{BlockCommit, ENVELOPE_VERSION};
use gantry_protocol::names;

use crate::harness::Harness;

#[tokio::test]
async fn a_block_whose_events_were_lost_is_published_again_whole_and_readers_go_on() {
    let h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    let config = h.config_for(batcher);
    let indexer = h.spawn(config.clone());
    h.emit_postings(batcher, 2, 3).await;
    h.wait_for_head().await;
    indexer.stop().await.expect("clean stop");

    // Damage: the next block's commit stored without its three events.
    h.emit_postings(batcher, 1, 3).await;
    let damaged = h
        .devnet
        .admin
        .get_block(BlockId::latest())
        .await
        .unwrap()
        .unwrap()
        .header;
    let js = h.jetstream().await;
    let stream = ChainStream::open(js, h.chain_id(), 1).await.unwrap();
    let tail = stream.tail().await.unwrap();
    let commit = BlockCommit {
        v: ENVELOPE_VERSION,
        chain_id: h.chain_id(),
        block_number: damaged.number,
        block_hash: damaged.hash,
        parent_hash: damaged.parent_hash,
        block_timestamp: damaged.timestamp,
        event_count: 3,
    };
    stream
        .publisher(tail.last_sequence, 10)
        .append(vec![Outgoing {
            subject: names::block_commit(h.chain_id(), damaged.number),
            headers: HeaderMap::new(),
            payload: serde_json::to_vec(&commit).unwrap().into(),
        }])
        .await
        .unwrap();
    // The indexer resumes after it and publishes a later block as usual.
    let indexer = h.spawn(config.clone());
    h.emit_postings(batcher, 1, 3).await;
    h.wait_for_head().await;
    indexer.stop().await.expect("clean stop");
    let stall = stall_of(&h).await.expect("a reader stalls");
    assert_eq!(stall.missing, damaged.number);

    // when the repair runs,
    let repaired = repair(&config).await.expect("the repair runs");
    let Repaired::Republished { blocks, events, .. } = &repaired else {
        panic!("nothing repaired: {repaired:?}");
    };
    assert_eq!(blocks.first(), Some(&damaged.number), "{repaired:?}");
    assert_eq!(*events, 6, "the damaged block's and the later block's");

    // then a reader assembles every block and holds exactly the chain's events;
    assert_eq!(stall_of(&h).await, None);
    let expected = h.chain_events(batcher, batcher).await;
    assert_eq!(h.applied_events_after_repair().await, expected);
    // a second repair has nothing to do, and the indexer goes on from the repaired tail.
    assert_eq!(repair(&config).await.unwrap(), Repaired::Whole);
    let indexer = h.spawn(config);
    h.emit_postings(batcher, 1, 3).await;
    h.wait_for_head().await;
    indexer.stop().await.expect("clean stop");
    let expected = h.chain_events(batcher, batcher).await;
    assert_eq!(
        h.applied_events_after_repair().await,
        expected,
        "exactly once"
    );
}

/// Where a reader folding the whole stream stalls, if it does.
async fn stall_of(h: &Harness) -> Option<Stall> {
    let mut assembler = BlockAssembler::new();
    for message in h.messages().await {
        let _ = assembler.push(message);
    }
    assembler.stall()
}
