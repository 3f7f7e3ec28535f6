//! A node fault: the Docker engine goes down mid-job. The worker gives the job back at
//! once (`abandon`), takes no work while the engine is down, and when it is back runs the
//! job again from its checkpoint.

use futures::StreamExt;
use gantry_protocol::jobs::ProgressUpdate;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, NODES};

use crate::harness::{Net, cpu_job, shell};

const SCRIPT: &str = r###"start=0
[ -f /checkpoints/epoch ] && start=$(cat /checkpoints/epoch)
i=$start
while [ $i -lt 30 ]; do
  i=$((i+1))
  echo $i > /checkpoints/.epoch && mv /checkpoints/.epoch /checkpoints/epoch
  echo "##gantry {\"epoch\":$i,\"epochs\":30}"
  sleep 0.2
done
echo $start > /outputs/started_at
"###;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_docker_outage_gives_the_job_back_and_the_node_recovers() {
    let mut net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let mut progress = client
        .subscribe(format!("gantry.jobs.{}.progress.*", net.chain_id()))
        .await
        .unwrap();
    let job = net.post(cpu_job(64), &shell(SCRIPT, 120)).await;

    // Running, with a checkpoint or two behind it.
    let running = async {
        loop {
            let message = progress.next().await.unwrap();
            let update: ProgressUpdate = serde_json::from_slice(&message.payload).unwrap();
            if update.job_id == job && update.epoch >= Some(4) {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), running)
        .await
        .expect("the job runs");

    net.dockerd_mut().stop();
    net.wait_until("the worker gives the job back", || async {
        let reclaimed = net
            .market(ADMIN)
            .JobReclaimed_filter()
            .topic1(alloy::primitives::U256::from(job))
            .from_block(0)
            .query()
            .await
            .unwrap();
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
