use crate::harness::Harness;

/// xorshift64*: kill points that vary with the seed but repeat for the same one.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// SIGKILL the indexer at random points of a 12,000-event backfill and restart it: the
/// stream ends with every event exactly once, in order.
#[tokio::test]
async fn sigkill_during_backfill_loses_and_duplicates_nothing() {
    let h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    h.emit_postings(batcher, 12, 1_000).await;
    // The postings, and the registry's deployment events (roles, parameters).
    let expected = h.chain_events(batcher, batcher).await;
    assert!(expected.len() >= 12_000);

    let mut config = h.config_for(batcher);
    // Small ranges: many commits, so kills land mid-block and between blocks alike.
    config.initial_range = 1;
    config.max_range = 2;
    let mut seed = std::env::var("GANTRY_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6a61_6e74_7279_u64);
    eprintln!("kill points from seed {seed}");
    let total_messages = expected.len() as u64;
    for round in 0..4 {
        let process = h.spawn_process(&config, &format!("crashy-{round}"));
        let already = h.last_sequence().await;
        let target = already + 1 + next(&mut seed) % ((total_messages - already) / 3).max(1);
        h.wait_for_messages(target).await;
        eprintln!(
            "round {round}: SIGKILL pid {} at >= {target} messages",
            process.pid()
        );
        process.kill();
    }
    let survivor = h.spawn_process(&config, "survivor");
    h.wait_for_commit(h.head().await).await;
    drop(survivor);

    let events: Vec<_> = h
        .messages()
        .await
        .into_iter()
        .filter_map(|m| match m {
            crate::harness::Message::Event(e) => Some((e.block_number, e.log_index)),
            _ => None,
        })
        .collect();
    assert_eq!(events.len(), expected.len(), "no event lost or duplicated");
    assert!(events.windows(2).all(|w| w[0] < w[1]), "chain order");
    assert_eq!(h.applied_events().await, expected);
}
