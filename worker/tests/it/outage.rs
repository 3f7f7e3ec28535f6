//! A node fault: the Docker engine goes down mid-job. The worker gives the job back at
//! once (`abandon`), takes no work while the engine is down, and when it is back runs the
//! job again from its checkpoint.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, NODES};

use crate::harness::{Net, cpu_job, shell};
use crate::scripts::{checkpointing, of_job, progress_subscription, reaches_epoch};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_docker_outage_gives_the_job_back_and_the_node_recovers() {
    let mut net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let (_client, mut progress) = progress_subscription(&net).await;
    let job = net
        .post(cpu_job(64), &shell(&checkpointing(30, false), 120))
        .await;

    // Running, with a checkpoint or two behind it.
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        reaches_epoch(&mut progress, job, 4),
    )
    .await
    .expect("the job runs");

    net.dockerd_mut().stop();
    net.wait_until("the worker gives the job back", || async {
        let reclaimed = of_job(net.market(ADMIN).JobReclaimed_filter(), job).await;
        reclaimed.iter().any(|(event, _)| event.kind == 2)
    })
    .await;

    net.dockerd_mut().restart().expect("dockerd restarts");
    net.wait_for_status(job, JobStatus::Submitted).await;
    let info = net.job(job).await;
    assert_eq!(info.nodeId, worker.node_id);
    assert_eq!(info.attempts, 2, "one retry, after the engine came back");
    let rejected = net.rejections().await;
    assert!(
        !rejected.contains_key(&job),
        "a node fault is not the job's: {rejected:?}"
    );

    net.wait_for_no_containers().await;
    assert!(worker.stop().success());
}
