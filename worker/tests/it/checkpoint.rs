//! Design 19, §2: a checkpoint is restored only if the agent of a node that held an
//! earlier attempt of the job signed exactly its bytes. One tampered where it is kept is
//! refused at restore: the job starts again from scratch, finishes, and the node that
//! resumed it is not slashed.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;

use crate::harness::Net;
use crate::resume::{checkpointed, epoch_of, started_at};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checkpoint_a_tampered_checkpoint_is_refused_and_the_job_starts_again_unslashed() {
    let net = Net::start(|p| p).await;
    let (first, job) = checkpointed(&net).await;
    let first_node = first.node_id;
    // Stopped, the worker checkpoints and gives the job back.
    assert!(first.stop().success(), "a clean exit");
    net.wait_for_no_containers().await;
    assert_eq!(net.job(job).await.state.status, JobStatus::Open);

    // Whoever can write where checkpoints are kept (here, anyone: this NATS runs without
    // users) puts other bytes under the first node's checkpoint, keeping its metadata: its
    // attempt and its agent's signature, of other bytes.
    let js = net.jetstream().await;
    let bucket = gantry_protocol::names::checkpoints_bucket(net.chain_id());
    let kept = gantry_runtime::objects::get(&js, &bucket, first_node, &job.to_string())
        .await
        .unwrap()
        .expect("the first node's checkpoint");
    let metadata = kept.info.metadata.clone();
    let genuine = net.checkpoint_of(first_node, job).await.unwrap();
    assert!(epoch_of(&genuine).unwrap() >= 3);
    let forged = checkpoint_at_epoch(49);
    gantry_runtime::objects::put(
        &js,
        &bucket,
        first_node,
        &job.to_string(),
        metadata,
        forged.as_slice(),
    )
    .await
    .unwrap();
    assert_eq!(net.checkpoint_of(first_node, job).await.unwrap(), forged);

    let second = net.spawn_worker(NODES[1], "").await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(net.job(job).await.state.node_id, second.node_id);
    assert_eq!(
        started_at(&net, job).await,
        0,
        "the tampered checkpoint was not restored: the job started again"
    );
    assert_eq!(
        second
            .metric("gantry_worker_checkpoints_refused_total{reason=\"not_signed\"}")
            .await,
        Some(1.0)
    );
    assert!(
        net.slashes(second.node_id).await.is_empty(),
        "the node that resumed it is not slashed"
    );
    net.wait_for_no_containers().await;
    assert!(second.stop().success());
}

/// A checkpoint tar of `checkpointing` at `epoch`.
fn checkpoint_at_epoch(epoch: u32) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let text = format!("{epoch}\n");
    let mut header = tar::Header::new_gnu();
    header.set_size(text.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    builder
        .append_data(&mut header, "epoch", text.as_bytes())
        .unwrap();
    builder.into_inner().unwrap()
}
