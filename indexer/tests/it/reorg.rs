use crate::harness::{Harness, Message};

/// `anvil_reorg` of depth 1 to 5 while the indexer follows live: each is retracted before
/// the new canonical blocks, and a consumer that applies retractions ends with exactly
/// what `eth_getLogs` reports for the canonical chain.
#[tokio::test]
async fn reorgs_are_retracted_and_consumers_converge_on_the_canonical_chain() {
    let h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    let indexer = h.spawn(h.config_for(batcher));

    for depth in 1..=5u64 {
        h.emit_postings(batcher, 6, 3).await;
        h.wait_for_head().await;
        eprintln!("depth {depth}: indexed head {}, reorging", h.head().await);
        let _: serde_json::Value = alloy::providers::Provider::raw_request(
            &h.devnet.admin,
            "anvil_reorg".into(),
            (depth, Vec::<serde_json::Value>::new()),
        )
        .await
        .expect("anvil_reorg");
        // The new branch: same height, the replaced blocks empty; then more work on top.
        eprintln!("depth {depth}: reorged, head {}", h.head().await);
        h.wait_for_head().await;
        eprintln!("depth {depth}: new branch indexed");
        h.emit_postings(batcher, 2, 3).await;
        h.wait_for_head().await;
    }
    indexer.stop().await.expect("clean stop");

    let retractions: Vec<_> = h
        .messages()
        .await
        .into_iter()
        .filter_map(|m| match m {
            Message::Retraction(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(retractions.len(), 5, "one retraction per reorg");
    for (retraction, depth) in retractions.iter().zip(1..=5usize) {
        assert_eq!(retraction.orphaned.len(), depth);
        assert!(
            retraction
                .orphaned
                .windows(2)
                .all(|w| w[0].number == w[1].number + 1),
            "newest first"
        );
        assert_eq!(
            retraction.common_ancestor + 1,
            retraction.orphaned.last().unwrap().number
        );
    }
    assert_eq!(
        h.applied_events().await,
        h.chain_events(batcher, batcher).await
    );
}
