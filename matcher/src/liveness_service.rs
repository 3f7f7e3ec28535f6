//! `gantry-liveness`'s loop: follow the stream into the view; while holding the keeper
//! lease, send each due action once, and say why each waiting verified job waits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use gantry_protocol::pending::{PENDING_VERSION, PendingExplanation};
use gantry_runtime::tasks::Supervisor;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::LivenessConfig;
use crate::feed::Feed;
use crate::liveness::{self, Action, Keeper};
use crate::project::Applied;
use crate::project::Projection;
use crate::sender::{Call, MAX_BATCH, Outcome, Report, Sender, VerifiedCall};
use crate::snapshot::Snapshotter;
use crate::view::{JobView, View};
use crate::{Started, lease, metrics, start};

/// Runs the keeper until `shutdown` fires. Every replica follows the stream, so a standby
/// that takes the lease acts at once. The keeping loop, the sender and the lease run under
/// one supervisor: any of them failing stops the others, and its error is the keeper's.
pub async fn run(config: LivenessConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate().map_err(anyhow::Error::msg)?;
    let chain_id = config.common.chain.chain_id;
    let Some(Started {
        js,
        sender,
        sending,
        feed,
        projection,
        snapshots,
    }) = start(&config.common, "liveness", &shutdown).await?
    else {
        return Ok(());
    };
    let tasks = Supervisor::new(shutdown.child_token());
    // The sender and the lease stop once the loop has: the lease is not given up while
    // this replica may still act on it.
    let helpers = tasks.shutdown().child_token();
    let stop = helpers.clone();
    tasks.spawn_critical("sending transactions", async move {
        sending.run(stop).await;
        Ok::<(), Infallible>(())
    });
    // Why each waiting verified job waits, written where the matcher's explanations go by
    // a task of its own: the keeper's loop never waits on NATS for them.
    let (explained_tx, explained) = watch::channel(Arc::new(HashMap::new()));
    let writer_stop = helpers.clone();
    let writer_js = js.clone();
    let replicas = config.common.nats.nats_replicas;
    tasks.spawn_critical("explaining verified jobs", async move {
        write_explanations(writer_js, chain_id, replicas, explained, writer_stop).await;
        Ok::<(), Infallible>(())
    });
    let (leading_tx, leading) = watch::channel(false);
    let stuck = sender.stuck_changes();
    tasks.spawn_critical(
        "holding the keeper lease",
        lease::hold(
            js,
            chain_id,
            config.common.instance_id(),
            config.lease_ttl,
            config.common.nats.nats_replicas,
            leading_tx,
            stuck,
            helpers.clone(),
        ),
    );
    let stop = tasks.shutdown().clone();
    tasks.spawn_critical("keeping", async move {
        let outcome = keep(
            (feed, projection, snapshots),
            sender,
            leading,
            explained_tx,
            &stop,
        )
        .await;
        helpers.cancel();
        outcome
    });
    tasks.wait().await
}

/// Follows the stream into the view and, while `leading`, sends what is due, until
/// `shutdown` fires.
async fn keep(
    (mut feed, mut projection, mut snapshots): (Feed, Projection, Snapshotter),
    mut sender: Sender,
    mut leading: watch::Receiver<bool>,
    explained: watch::Sender<Arc<HashMap<u64, String>>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut keeper = Keeper::default();
    // Jobs of a finalize batch that reverted: finalized alone from then on.
    let mut alone = HashSet::new();
    let mut retry = tokio::time::interval(Duration::from_secs(1));
    let mut dirty = false;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            message = feed.next() => {
                let Some(first) = message else {
                    anyhow::bail!("the chain stream consumer ended");
                };
                let mut next = Some(first);
                while let Some(message) = next {
                    match message {
                        Err(e) => tracing::warn!(error = %e, "reading the chain stream"),
                        Ok(message) => {
                            let applied = feed
                                .apply(&mut projection, message)
                                .context("projecting the chain stream")?;
                            dirty |= applied == Applied::Changed;
                        }
                    }
                    next = feed.next_ready();
                }
                snapshots.maybe(&projection, &feed);
                metrics::view_block("liveness", projection.view().block);
            }
            changed = leading.changed() => {
                if changed.is_err() {
                    // The lease task ended: it failed (its error is the keeper's), or
                    // shutdown is under way.
                    shutdown.cancelled().await;
                    return Ok(());
                }
                // A new tenure starts from scratch: what the last leader sent may not have
                // landed.
                keeper = Keeper::default();
                dirty = true;
            }
            Some(report) = sender.reports.recv() => {
                dirty |= on_report(&mut keeper, &mut alone, report);
            }
            _ = retry.tick() => {}
        }
        if dirty && feed.caught_up() && *leading.borrow() {
            dirty = false;
            let view = projection.view();
            alone.retain(|job| view.jobs.contains_key(job));
            for (call, actions) in calls(view, keeper.next(view), &alone) {
                if sender.try_send(call) {
                    for action in &actions {
                        metrics::keeper_actions(action.kind());
                        tracing::info!(action = ?action, now = view.now, "keeper action due");
                    }
                } else {
                    for action in &actions {
                        keeper.forget(action);
                    }
                    dirty = true;
                }
            }
            let waiting: HashMap<u64, String> = view
                .verified
                .values()
                .filter_map(|job| Some((job.id, liveness::waiting(view, job)?)))
                .collect();
            explained.send_if_modified(|now| {
                let changed = **now != waiting;
                if changed {
                    *now = Arc::new(waiting);
                }
                changed
            });
        }
    }
}

/// How long one explanation's write may take before it is left for the next change.
const EXPLANATION_WRITE: Duration = Duration::from_secs(2);

/// Writes why each waiting verified job waits ([`liveness::waiting`], as the keeper's loop
/// last computed it) where the API reads pending jobs' explanations, when it changed, and
/// deletes those of jobs that wait no more; until `shutdown`. The bucket is opened (or
/// made) with retries: without it the keeper keeps keeping, unexplained.
async fn write_explanations(
    js: async_nats::jetstream::Context,
    chain_id: u64,
    replicas: usize,
    mut explained: watch::Receiver<Arc<HashMap<u64, String>>>,
    shutdown: CancellationToken,
) {
    let bucket = gantry_protocol::names::pending_bucket(chain_id);
    let store = loop {
        let opened = match js.get_key_value(&bucket).await {
            Ok(store) => Ok(store),
            Err(_) => js
                .create_key_value(gantry_protocol::storage::pending_bucket(chain_id, replicas))
                .await
                .map_err(|e| e.to_string()),
        };
        match opened {
            Ok(store) => break store,
            Err(e) => tracing::warn!(bucket, error = %e, "the explanations bucket: trying again"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    };
    let mut published: HashMap<u64, String> = HashMap::new();
    loop {
        let now = explained.borrow_and_update().clone();
        for (job, summary) in now.iter() {
            if published.get(job) == Some(summary) {
                continue;
            }
            let pending = PendingExplanation {
                v: PENDING_VERSION,
                job_id: *job,
                summary: summary.clone(),
                nodes: 0,
                rejected: BTreeMap::new(),
                best: Vec::new(),
                block: 0,
            };
            let payload = serde_json::to_vec(&pending).expect("explanations serialize");
            let put = store.put(job.to_string(), payload.into());
            match tokio::time::timeout(EXPLANATION_WRITE, put).await {
                Ok(Ok(_)) => {
                    tracing::debug!(job_id = job, summary = %summary, "verified job waiting");
                    published.insert(*job, summary.clone());
                }
                Ok(Err(e)) => tracing::warn!(job_id = job, error = %e, "writing an explanation"),
                Err(_) => tracing::warn!(job_id = job, "writing an explanation: timed out"),
            }
        }
        let gone: Vec<u64> = published
            .keys()
            .filter(|job| !now.contains_key(job))
            .copied()
            .collect();
        for job in gone {
            let delete = store.delete(job.to_string());
            match tokio::time::timeout(EXPLANATION_WRITE, delete).await {
                Ok(Ok(())) => {
                    published.remove(&job);
                }
                Ok(Err(e)) => tracing::warn!(job_id = job, error = %e, "deleting an explanation"),
                Err(_) => tracing::warn!(job_id = job, "deleting an explanation: timed out"),
            }
        }
        // The next change, or a while for the writes that failed.
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = explained.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
    }
}

/// The calls that carry `due`: closed challenge windows in batches of [`MAX_BATCH`]
/// (`finalizeBatch`), except jobs of a batch that reverted; every other action alone.
fn calls(view: &View, due: Vec<Action>, alone: &HashSet<u64>) -> Vec<(Call, Vec<Action>)> {
    let with = |action: &Action| {
        action
            .job()
            .and_then(|job| view.jobs.get(&job))
            .map(JobView::market)
    };
    let (batched, single): (Vec<Action>, Vec<Action>) = due.into_iter().partition(|action| {
        matches!(action, Action::Finalize { job } if !alone.contains(job) && view.jobs.contains_key(job))
    });
    let mut calls: Vec<(Call, Vec<Action>)> = single
        .into_iter()
        .map(|action| {
            let verified = action.job().and_then(|job| view.verified.get(&job));
            let call = match verified {
                Some(job) => Call::Verified(
                    action,
                    Box::new(VerifiedCall {
                        job: job.market(),
                        seats: job.seats,
                    }),
                ),
                None => Call::Keep(action, with(&action).map(Box::new)),
            };
            (call, vec![action])
        })
        .collect();
    for chunk in batched.chunks(MAX_BATCH) {
        let finals = chunk
            .iter()
            .filter_map(|action| Some((action.job()?, view.jobs.get(&action.job()?)?.state)))
            .collect();
        calls.push((Call::Finalize(finals), chunk.to_vec()));
    }
    calls
}

/// Takes a sent call's outcome; returns whether the keeper should look again.
fn on_report(keeper: &mut Keeper, alone: &mut HashSet<u64>, report: Report) -> bool {
    let actions: Vec<Action> = match &report.call {
        Call::Keep(action, _) | Call::Verified(action, _) => vec![*action],
        Call::Finalize(batch) => batch
            .iter()
            .map(|(job, _)| Action::Finalize { job: *job })
            .collect(),
        Call::Assign(_) => return false,
    };
    let batched = actions.len() > 1;
    let mut again = false;
    for action in actions {
        match report.outcome {
            Outcome::Confirmed { block } => {
                tracing::info!(action = ?action, block, tx = %report.tx_hash, "keeper action confirmed");
                keeper.confirmed(&action, block);
            }
            Outcome::Reverted { block } if batched => {
                // One stale item reverts the whole batch: each goes alone next.
                tracing::info!(action = ?action, block, tx = %report.tx_hash, "keeper batch reverted; sending its actions one by one");
                if let Some(job) = action.job() {
                    alone.insert(job);
                }
                keeper.forget(&action);
                again = true;
            }
            Outcome::Reverted { block } => {
                // The chain moved on between the view and the block (a heartbeat, a
                // result); the condition is not acted on again while it lasts.
                tracing::info!(action = ?action, block, tx = %report.tx_hash, "keeper action reverted");
            }
            Outcome::Dropped => {
                tracing::warn!(action = ?action, "keeper action dropped; it will be retried");
                keeper.forget(&action);
                again = true;
            }
        }
    }
    again
}

#[cfg(test)]
mod tests {
    use alloy::primitives::B256;
    use gantry_protocol::status::JobStatus;

    use super::*;
    use crate::sender::Outcome;
    use crate::view::Requirements;
    use crate::view::fixtures;

    fn submitted(id: u64) -> JobView {
        let mut job = fixtures::job(id, 0, 9_999, Requirements::default());
        job.state.status = JobStatus::Submitted;
        job.state.until = 100;
        job
    }

    #[test]
    fn closed_windows_go_in_batches_until_a_batch_reverts_then_alone() {
        let mut view = View {
            now: 100,
            ..View::default()
        };
        for id in 1..=12 {
            view.jobs.insert(id, submitted(id));
        }
        let mut keeper = Keeper::default();
        let mut alone = HashSet::new();

        // Twelve due: a batch of ten and one of two.
        let sent = calls(&view, keeper.next(&view), &alone);
        let sizes: Vec<usize> = sent.iter().map(|(_, actions)| actions.len()).collect();
        assert_eq!(sizes, [10, 2]);
        assert!(matches!(&sent[0].0, Call::Finalize(batch) if batch.len() == 10));

        // The batch of two reverts (one of them moved on): both go alone next time.
        let (call, _) = sent[1].clone();
        let again = on_report(
            &mut keeper,
            &mut alone,
            Report {
                call,
                outcome: Outcome::Reverted { block: 7 },
                tx_hash: B256::ZERO,
            },
        );
        assert!(again);
        assert_eq!(alone, HashSet::from([11, 12]));
        let sent = calls(&view, keeper.next(&view), &alone);
        assert_eq!(sent.len(), 2);
        for (call, actions) in &sent {
            assert_eq!(actions.len(), 1);
            assert!(matches!(call, Call::Keep(Action::Finalize { .. }, Some(_))));
        }

        // A single finalize that reverts is not retried while it stays due.
        let (call, _) = sent[0].clone();
        assert!(!on_report(
            &mut keeper,
            &mut alone,
            Report {
                call,
                outcome: Outcome::Reverted { block: 8 },
                tx_hash: B256::ZERO,
            },
        ));
        assert!(calls(&view, keeper.next(&view), &alone).is_empty());
    }
}
