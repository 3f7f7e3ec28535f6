//! `gantry-matcher`'s loop: follow the stream into the view, hold claims on open jobs
//! through the shared consumer, plan, send assignments for the claimed jobs, explain the
//! ones that cannot be placed.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::jetstream::kv;
use gantry_protocol::pending::PENDING_VERSION;
use gantry_protocol::pending::{Constraint, PendingCandidate, PendingExplanation};
use gantry_protocol::{names, storage};
use gantry_runtime::tasks::Supervisor;
use tokio_util::sync::CancellationToken;

use crate::config::MatcherConfig;
use crate::decide::{Decision, Explanation, Planner, Reservations, explain};
use crate::feed::Feed;
use crate::project::Applied;
use crate::project::Projection;
use crate::sender::{Assign, Call, MAX_BATCH, Outcome, Report, Sender};
use crate::view::{JobView, Requirements};
use crate::work::{Claims, Held};
use crate::{connect, metrics, start_sender};

/// Runs the matcher until `shutdown` fires. Its claims are given back on the way out, so
/// the other replicas take its jobs at once. The matching loop and the sender run under
/// one supervisor: either failing stops the other, and its error is the matcher's.
pub async fn run(config: MatcherConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate().map_err(anyhow::Error::msg)?;
    let signer = config.common.signer()?;
    let chain_id = config.common.chain.chain_id;
    let js = connect(&config.common).await?;
    let Some((sender, sending)) = start_sender(&config.common, signer, &shutdown).await? else {
        return Ok(());
    };
    let Some(feed) = Feed::open(&js, chain_id, &shutdown).await? else {
        return Ok(());
    };
    let claims = Claims::open(&js, chain_id, config.claim_ttl, config.max_claims).await?;
    let bucket = names::pending_bucket(chain_id);
    let explanations = match js.get_key_value(&bucket).await {
        Ok(store) => store,
        Err(_) => js
            .create_key_value(storage::pending_bucket(
                chain_id,
                config.common.nats.nats_replicas,
            ))
            .await
            .with_context(|| format!("creating the KV bucket {bucket}"))?,
    };
    tracing::info!(
        strategy = ?config.strategy,
        instance = %config.common.instance_id(),
        replay_to = feed.caught_up_at,
        "matcher replaying the chain stream"
    );

    let mut matcher = Matcher {
        feed,
        claims,
        sender,
        explanations,
        projection: Projection::default(),
        planner: Planner::new(config.strategy.into(), config.weights()),
        reservations: Reservations::default(),
        confirmed: HashMap::new(),
        excluded_until: HashMap::new(),
        alone: HashSet::new(),
        held: Held::default(),
        published: HashMap::new(),
        revert_backoff: config.revert_backoff,
        caught_up_logged: false,
    };
    let tasks = Supervisor::new(shutdown.child_token());
    let stop = tasks.shutdown().clone();
    tasks.spawn_critical("sending transactions", async move {
        sending.run(stop).await;
        Ok::<(), Infallible>(())
    });
    let stop = tasks.shutdown().clone();
    tasks.spawn_critical("matching", async move {
        let outcome = matcher.run(config.claim_ttl, &stop).await;
        matcher.held.give_back_all().await;
        outcome
    });
    tasks.wait().await
}

struct Matcher {
    feed: Feed,
    claims: Claims,
    sender: Sender,
    explanations: kv::Store,
    projection: Projection,
    planner: Planner,
    reservations: Reservations,
    /// Jobs whose assignment was mined, with its block: the reservation holds until the
    /// view has applied that block (if the job is still open then, a reorg undid it).
    confirmed: HashMap<u64, u64>,
    excluded_until: HashMap<(u64, u64), Instant>,
    /// Jobs of an assignment batch that reverted: sent alone until placed.
    alone: HashSet<u64>,
    held: Held,
    /// Explanations this replica wrote, by job.
    published: HashMap<u64, PendingExplanation>,
    revert_backoff: Duration,
    caught_up_logged: bool,
}

impl Matcher {
    async fn run(
        &mut self,
        claim_ttl: Duration,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<()> {
        let mut renew = tokio::time::interval(claim_ttl / 3);
        let mut housekeeping = tokio::time::interval(Duration::from_millis(500));
        let mut dirty = false;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                message = self.feed.next() => {
                    dirty |= self.on_feed(message)?;
                    while let Some(message) = self.feed.next_ready() {
                        dirty |= self.on_feed(Some(message))?;
                    }
                }
                claim = self.claims.next() => match claim {
                    Some(Ok(claim)) => {
                        self.held.insert(claim);
                        dirty = true;
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "receiving claims"),
                    None => anyhow::bail!("the matcher consumer ended"),
                },
                Some(report) = self.sender.reports.recv() => {
                    self.on_report(report);
                    dirty = true;
                }
                _ = renew.tick() => self.held.renew_all().await,
                _ = housekeeping.tick() => {
                    let now = Instant::now();
                    let before = self.excluded_until.len();
                    self.excluded_until.retain(|_, until| *until > now);
                    dirty |= self.excluded_until.len() != before;
                }
            }
            if dirty && self.feed.caught_up() {
                if !self.caught_up_logged {
                    self.caught_up_logged = true;
                    let view = self.projection.view();
                    tracing::info!(
                        block = view.block,
                        nodes = view.nodes.len(),
                        open_jobs = view.open_jobs().count(),
                        "matcher caught up with the chain stream"
                    );
                }
                dirty = self.step().await;
            }
        }
    }

    /// Applies a feed message; whether the view changed.
    fn on_feed(
        &mut self,
        message: Option<Result<crate::feed::Delivered, crate::error::StreamError>>,
    ) -> anyhow::Result<bool> {
        match message {
            None => anyhow::bail!("the chain stream consumer ended"),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "reading the chain stream");
                Ok(false)
            }
            Some(Ok(message)) => {
                let applied = self
                    .feed
                    .apply(&mut self.projection, message)
                    .context("projecting the chain stream")?;
                if applied == Applied::Changed {
                    metrics::view_block("matcher", self.projection.view().block);
                }
                Ok(applied == Applied::Changed)
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tx = %report.tx_hash))]
    fn on_report(&mut self, report: Report) {
        let Call::Assign(batch) = report.call else {
            return;
        };
        let batched = batch.len() > 1;
        for Assign { job, node, .. } in batch {
            match report.outcome {
                Outcome::Confirmed { block } => {
                    tracing::info!(job_id = job, node_id = node, block, tx = %report.tx_hash, "assignment confirmed");
                    // The view may have shown the assignment already and ended the
                    // reservation.
                    if self.reservations.in_flight.contains_key(&job) {
                        self.confirmed.insert(job, block);
                    }
                }
                Outcome::Reverted { block } if batched => {
                    // One stale item reverts the whole batch: each goes alone next, so
                    // the one that fails is found and the others are not held up.
                    tracing::info!(job_id = job, node_id = node, block, tx = %report.tx_hash, "assignment batch reverted; sending its jobs one by one");
                    self.reservations.in_flight.remove(&job);
                    self.alone.insert(job);
                }
                Outcome::Reverted { block } => {
                    // Expected now and then (another replica or a claim took the job, the
                    // node went inactive): try the next candidate, and not this pair again
                    // soon.
                    tracing::info!(job_id = job, node_id = node, block, tx = %report.tx_hash, "assignment reverted; trying the next candidate");
                    self.reservations.in_flight.remove(&job);
                    self.excluded_until
                        .insert((job, node), Instant::now() + self.revert_backoff);
                }
                Outcome::Dropped => {
                    tracing::warn!(
                        job_id = job,
                        node_id = node,
                        "assignment dropped; planning it again"
                    );
                    self.reservations.in_flight.remove(&job);
                }
            }
        }
    }

    /// One planning round; returns whether another is needed soon (the sender was full).
    #[tracing::instrument(level = "debug", skip(self), fields(block = self.projection.view().block))]
    async fn step(&mut self) -> bool {
        let view = self.projection.view();
        let applied = self.feed.applied;

        // Claims on jobs placed or settled are done.
        for claim in self
            .held
            .take_done(applied, |job| view.open_job(job).is_some())
        {
            if self.published.remove(&claim.job).is_some() {
                delete_explanation(&self.explanations, claim.job).await;
            }
            claim.release().await;
        }
        metrics::claimed_jobs(self.held.len());

        // Reservations end once the view shows their outcome.
        let confirmed = &mut self.confirmed;
        self.reservations.in_flight.retain(|job, _| {
            let open = view.open_job(*job).is_some();
            let undone = confirmed.get(job).is_some_and(|block| view.block >= *block);
            if !open || undone {
                confirmed.remove(job);
                false
            } else {
                true
            }
        });
        self.excluded_until
            .retain(|(job, _), _| view.open_job(*job).is_some());
        self.alone.retain(|job| view.open_job(*job).is_some());
        self.reservations.excluded = self.excluded_until.keys().copied().collect();
        if self.held.is_empty() {
            return false;
        }

        let mut again = false;
        let mut batch: Vec<Assign> = Vec::new();
        let mut unplaceable: Vec<u64> = Vec::new();
        for decision in self.planner.plan_with(view, &self.reservations) {
            match decision {
                Decision::Assign { job, node } if self.held.contains(job) => {
                    let Some(with) = view.open_job(job).map(JobView::market) else {
                        continue;
                    };
                    batch.push(Assign { job, node, with });
                }
                Decision::Unplaceable { job } if self.held.contains(job) => unplaceable.push(job),
                _ => {}
            }
        }
        // Jobs of a batch that reverted go alone; the rest in batches.
        let (alone, batched): (Vec<Assign>, Vec<Assign>) =
            batch.into_iter().partition(|a| self.alone.contains(&a.job));
        let calls = alone
            .into_iter()
            .map(|a| vec![a])
            .chain(batched.chunks(MAX_BATCH).map(<[Assign]>::to_vec));
        let mut assigned = 0;
        for call in calls {
            if !self.sender.try_send(Call::Assign(call.clone())) {
                again = true;
                continue;
            }
            for Assign { job, node, .. } in call {
                assigned += 1;
                self.reservations.in_flight.insert(job, node);
                if let Some(received) = self.held.received(job) {
                    metrics::event_to_assign(received.elapsed());
                }
                tracing::info!(job_id = job, node_id = node, "assigning");
                if self.published.remove(&job).is_some() {
                    delete_explanation(&self.explanations, job).await;
                }
            }
        }
        metrics::decisions("assign", assigned);
        metrics::decisions("unplaceable", unplaceable.len() as u64);

        // Explain each unplaceable job; jobs with the same requirements and no barred
        // node share one.
        let mut by_requirements: HashMap<Requirements, Explanation> = HashMap::new();
        for job in unplaceable {
            let Some(open) = view.open_job(job) else {
                continue;
            };
            let own;
            let explanation = if open.barred.is_empty() {
                by_requirements
                    .entry(*open.requirements())
                    .or_insert_with(|| explain(view, open))
            } else {
                own = explain(view, open);
                &own
            };
            let pending = pending_explanation(job, open.requirements(), explanation, view.block);
            let unchanged = self.published.get(&job).is_some_and(|old| {
                PendingExplanation {
                    block: old.block,
                    ..pending.clone()
                } == *old
            });
            if unchanged {
                continue;
            }
            let payload = serde_json::to_vec(&pending).expect("explanations serialize");
            match self.explanations.put(job.to_string(), payload.into()).await {
                Ok(_) => {
                    metrics::explanations_written();
                    tracing::debug!(job_id = job, summary = %pending.summary, "job cannot be placed");
                    self.published.insert(job, pending);
                }
                Err(e) => tracing::warn!(job_id = job, error = %e, "writing an explanation"),
            }
        }
        let mut by_reason: HashMap<&str, usize> = HashMap::new();
        for pending in self.published.values() {
            let reason = pending
                .rejected
                .iter()
                .max_by_key(|(_, count)| **count)
                .map_or("none", |(constraint, _)| constraint.name());
            *by_reason.entry(reason).or_default() += 1;
        }
        for reason in Constraint::ALL.iter().map(|c| c.name()).chain(["none"]) {
            metrics::pending_jobs(reason, by_reason.get(&reason).copied().unwrap_or(0));
        }
        again
    }
}

async fn delete_explanation(store: &kv::Store, job: u64) {
    match store.delete(job.to_string()).await {
        Ok(()) => metrics::explanations_written(),
        Err(e) => tracing::warn!(job_id = job, error = %e, "deleting an explanation"),
    }
}

fn pending_explanation(
    job: u64,
    requirements: &Requirements,
    explanation: &Explanation,
    block: u64,
) -> PendingExplanation {
    PendingExplanation {
        v: PENDING_VERSION,
        job_id: job,
        summary: explanation.summary(requirements),
        nodes: explanation.nodes as u64,
        rejected: explanation
            .rejected
            .iter()
            .map(|(constraint, count)| (*constraint, *count as u64))
            .collect(),
        best: explanation
            .best
            .iter()
            .map(|candidate| PendingCandidate {
                node_id: candidate.node,
                score: (candidate.score * 1_000.0).round() / 1_000.0,
                failed: candidate.failed.clone(),
            })
            .collect(),
        block,
    }
}
