//! The job's clock: a job that sleeps past its own `timeoutSecs` (5 s) is stopped at that
//! limit, counted from its assignment on chain, and answered with its failure report
//! before the attempt ends. The node is paid after the challenge window, as for any
//! result, and its stake is never touched: the job's timeout is the job's affair.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, NODES};

use crate::harness::{Net, STAKE, cpu_job, shell};
use crate::scripts::last_of_job;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_past_its_own_timeout_is_stopped_answered_in_time_and_paid() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;

    // 5 s of its own, in an attempt of 600 s.
    let job = net
        .post(
            cpu_job(64),
            &shell(
                "echo started > /outputs/started; sleep 60; echo done > /outputs/done",
                5,
            ),
        )
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;

    let market = net.market(ADMIN);
    let (assigned, _) = last_of_job(market.JobAssigned_filter(), job).await;
    let (_, submitted) = last_of_job(market.ResultSubmitted_filter(), job).await;
    let until = assigned.until.to::<u64>();
    let assigned_at = until - 600;
    let answered_at = net.block_time(&submitted).await;
    assert!(answered_at <= until, "answered after the attempt ended");
    assert!(
        answered_at < assigned_at + 60,
        "stopped at its own 5 s, not left to sleep its 60 s: answered {} s after the assignment",
        answered_at - assigned_at
    );

    // The result is its failure report, with what it wrote before it was stopped.
    let files = net.result_files(job).await;
    assert_eq!(files["outputs/started"], b"started\n");
    assert!(!files.contains_key("outputs/done"), "it was stopped");
    let report = net.failure_report(job).await.expect("a failure report");
    assert!(
        report["reason"].as_str().unwrap().starts_with("timeout"),
        "{report}"
    );
    assert_eq!(report["timedOut"], true);
    let ran = report["ranSecs"].as_u64().unwrap();
    assert!((4..=5).contains(&ran), "ran {ran} s of its 5: {report}");
    assert_eq!(report["outputs"], "included");
    assert_eq!(report["jobId"], job);

    // Paid after the challenge window; the stake untouched.
    net.advance(31).await;
    net.wait_for_status(job, JobStatus::Completed).await;
    let (completed, _) = last_of_job(market.JobCompleted_filter(), job).await;
    assert_eq!(completed.nodeId, worker.node_id);
    let node = net.node(worker.node_id).await;
    assert_eq!(node.earnings, completed.payout);
    assert_eq!(node.stake.to::<u64>(), STAKE);
    assert!(
        net.slashes(worker.node_id).await.is_empty(),
        "no NodeSlashed for the node"
    );

    net.wait_for_no_containers().await;
    assert!(worker.stop().success());
}

/// A worker killed mid-job and started again on the same node: the assignment comes back
/// to it (redelivered once the first run's claim lapses, 30 s on), with less of the job's
/// time left than the job needs. Its time running out is the node's doing: the job is
/// given back (the node charged for the time it held it), never answered with a
/// "timeout" failure report the submitter would pay for. (The chaos suite saw a job run
/// again with a second left and "fail" that way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_run_again_after_its_worker_died_is_given_back_when_its_time_runs_out() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let first = net.spawn_worker(NODES[0], "").await;
    let node = first.node_id;

    // 70 s of its own, of which it needs 50.
    let job = net
        .post(
            cpu_job(64),
            &shell("sleep 50; echo done > /outputs/done", 70),
        )
        .await;
    net.wait_for_status(job, JobStatus::Assigned).await;
    net.wait_until("the job's container runs", || async {
        !net.containers().await.is_empty()
    })
    .await;
    first.kill();
    net.wait_for_no_containers().await;
    let _again = net.spawn_worker(NODES[0], "").await;

    // The run again cannot finish in what is left: the job is given back, by the node's
    // fault, and no result was ever submitted for it.
    let rejection = net.given_back(job, node).await;
    assert!(
        rejection.reason.contains("first run of the job was lost"),
        "{rejection:?}"
    );
    let market = net.market(ADMIN);
    let submitted = market
        .ResultSubmitted_filter()
        .from_block(0)
        .query()
        .await
        .unwrap();
    assert!(
        submitted.iter().all(|(event, _)| event.jobId != job),
        "a result was submitted for the job"
    );
}
