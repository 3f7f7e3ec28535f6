//! The chain does not count a node's jobs: a matcher (buggy or hostile) can assign it
//! more than its `maxConcurrentJobs`. The worker gives the extra job back at once, for a
//! free (within the market's reject grace), and keeps running the one it has. The limit is the node's
//! on-chain one, here lower than the worker's config.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, AGENT, OPERATOR};

use crate::harness::{Net, STAKE, Services, cpu_job, shell, small_node};
use crate::scripts::{checkpointing, of_job, progress_subscription, reaches_epoch};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_assignment_beyond_the_node_s_capacity_is_given_back_at_once() {
    // No matcher: the test assigns as the admin, past the node's limit.
    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    net.fund_submitter().await;
    // One job at a time on chain; the worker's config (4) would allow more.
    net.register_node(OPERATOR, net.address(AGENT), small_node(), STAKE)
        .await;
    let worker = net.spawn_worker(AGENT, "max_concurrent = 4").await;
    let (_client, mut progress) = progress_subscription(&net).await;

    let running = net
        .post(cpu_job(64), &shell(&checkpointing(25, false), 60))
        .await;
    net.assign(running, worker.node_id).await;
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        reaches_epoch(&mut progress, running, 1),
    )
    .await
    .expect("the first job runs");

    let extra = net
        .post(cpu_job(64), &shell("echo extra > /outputs/x", 60))
        .await;
    net.assign(extra, worker.node_id).await;
    let rejection = net.given_back(extra, worker.node_id).await;
    assert!(rejection.reason.contains("over capacity"), "{rejection:?}");
    rejection.assert_at_once(20);
    // Back on the market for another node, no attempt used.
    let state = net.job(extra).await.state;
    assert_eq!(state.status, JobStatus::Open);
    assert_eq!((state.barred, state.faults), (1, 0));

    // The first job was never disturbed: it finishes and is answered.
    net.wait_for_status(running, JobStatus::Submitted).await;
    assert!(net.failure_report(running).await.is_none());
    let market = net.market(ADMIN);
    assert!(
        of_job(market.JobReclaimed_filter(), running)
            .await
            .is_empty()
    );

    // The node kept (nearly) all its stake: the reject's charge only.
    let node = net.node(worker.node_id).await;
    assert_eq!(node.stake.to::<u64>(), STAKE - rejection.charge);
    let slashes = net.slashes(worker.node_id).await;
    assert!(
        slashes.iter().all(|s| s.jobId == extra),
        "charged only for the extra job: {slashes:?}"
    );

    net.wait_for_no_containers().await;
    assert!(worker.stop().success());
}
