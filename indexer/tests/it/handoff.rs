use std::time::Duration;

use alloy::eips::BlockNumberOrTag;
use alloy::providers::Provider;
use futures::StreamExt;
use gantry_indexer::config::FinalityTag;
use gantry_protocol::envelope::FinalityWatermark;
use gantry_protocol::names;

use crate::harness::{Harness, Message};

/// The backfill hands over to block-by-block following while new blocks keep coming: no
/// block is skipped at the boundary and none is indexed twice.
#[tokio::test]
async fn historic_to_live_handoff_neither_skips_nor_duplicates() {
    let h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    h.emit_postings(batcher, 120, 5).await;
    let mut config = h.config_for(batcher);
    // A small window puts the hand-off 8 blocks behind the head; small ranges make the
    // backfill take many steps while the chain moves on.
    config.reorg_window = 8;
    config.initial_range = 3;
    config.max_range = 3;
    let indexer = h.spawn(config);
    h.emit_postings(batcher, 60, 5).await;
    h.wait_for_head().await;
    indexer.stop().await.expect("clean stop");

    let messages = h.messages().await;
    let commits: Vec<u64> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Commit(c) => Some(c.block_number),
            _ => None,
        })
        .collect();
    assert!(
        commits.windows(2).all(|w| w[0] < w[1]),
        "each block committed once, in order"
    );
    let expected = h.chain_events(batcher, batcher).await;
    let events = messages
        .iter()
        .filter(|m| matches!(m, Message::Event(_)))
        .count();
    assert_eq!(events, expected.len(), "no event skipped or repeated");
    assert_eq!(h.applied_events().await, expected);
}

/// As the chain's `finalized` block advances, a watermark naming it follows its commit.
#[tokio::test]
async fn finality_watermark_follows_the_finalized_block() {
    let h = Harness::start().await;
    let mut config = h.indexer_config();
    config.finality_tag = FinalityTag::Finalized;
    let client = async_nats::connect(h.nats().url()).await.unwrap();
    let mut watermarks = client
        .subscribe(names::finality(h.chain_id()))
        .await
        .unwrap();
    let indexer = h.spawn(config);
    // anvil reports a block final once 64 more are on top of it.
    let _: serde_json::Value = h
        .devnet
        .admin
        .raw_request("anvil_mine".into(), (100u64,))
        .await
        .unwrap();
    let finalized = h
        .devnet
        .admin
        .get_block_by_number(BlockNumberOrTag::Finalized)
        .await
        .unwrap()
        .expect("a finalized block")
        .header;
    assert!(finalized.number > 0, "anvil finalizes blocks deep enough");
    let seen = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(message) = watermarks.next().await {
            let watermark: FinalityWatermark = serde_json::from_slice(&message.payload).unwrap();
            if watermark.block_number >= finalized.number {
                return watermark;
            }
        }
        unreachable!("subscription ended")
    })
    .await
    .expect("a watermark for the finalized block");
    assert_eq!(
        (seen.block_number, seen.block_hash),
        (finalized.number, finalized.hash)
    );
    indexer.stop().await.expect("clean stop");

    // Every watermark names a block already committed before it, and they only advance.
    let (mut committed, mut last_watermark) = (0, 0);
    for message in h.messages().await {
        match message {
            Message::Commit(c) => committed = c.block_number,
            Message::Finality(w) => {
                assert!(
                    w.block_number <= committed,
                    "watermark {} before its commit",
                    w.block_number
                );
                assert!(w.block_number > last_watermark, "watermarks advance");
                last_watermark = w.block_number;
            }
            _ => {}
        }
    }
}
