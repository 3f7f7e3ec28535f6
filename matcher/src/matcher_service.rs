//! `gantry-matcher`'s loop: follow the stream into the view, hold claims on open jobs
//! through the shared consumer, plan, send assignments for the claimed jobs, explain the
//! ones that cannot be placed.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::jetstream::kv;
use gantry_protocol::pending::Constraint;
use gantry_protocol::{names, storage};
use gantry_runtime::tasks::Supervisor;
use tokio_util::sync::CancellationToken;

use crate::config::MatcherConfig;
use crate::feed::Feed;
use crate::incremental::IncrementalPlanner;
use crate::project::Applied;
use crate::project::Projection;
use crate::round::Books;
use crate::sender::{Assign, Call, Sender};
use crate::snapshot::Snapshotter;
use crate::view::Changes;
use crate::work::{Claims, Held};
use crate::{Started, metrics, start};

/// Runs the matcher until `shutdown` fires. Its claims are given back on the way out, so
/// the other replicas take its jobs at once. The matching loop and the sender run under
/// one supervisor: either failing stops the other, and its error is the matcher's.
pub async fn run(config: MatcherConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate().map_err(anyhow::Error::msg)?;
    let chain_id = config.common.chain.chain_id;
    let Some(Started {
        js,
        sender,
        sending,
        feed,
        projection,
        snapshots,
    }) = start(&config.common, "matcher", &shutdown).await?
    else {
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
        projection,
        snapshots,
        planner: IncrementalPlanner::new(config.strategy.into(), config.weights()),
        changes: Changes::everything(),
        books: Books::new(config.revert_backoff),
        held: Held::default(),
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
    snapshots: Snapshotter,
    planner: IncrementalPlanner,
    /// What changed in the view since the planner's last round.
    changes: Changes,
    books: Books,
    held: Held,
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
        // While the sender is stuck this replica takes no claims and gives back those it
        // holds: another replica, whose transactions land, places the jobs.
        let mut stuck = self.sender.stuck_changes();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                message = self.feed.next() => {
                    dirty |= self.on_feed(message)?;
                    while let Some(message) = self.feed.next_ready() {
                        dirty |= self.on_feed(Some(message))?;
                    }
                    self.snapshots.maybe(&self.projection, &self.feed);
                }
                Ok(()) = stuck.changed() => {
                    if *stuck.borrow_and_update() {
                        tracing::warn!(claims = self.held.len(), "the sender is stuck: giving back every claim");
                        self.held.give_back_all().await;
                        metrics::claimed_jobs(0);
                    }
                    dirty = true;
                }
                claim = self.claims.next(), if !*stuck.borrow() => {
                    // Every claim already delivered joins this round: a round per claim
                    // would plan the whole market once for each of thousands of jobs.
                    let mut claim = claim;
                    loop {
                        match claim {
                            Some(Ok(claim)) => {
                                self.books.touched(claim.job);
                                self.held.insert(claim);
                                dirty = true;
                            }
                            Some(Err(e)) => tracing::warn!(error = %e, "receiving claims"),
                            None => anyhow::bail!("the matcher consumer ended"),
                        }
                        claim = match self.claims.next_ready() {
                            Some(next) => Some(next),
                            None => break,
                        };
                    }
                }
                Some(report) = self.sender.reports.recv() => {
                    self.books.on_report(&report, Instant::now());
                    dirty = true;
                }
                _ = renew.tick() => self.held.renew_all().await,
                _ = housekeeping.tick() => dirty |= self.books.expire(Instant::now()),
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

    /// One planning round (`Books::plan`) and its IO; returns whether another is needed
    /// soon (the sender was full).
    #[tracing::instrument(level = "debug", skip(self), fields(block = self.projection.view().block))]
    async fn step(&mut self) -> bool {
        let mut changes = std::mem::replace(&mut self.changes, Changes::none());
        changes.merge(self.projection.take_changes());
        let view = self.projection.view();
        let applied = self.feed.applied;

        // Claims on jobs placed or settled for good are done.
        let final_block = self.projection.final_block();
        for claim in self
            .held
            .take_done(applied, view.block, final_block, &changes, |job| {
                view.open_job(job).is_some()
            })
        {
            if self.books.released(claim.job) {
                delete_explanation(&self.explanations, claim.job).await;
            }
            claim.release().await;
        }
        metrics::claimed_jobs(self.held.len());
        self.books.sync(view);
        if self.held.is_empty() {
            // The planner has not seen these yet.
            self.changes = changes;
            return false;
        }

        let round = self
            .books
            .plan(&mut self.planner, view, &changes, &self.held);
        let mut again = false;
        let mut assigned = 0;
        for call in round.calls {
            if !self.sender.try_send(Call::Assign(call.clone())) {
                again = true;
                continue;
            }
            for job in self.books.sent(&call) {
                delete_explanation(&self.explanations, job).await;
            }
            for Assign { job, node, .. } in call {
                assigned += 1;
                if let Some(received) = self.held.received(job) {
                    metrics::event_to_assign(received.elapsed());
                }
                tracing::info!(job_id = job, node_id = node, "assigning");
            }
        }
        metrics::decisions("assign", assigned);
        metrics::decisions("unplaceable", round.explanations.len() as u64);

        for pending in round.explanations {
            let job = pending.job_id;
            let payload = serde_json::to_vec(&pending).expect("explanations serialize");
            match self.explanations.put(job.to_string(), payload.into()).await {
                Ok(_) => {
                    metrics::explanations_written();
                    tracing::debug!(job_id = job, summary = %pending.summary, "job cannot be placed");
                    self.books.published(pending);
                }
                Err(e) => tracing::warn!(job_id = job, error = %e, "writing an explanation"),
            }
        }
        let by_reason = self.books.pending_by_reason();
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
