//! A worker that goes away mid-job, killed (SIGKILL) or stopped (SIGTERM): its container
//! goes with it, the job goes back to the market and resumes on a second worker from the
//! last checkpoint. Killed, the node is at fault: the keeper marks it inactive after the
//! heartbeat timeout and reclaims the job with the slash. Stopped, the worker gives the
//! job back itself (`reject`) while its node is still active, for a small share of a
//! slash, and only then marks its node inactive.

use futures::StreamExt;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, NODES};

use crate::harness::{FULL_SLASH, Net, RunningWorker, cpu_job, shell};
use crate::scripts::{checkpointing, of_job};

enum Death {
    Kill,
    Stop,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_worker_s_job_resumes_elsewhere_from_its_checkpoint() {
    resumes_after(Death::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_worker_gives_its_job_back_and_it_resumes_elsewhere() {
    resumes_after(Death::Stop).await;
}

async fn resumes_after(death: Death) {
    let net = Net::start(|p| p).await;
    // A checkpoint past epoch 2 uploaded; then the worker goes.
    let (first, job) = checkpointed(&net).await;
    let first_node = first.node_id;
    let stake_before = net.node(first_node).await.stake.to::<u64>();
    let market = net.market(ADMIN);
    match death {
        Death::Kill => {
            first.kill();
            // Its reaper unmounts the job's disk space, then removes the orphaned
            // container.
            net.wait_for_no_containers().await;
            let dir = net.dir().join(format!("worker-{}", NODES[0]));
            let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
            assert!(
                !mounts.contains(dir.to_str().unwrap()),
                "a job space outlived its worker"
            );
            // Silence past the heartbeat timeout: the keeper marks the node inactive and
            // reclaims the job, with the slash.
            net.advance(61).await;
            net.wait_until("the job is open again", || async {
                net.job(job).await.state.status == JobStatus::Open
            })
            .await;
            let reclaimed = of_job(market.JobReclaimed_filter(), job).await;
            let (event, _) = reclaimed.last().expect("JobReclaimed");
            assert_eq!(event.nodeId, first_node);
            let stake_after = net.node(first_node).await.stake.to::<u64>();
            assert_eq!(
                stake_before - stake_after,
                FULL_SLASH,
                "the node that dropped the job is slashed"
            );
        }
        Death::Stop => {
            // Past the grace period the job is checkpointed and given back, then the node
            // goes offline: a clean exit.
            assert!(first.stop().success(), "a clean exit");
            net.wait_for_no_containers().await;
            assert_eq!(net.job(job).await.state.status, JobStatus::Open);
            let rejection = net.rejection(job, first_node).await;
            assert!(rejection.reason.contains("shutting down"), "{rejection:?}");
            rejection.assert_at_once(60);
            assert!(
                of_job(market.JobReclaimed_filter(), job).await.is_empty(),
                "given back, not reclaimed"
            );
            let stake_after = net.node(first_node).await.stake.to::<u64>();
            assert_eq!(stake_before - stake_after, rejection.charge);
            // Offline by its own agent, after the reject.
            let (event, _) = net.marked_inactive(first_node).await;
            assert_eq!(event.by, net.address(NODES[0]));
        }
    }

    let second = net.spawn_worker(NODES[1], "").await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    let info = net.job(job).await;
    assert_eq!(info.state.node_id, second.node_id);
    assert_eq!(info.state.barred, 1, "the second attempt");

    let started_at = started_at(&net, job).await;
    assert!(
        started_at >= 3,
        "resumed from the checkpoint, not from scratch: {started_at}"
    );

    net.wait_for_no_containers().await;
    assert!(second.stop().success());
}

/// A worker (`NODES[0]`, 300 ms of shutdown grace) running a [`checkpointing`] job of 50
/// epochs that has uploaded its checkpoint at epoch 3 or later; the worker and the job.
pub(crate) async fn checkpointed(net: &Net) -> (RunningWorker, u64) {
    net.fund_submitter().await;
    let first = net
        .spawn_worker(NODES[0], "shutdown_grace = \"300ms\"")
        .await;
    let job = net
        .post(cpu_job(64), &shell(&checkpointing(50, true), 120))
        .await;
    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, first.node_id);
    wait_for_checkpoint(net, first.node_id, job, 3).await;
    (first, job)
}

/// Waits until node `node` has uploaded a checkpoint of `job` (run with
/// [`checkpointing`]) at epoch `epoch` or later.
pub(crate) async fn wait_for_checkpoint(net: &Net, node: u64, job: u64, epoch: u32) {
    let js = net.jetstream().await;
    let bucket = gantry_protocol::names::checkpoints_bucket(net.chain_id());
    let checkpoints = loop {
        match js.get_object_store(&bucket).await {
            Ok(store) => break store,
            Err(_) => {
                net.wait_until("the checkpoint bucket exists", || async {
                    js.get_object_store(&bucket).await.is_ok()
                })
                .await
            }
        }
    };
    // The bucket's metadata subjects, node-scoped: the standard watch reads them all.
    let mut updates = checkpoints.watch().await.unwrap();
    let reached = async {
        while let Some(update) = updates.next().await {
            let info = update.unwrap();
            if info.name == job.to_string() && !info.deleted {
                let bytes = net.checkpoint_of(node, job).await.expect("the checkpoint");
                if epoch_of(&bytes).is_some_and(|at| at >= epoch) {
                    return;
                }
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), reached)
        .await
        .expect("a checkpoint at the epoch");
}

/// The epoch a checkpoint tar of [`checkpointing`] holds.
pub(crate) fn epoch_of(tar: &[u8]) -> Option<u32> {
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().ok()? {
        let mut entry = entry.ok()?;
        if entry.path().ok()?.to_str() == Some("epoch") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).ok()?;
            return text.trim().parse().ok();
        }
    }
    None
}

/// What the finished job wrote to `/outputs/started_at`: the epoch it started from.
pub(crate) async fn started_at(net: &Net, job: u64) -> u32 {
    let files = net.result_files(job).await;
    String::from_utf8_lossy(&files["started_at"])
        .trim()
        .parse()
        .expect("the job wrote started_at")
}
