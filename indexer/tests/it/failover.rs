use crate::harness::{Harness, Message};

fn events(messages: &[Message]) -> Vec<(u64, u64)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Event(e) => Some((e.block_number, e.log_index)),
            _ => None,
        })
        .collect()
}

/// Two indexers race for the same chain: one writes, the events land exactly once; the
/// leader is SIGKILLed and the standby takes over.
#[tokio::test]
async fn two_indexers_write_exactly_once_and_the_standby_takes_over() {
    let h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    let config = h.config_for(batcher);
    let a = h.spawn_process(&config, "indexer-a");
    let b = h.spawn_process(&config, "indexer-b");
    h.emit_postings(batcher, 4, 500).await;
    h.wait_for_head().await;

    let js = h.jetstream().await;
    let lease = js
        .get_key_value("gantry_indexer_lease")
        .await
        .expect("lease bucket");
    let key = format!("chain-{}", h.chain_id());
    let leader =
        String::from_utf8(lease.get(&key).await.unwrap().expect("a leader").to_vec()).unwrap();
    let (dead, standby) = if leader == "indexer-a" {
        (a, b)
    } else {
        (b, a)
    };
    dead.kill();
    let killed_at = std::time::Instant::now();

    h.emit_postings(batcher, 2, 500).await;
    h.wait_for_head().await;
    eprintln!(
        "standby indexed the new head {:?} after the leader's death",
        killed_at.elapsed()
    );
    let now_leading =
        String::from_utf8(lease.get(&key).await.unwrap().expect("a leader").to_vec()).unwrap();
    assert_ne!(now_leading, leader, "the standby holds the lease");
    drop(standby);

    let messages = h.messages().await;
    let events = events(&messages);
    let expected = h.chain_events(batcher, batcher).await;
    assert_eq!(events.len(), expected.len(), "exactly once");
    assert!(events.windows(2).all(|w| w[0] < w[1]), "chain order");
    assert_eq!(h.applied_events().await, expected);
}

/// NATS is killed and restarted (same port and store) mid-run: the indexer reconnects and
/// resumes without loss or duplicates.
#[tokio::test]
async fn nats_restart_mid_run_loses_and_duplicates_nothing() {
    let mut h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    h.emit_postings(batcher, 3, 1_000).await;
    let mut config = h.config_for(batcher);
    config.initial_range = 1;
    config.max_range = 1;
    let indexer = h.spawn(config);
    h.wait_for_messages(1_500).await;
    h.nats_mut().restart().expect("nats restarts");
    h.emit_postings(batcher, 2, 1_000).await;
    h.wait_for_head().await;
    indexer.stop().await.expect("clean stop");

    let messages = h.messages().await;
    let expected = h.chain_events(batcher, batcher).await;
    assert_eq!(events(&messages).len(), expected.len(), "exactly once");
    assert_eq!(h.applied_events().await, expected);
}
