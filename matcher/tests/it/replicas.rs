//! Two matcher replicas share the open jobs; when one dies, or its transactions are not
//! mined, the other takes its claims.

use alloy::providers::Provider;
use alloy::sol_types::SolEvent;
use gantry_protocol::bindings::JobMarket;
use gantry_testkit::accounts::{MATCHER, NODES, SECOND_MATCHER};

use crate::harness::{Net, node};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_s_jobs_are_assigned_by_the_other_exactly_once() {
    let net = Net::start(|params| params).await;
    net.fund_submitter().await;
    // Given replica A holding claims on ten jobs that no node can take yet,
    let replica_a = net.spawn_matcher(MATCHER, &[]);
    let jobs = net.post_ten_waiting_for_a_b200().await;

    // when replica B starts, A is killed, and then a node that fits registers,
    let _replica_b = net.spawn_matcher(SECOND_MATCHER, &[]);
    replica_a.kill();
    let b200 = net
        .register_own_node(NODES[0], node("NVIDIA-B200", 8, 180, 4, 20))
        .await;

    // then B assigns every job (A's claims lapse and come to it), each exactly once.
    net.wait_all_assigned_to(&jobs, b200).await;
    let logs = net.market_logs::<JobMarket::JobAssigned>().await;
    let mut assigned: Vec<u64> = logs
        .iter()
        .map(|log| {
            JobMarket::JobAssigned::decode_log(&log.inner)
                .unwrap()
                .jobId
        })
        .collect();
    assigned.sort_unstable();
    assert_eq!(assigned, jobs, "one JobAssigned per job");
    let b = net.address(SECOND_MATCHER);
    for log in &logs {
        let tx = net
            .devnet
            .admin
            .get_transaction_by_hash(log.transaction_hash.unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            tx.inner.signer(),
            b,
            "the surviving replica sent every assignment"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_transactions_are_not_mined_gives_its_claims_to_the_other() {
    let net = Net::start(|params| params).await;
    net.fund_submitter().await;
    // Given replica A holding claims on ten jobs that no node can take yet, its sender
    // counted stuck after 2 s without a mined transaction,
    let flags = ["--replace-after-ms", "1000", "--stuck-after-ms", "2000"];
    let _replica_a = net.spawn_matcher(SECOND_MATCHER, &flags);
    let jobs = net.post_ten_waiting_for_a_b200().await;
    // whose account can pay for nothing from now on,
    let _: serde_json::Value = net
        .devnet
        .admin
        .raw_request(
            "anvil_setBalance".into(),
            (net.address(SECOND_MATCHER), alloy::primitives::U256::ZERO),
        )
        .await
        .expect("anvil_setBalance");
    // when replica B starts and a node that fits registers,
    let _replica_b = net.spawn_matcher(MATCHER, &flags);
    let b200 = net
        .register_own_node(NODES[0], node("NVIDIA-B200", 8, 180, 4, 20))
        .await;

    // then A's assignments are never mined, it gives its claims back, and B assigns
    // every job.
    net.wait_all_assigned_to(&jobs, b200).await;
    let b = net.address(MATCHER);
    for log in net.market_logs::<JobMarket::JobAssigned>().await {
        let tx = net
            .devnet
            .admin
            .get_transaction_by_hash(log.transaction_hash.unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tx.inner.signer(), b, "the replica whose transactions land");
    }
}
