//! Batched calls: jobs that become placeable together are assigned in one `assignBatch`,
//! and challenge windows that close together are paid in one `finalizeBatch`.

use std::collections::BTreeSet;

use alloy::primitives::{B256, Selector};
use alloy::providers::Provider;
use alloy::sol_types::{SolCall, SolEvent};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{KEEPER, MATCHER, NODES};

use crate::harness::{Net, node};

/// The transactions that emitted `E` for the market, and their selectors.
async fn senders_of<E: SolEvent>(net: &Net) -> (BTreeSet<B256>, BTreeSet<Selector>) {
    let logs = net.market_logs::<E>().await;
    let txs: BTreeSet<B256> = logs.iter().map(|l| l.transaction_hash.unwrap()).collect();
    let mut selectors = BTreeSet::new();
    for tx in &txs {
        let tx = net
            .devnet
            .admin
            .get_transaction_by_hash(*tx)
            .await
            .unwrap()
            .unwrap();
        let input = alloy::consensus::Transaction::input(tx.inner.inner());
        selectors.insert(Selector::from_slice(&input[..4]));
    }
    (txs, selectors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_jobs_placeable_at_once_are_assigned_and_paid_in_one_transaction_each() {
    let net = Net::start(|params| params).await;
    net.fund_submitter().await;
    // Given the matcher holding ten jobs no node can take yet,
    let _matcher = net.spawn_matcher(MATCHER, &[]);
    let _keeper = net.spawn_liveness(KEEPER, "keeper");
    let jobs = net.post_ten_waiting_for_a_b200().await;

    // when a node with ten slots registers,
    let b200 = net
        .register_own_node(NODES[0], node("NVIDIA-B200", 8, 180, 4, 10))
        .await;

    // then all ten are assigned to it by one assignBatch;
    net.wait_all_assigned_to(&jobs, b200).await;
    let (txs, selectors) = senders_of::<JobMarket::JobAssigned>(&net).await;
    assert_eq!(txs.len(), 1, "one transaction assigned them all");
    assert_eq!(
        selectors,
        BTreeSet::from([JobMarket::assignBatchCall::SELECTOR.into()])
    );

    // and once the node answered all ten and their 30 s windows closed together,
    for job in &jobs {
        net.submit_result(NODES[0], *job, B256::repeat_byte(7), "ipfs://out")
            .await;
    }
    net.advance(60).await;

    // the keeper pays all ten with one finalizeBatch.
    for job in &jobs {
        net.wait_for_status(*job, JobStatus::Completed).await;
    }
    let (txs, selectors) = senders_of::<JobMarket::JobCompleted>(&net).await;
    assert_eq!(txs.len(), 1, "one transaction paid them all");
    assert_eq!(
        selectors,
        BTreeSet::from([JobMarket::finalizeBatchCall::SELECTOR.into()])
    );
}
