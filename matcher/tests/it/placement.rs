//! Heterogeneous nodes and jobs: each job lands on the node the strategy prefers; an
//! impossible job is explained.

use gantry_protocol::pending::Constraint;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{MATCHER, NODES};

use crate::harness::{Net, needs, node};

/// Registers one self-served node per `(model, gpus, vram_gib, price, slots)`, operated by
/// `NODES[0]`, `NODES[1]`, … in turn; returns their ids.
pub(crate) async fn register_nodes<const N: usize>(
    net: &Net,
    nodes: [(&str, u16, u32, u64, u8); N],
) -> [u64; N] {
    let mut ids = [0; N];
    for (i, (model, gpus, vram_gib, price, slots)) in nodes.into_iter().enumerate() {
        ids[i] = net
            .register_own_node(NODES[i], node(model, gpus, vram_gib, price, slots))
            .await;
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_land_on_the_preferred_eligible_node_and_an_impossible_one_is_explained() {
    let net = Net::start(|params| params).await;
    // Given an 8×H100 at 2 gUSD, a 1×L4 (24 GiB) at 1 gUSD and a 4×A100-40GB at 3 gUSD,
    let [h100, l4, a100] = register_nodes(
        &net,
        [
            ("NVIDIA-H100-80GB", 8, 80, 2, 2),
            ("NVIDIA-L4", 1, 24, 1, 2),
            ("NVIDIA-A100-40GB", 4, 40, 3, 2),
        ],
    )
    .await;
    net.fund_submitter().await;
    let _matcher = net.spawn_matcher(MATCHER, &[]);
    let deadline = net.now().await + 86_400;

    // when jobs are posted that any node, only a big one, only an H100, or none can run,
    let small = net.post(needs("", 16, 3_600), deadline).await;
    let big = net.post(needs("", 60, 3_600), deadline).await;
    let named = net
        .post(needs("NVIDIA-A100-40GB", 32, 3_600), deadline)
        .await;
    let impossible = net.post(needs("", 160, 3_600), deadline).await;

    // then each lands where the score strategy prefers: the small job on the cheap L4
    // that it fits best, the 60 GiB job on the only node with that much memory, the named
    // model on its node;
    for (job, expected) in [(small, l4), (big, h100), (named, a100)] {
        net.wait_for_status(job, JobStatus::Assigned).await;
        assert_eq!(net.job(job).await.state.node_id, expected, "job {job}");
    }
    // and the impossible job stays open with an explanation naming the constraint.
    let explanation = net.wait_for_explanation(impossible).await;
    assert_eq!(explanation.job_id, impossible);
    assert_eq!(explanation.nodes, 3);
    assert_eq!(explanation.rejected.get(&Constraint::Vram), Some(&3));
    assert_eq!(
        explanation.summary,
        "0 of 3 nodes have ≥ 160 GiB VRAM per GPU"
    );
    assert!(
        explanation
            .best
            .iter()
            .all(|c| c.failed.contains(&Constraint::Vram)),
        "{explanation:?}"
    );
    assert_eq!(net.job(impossible).await.state.status, JobStatus::Open);
}
