//! The graceful shutdown when the running job can finish: on SIGTERM the worker starts
//! nothing new (an assignment arriving meanwhile is given back at once, while the node is
//! still active, free within the reject grace), lets the running job finish within the
//! grace period and submits its result, and only then marks its node inactive.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, NODES};

use crate::harness::{Net, Services, cpu_job, shell};
use crate::scripts::{checkpointing, last_of_job, of_job, progress_subscription, reaches_epoch};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draining_worker_finishes_its_job_and_gives_new_work_back() {
    // No matcher: the test assigns as the admin, during the drain.
    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "shutdown_grace = \"2m\"").await;
    let node_id = worker.node_id;
    let (_client, mut progress) = progress_subscription(&net).await;
    let running = net
        .post(cpu_job(64), &shell(&checkpointing(40, false), 60))
        .await;
    net.assign(running, node_id).await;
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        reaches_epoch(&mut progress, running, 1),
    )
    .await
    .expect("the job runs");

    assert_eq!(worker.metric("gantry_worker_healthy").await, Some(1.0));
    worker.terminate();
    // Its metrics listener stops with the signal that starts the drain.
    net.wait_until("the worker drains", || async {
        worker.metric("gantry_worker_healthy").await.is_none()
    })
    .await;
    let late = net.post(cpu_job(64), &shell("true", 30)).await;
    net.assign(late, node_id).await;
    let rejection = net.given_back(late, node_id).await;
    assert!(rejection.reason.contains("shutting down"), "{rejection:?}");
    rejection.assert_at_once(20);

    // The running job finishes within the grace period and is answered with its result.
    net.wait_for_status(running, JobStatus::Submitted).await;
    assert!(net.failure_report(running).await.is_none());
    let status = tokio::task::spawn_blocking(move || worker.wait())
        .await
        .unwrap();
    assert!(status.success(), "a clean exit: {status}");

    // Offline by its own agent, after both answers: nothing it held is reclaimable.
    let market = net.market(ADMIN);
    let (event, offline_log) = net.marked_inactive(node_id).await;
    assert_eq!(event.by, net.address(NODES[0]));
    let (_, submitted) = last_of_job(market.ResultSubmitted_filter(), running).await;
    let (_, rejected) = last_of_job(market.JobRejected_filter(), late).await;
    assert!(submitted.block_number < offline_log.block_number);
    assert!(rejected.block_number < offline_log.block_number);
    for job in [running, late] {
        assert!(of_job(market.JobReclaimed_filter(), job).await.is_empty());
    }
    let slashes = net.slashes(node_id).await;
    assert!(
        slashes.iter().all(|s| s.jobId == late),
        "charged only for the job it gave back: {slashes:?}"
    );
    net.wait_for_no_containers().await;
}
