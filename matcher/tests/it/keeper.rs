//! The liveness keeper: silent nodes, overdue jobs, closed challenge windows.

use alloy::primitives::B256;
use alloy::providers::Provider;
use gantry_protocol::status::JobStatus;
use gantry_testkit::GUSD;
use gantry_testkit::accounts::{KEEPER, MATCHER, NODES, STANDBY_KEEPER, SUBMITTER};

use crate::harness::{Net, needs};
use crate::placement::register_nodes;

/// The submitter's credit with the market.
async fn submitter_credit(net: &Net) -> alloy::primitives::U256 {
    net.market(0)
        .creditOf(net.address(SUBMITTER))
        .call()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_is_marked_inactive_its_job_reclaimed_reassigned_and_its_stake_slashed() {
    let net = Net::start(|params| params).await;
    // Given two equal nodes, the second dearer, and a job the matcher puts on the first,
    let [first, second] = register_nodes(
        &net,
        [("NVIDIA-L4", 1, 24, 1, 1), ("NVIDIA-L4", 1, 24, 2, 1)],
    )
    .await;
    net.fund_submitter().await;
    let _matcher = net.spawn_matcher(MATCHER, &[]);
    let _keeper = net.spawn_liveness(KEEPER, "keeper");
    let deadline = net.now().await + 86_400;
    let job = net.post(needs("NVIDIA-L4", 16, 3_600), deadline).await;
    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, first);
    let stake_before = net.node(first).await.stake;

    // when the first node stops heartbeating past the 60 s timeout while the second
    // keeps beating,
    net.advance(90).await;
    crate::harness::confirm(net.registry(NODES[1]).heartbeat(second).send().await).await;

    // then the keeper marks it inactive and reclaims the job, which the matcher assigns
    // to the second node; the first node's stake is slashed.
    net.wait_until("the job runs on the second node", || async {
        let info = net.job(job).await;
        info.state.status == JobStatus::Assigned && info.state.node_id == second
    })
    .await;
    let silent = net.node(first).await;
    assert_eq!(silent.status, 2, "Inactive");
    assert!(
        silent.stake < stake_before,
        "slashed: {} < {stake_before}",
        silent.stake
    );
    assert_eq!(
        net.job(job).await.state.faults,
        1,
        "the silent node's fault"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_deadline_jobs_expire_and_closed_windows_finalize_even_after_the_leader_dies() {
    let net = Net::start(|params| params).await;
    let [l4] = register_nodes(&net, [("NVIDIA-L4", 1, 24, 1, 1)]).await;
    net.fund_submitter().await;
    let _matcher = net.spawn_matcher(MATCHER, &[]);
    // Two keeper replicas; the leader will die.
    let mut keepers = [
        (
            String::from("keeper-a"),
            Some(net.spawn_liveness(KEEPER, "keeper-a")),
        ),
        (
            String::from("keeper-b"),
            Some(net.spawn_liveness(STANDBY_KEEPER, "keeper-b")),
        ),
    ];
    let now = net.now().await;
    // Given a job no node can run, whose last chance to start passes in 10 minutes, and a
    // job that runs and submits,
    let stranded = net
        .post(needs("NVIDIA-H100", 80, 3_600), now + 3_600 + 600)
        .await;
    let done = net.post(needs("NVIDIA-L4", 16, 3_600), now + 86_400).await;
    net.wait_for_status(done, JobStatus::Assigned).await;
    net.submit_result(NODES[0], done, B256::repeat_byte(7), "ipfs://result")
        .await;
    assert_eq!(net.job(done).await.state.node_id, l4);

    // when the keeper that leads dies,
    let leader = net.keeper_leader().await;
    let (_, process) = keepers
        .iter_mut()
        .find(|(name, _)| *name == leader)
        .expect("the leader is one of ours");
    process.take().expect("running").kill();

    // and chain time passes both that chance and the 30 s challenge window,
    let credit_before = submitter_credit(&net).await;
    net.advance(900).await;

    // then the standby expires the stranded job, refunding its bounty, and finalizes the
    // submitted one.
    net.wait_for_status(stranded, JobStatus::Expired).await;
    net.wait_for_status(done, JobStatus::Completed).await;
    let credit_after = submitter_credit(&net).await;
    assert_eq!(
        credit_after - credit_before,
        alloy::primitives::U256::from(50 * GUSD)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_whose_transactions_are_not_mined_gives_up_the_lease_to_the_standby() {
    let net = Net::start(|params| params).await;
    let [silent] = register_nodes(&net, [("NVIDIA-L4", 1, 24, 1, 1)]).await;
    // Two keeper replicas whose senders count as stuck after 2 s without a mined
    // transaction.
    let flags = ["--replace-after-ms", "1000", "--stuck-after-ms", "2000"];
    let keepers = [
        (
            "keeper-a",
            KEEPER,
            net.spawn_liveness_with(KEEPER, "keeper-a", &flags),
        ),
        (
            "keeper-b",
            STANDBY_KEEPER,
            net.spawn_liveness_with(STANDBY_KEEPER, "keeper-b", &flags),
        ),
    ];
    let leader = net.keeper_leader().await;
    let (_, wedged, _) = keepers
        .iter()
        .find(|(name, _, _)| *name == leader)
        .expect("the leader is one of ours");
    let (_, standby, _) = keepers
        .iter()
        .find(|(name, _, _)| *name != leader)
        .expect("two keepers");
    // The leader's account can pay for nothing: whatever it sends is never mined.
    let wedged = net.address(*wedged);
    let _: serde_json::Value = net
        .devnet
        .admin
        .raw_request(
            "anvil_setBalance".into(),
            (wedged, alloy::primitives::U256::ZERO),
        )
        .await
        .expect("anvil_setBalance");

    // When the node falls silent past the heartbeat timeout, the leader's markInactive
    // cannot land: it gives the lease up, and the standby marks the node inactive.
    net.advance(90).await;
    net.wait_until("the silent node is marked inactive", || async {
        net.node(silent).await.status == 2
    })
    .await;
    let marked = net
        .registry(0)
        .NodeMarkedInactive_filter()
        .from_block(0)
        .query()
        .await
        .unwrap();
    let by: Vec<_> = marked
        .iter()
        .filter(|(event, _)| event.nodeId == silent)
        .map(|(event, _)| event.by)
        .collect();
    assert_eq!(by, [net.address(*standby)]);
    assert_ne!(net.keeper_leader().await, leader);
}
