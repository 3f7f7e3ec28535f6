//! What the fault tests share: a job script that checkpoints every epoch and resumes from
//! its checkpoint, waiting for a job's progress, and the chain's events of one job or
//! node.

use alloy::contract::Event;
use alloy::network::Network;
use alloy::primitives::U256;
use alloy::providers::Provider;
use alloy::rpc::types::Log;
use alloy::sol_types::SolEvent;
use futures::StreamExt;
use gantry_protocol::jobs::ProgressUpdate;

/// A job of `epochs` epochs (0.2 s each) that writes its epoch to `/checkpoints/epoch`
/// after each, starts from the checkpointed epoch, and records where it started in
/// `/outputs/started_at`; `announce` also prints where it starts and whether resumed.
pub(crate) fn checkpointing(epochs: u32, announce: bool) -> String {
    let announce = if announce {
        "echo \"starting at epoch $start (resumed=$GANTRY_RESUMED)\"\n"
    } else {
        ""
    };
    format!(
        r###"start=0
[ -f /checkpoints/epoch ] && start=$(cat /checkpoints/epoch)
{announce}i=$start
while [ $i -lt {epochs} ]; do
  i=$((i+1))
  echo $i > /checkpoints/.epoch && mv /checkpoints/.epoch /checkpoints/epoch
  echo "##gantry {{\"epoch\":$i,\"epochs\":{epochs}}}"
  sleep 0.2
done
echo $start > /outputs/started_at
"###
    )
}

/// Every event of `filter` about job `job` (its first indexed topic), oldest first.
pub(crate) async fn of_job<P: Provider<N>, E: SolEvent, N: Network>(
    filter: Event<P, E, N>,
    job: u64,
) -> Vec<(E, Log)> {
    by_first_topic(filter, job).await
}

/// The last event of `filter` about job `job`; panics when there is none.
pub(crate) async fn last_of_job<P: Provider<N>, E: SolEvent, N: Network>(
    filter: Event<P, E, N>,
    job: u64,
) -> (E, Log) {
    of_job(filter, job)
        .await
        .pop()
        .unwrap_or_else(|| panic!("no {} of job {job}", E::SIGNATURE))
}

/// Every event of `filter` about node `node` (its first indexed topic), oldest first.
pub(crate) async fn of_node<P: Provider<N>, E: SolEvent, N: Network>(
    filter: Event<P, E, N>,
    node: u64,
) -> Vec<(E, Log)> {
    by_first_topic(filter, node).await
}

async fn by_first_topic<P: Provider<N>, E: SolEvent, N: Network>(
    filter: Event<P, E, N>,
    id: u64,
) -> Vec<(E, Log)> {
    filter
        .topic1(U256::from(id))
        .from_block(0)
        .query()
        .await
        .unwrap()
}

/// Returns once `progress` (a subscription to the progress subjects) reports job `job` at
/// `epoch` or later.
pub(crate) async fn reaches_epoch(progress: &mut async_nats::Subscriber, job: u64, epoch: u32) {
    loop {
        let message = progress.next().await.unwrap();
        let update: ProgressUpdate = serde_json::from_slice(&message.payload).unwrap();
        if update.job_id == job && update.epoch >= Some(epoch) {
            return;
        }
    }
}

/// A connection subscribed to every job's progress on `net`'s chain.
pub(crate) async fn progress_subscription(
    net: &crate::harness::Net,
) -> (async_nats::Client, async_nats::Subscriber) {
    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let progress = client
        .subscribe(format!("gantry.jobs.{}.progress.>", net.chain_id()))
        .await
        .unwrap();
    (client, progress)
}
