//! An assignment reorganised away while its job runs: the chain no longer has the job
//! assigned, so the worker stops the container and sends nothing for it.

use alloy::providers::Provider;
use futures::StreamExt;
use gantry_protocol::jobs::ProgressUpdate;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;

use gantry_testkit::accounts::ADMIN;

use crate::harness::{Net, Services, cpu_job, shell};
use crate::scripts::last_of_job;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reorged_away_assignment_is_dropped() {
    // No matcher: the test assigns as the admin, so nothing reassigns after the reorg.
    // Heartbeats are rare so that the only blocks after the assignment are the test's.
    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    net.fund_submitter().await;
    let worker = net
        .spawn_worker(
            NODES[0],
            "heartbeat_interval = \"1h\"\nshutdown_grace = \"100ms\"",
        )
        .await;
    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let mut progress = client
        .subscribe(format!("gantry.jobs.{}.progress.>", net.chain_id()))
        .await
        .unwrap();
    let job = net
        .post(
            cpu_job(64),
            &shell(
                "trap 'exit 143' TERM; i=0; while :; do i=$((i+1)); echo \"##gantry {\\\"epoch\\\":$i}\"; sleep 0.2; done",
                120,
            ),
        )
        .await;
    let assign_block = net.assign(job, worker.node_id).await;

    let running = async {
        loop {
            let message = progress.next().await.unwrap();
            let update: ProgressUpdate = serde_json::from_slice(&message.payload).unwrap();
            if update.job_id == job && update.epoch >= Some(2) {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), running)
        .await
        .expect("the job runs");

    // Replace every block from the assignment's on.
    net.devnet
        .reorg_from(assign_block)
        .await
        .expect("anvil_reorg");
    assert_eq!(
        net.job(job).await.state.status,
        JobStatus::Open,
        "open again on the new branch"
    );

    // The worker notices within its ownership check (the market's hash of the job is no
    // longer the held state's) and stops the container.
    net.wait_for_no_containers().await;
    let info = net.job(job).await;
    assert_eq!(
        info.state.status,
        JobStatus::Open,
        "nothing was submitted or rejected for it"
    );
    assert!(net.rejections().await.is_empty());
    assert!(net.slashes(worker.node_id).await.is_empty());

    // Assigned again (attempt 1 on this branch, another attempt for the worker), it runs
    // again.
    net.assign(job, worker.node_id).await;
    let running_again = async {
        loop {
            let message = progress.next().await.unwrap();
            let update: ProgressUpdate = serde_json::from_slice(&message.payload).unwrap();
            if update.job_id == job && update.epoch == Some(1) {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), running_again)
        .await
        .expect("the job runs again");
    assert_eq!(net.job(job).await.state.status, JobStatus::Assigned);
    assert!(worker.stop().success());
    net.wait_for_no_containers().await;
}

/// A submitted result un-mined by a reorganisation before it is buried under the node's
/// `finality_depth`: the worker submits it again (before, it counted a mined result as
/// final, and the job ended in a reclaim or an expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_result_un_mined_by_a_reorg_is_submitted_again() {
    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    net.fund_submitter().await;
    // Heartbeats every second make the blocks the result waits under.
    let worker = net.spawn_worker(NODES[0], "finality_depth = 10").await;
    let job = net
        .post(cpu_job(64), &shell("echo ok > /outputs/ok", 60))
        .await;
    let assign_block = net.assign(job, worker.node_id).await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    let (first, log) = last_of_job(net.market(ADMIN).ResultSubmitted_filter(), job).await;
    let submitted_block = log.block_number.expect("mined");
    assert!(submitted_block > assign_block);

    // Every block from the result's on is replaced (one more, for a heartbeat mined
    // meanwhile): on the new branch the job is assigned and unanswered.
    let head = net.devnet.admin.get_block_number().await.unwrap();
    let depth = (head - submitted_block + 2).min(head - assign_block);
    let _: serde_json::Value = net
        .devnet
        .admin
        .raw_request(
            "anvil_reorg".into(),
            (depth, Vec::<serde_json::Value>::new()),
        )
        .await
        .expect("anvil_reorg");
    assert_eq!(net.job(job).await.state.status, JobStatus::Assigned);

    // The worker finds its result gone before it is final and submits it again: from its
    // finality check (counted), or, when the reorg came before it saw the receipt, from
    // the receipt wait (the transaction dropped, sent again). Either way a new
    // transaction holds the same result.
    net.wait_for_status(job, JobStatus::Submitted).await;
    let (again, again_log) = last_of_job(net.market(ADMIN).ResultSubmitted_filter(), job).await;
    assert_eq!(again.resultHash, first.resultHash);
    assert_ne!(
        again_log.transaction_hash, log.transaction_hash,
        "submitted again"
    );
    let resubmitted = worker
        .metric("gantry_worker_results_resubmitted_total")
        .await
        .unwrap_or(0.0);
    assert!(resubmitted <= 1.0, "{resubmitted}");
    assert!(net.slashes(worker.node_id).await.is_empty());
    assert!(worker.stop().success());
    net.wait_for_no_containers().await;
}
