//! Claim mode (`auto_accept`): watch new and requeued jobs and claim those the node fits.
//! The node's two durable consumers (`storage::claim_consumer`) each hold one message at
//! a time: while the node has no free slot or is unhealthy the message is handed back for
//! later, so a job is considered when the node could take it, and a restart goes on where
//! it stopped. A claimed job arrives as an assignment like any other.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::primitives::U256;
use async_nats::jetstream;
use futures::StreamExt;
use futures::stream::SelectAll;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::{self, Capabilities, Requirements};
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::spec::{JobKind, JobSpec};
use gantry_protocol::status::JobStatus;
use gantry_protocol::{names, storage};
use tokio_util::sync::CancellationToken;
use tracing::instrument;

use crate::assignments::Stops;
use crate::health::Health;
use crate::job::Ctx;
use crate::metrics;

/// How long claim mode hands a job back for while the node cannot take it.
const CLAIM_RETRY: Duration = Duration::from_secs(5);

/// Claims the jobs the node fits until `shutdown` fires.
#[derive(Debug)]
pub(crate) struct Claimer {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) capabilities: NodeRegistry::NodeCapabilities,
    pub(crate) min_payment: U256,
    pub(crate) capacity: Capacity,
}

impl Claimer {
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let Some(mut messages) = self.subscribe().await else {
            return;
        };
        loop {
            let message = tokio::select! {
                () = shutdown.cancelled() => return,
                message = messages.next() => message,
            };
            match message {
                Some(Ok(message)) => self.consider(message).await,
                Some(Err(e)) => tracing::debug!(error = %e, "claim mode: pull"),
                None => return tracing::error!("claim mode: the consumers ended"),
            }
        }
    }

    /// Both claim consumers' messages as one stream; `None` (logged) when one cannot be
    /// opened.
    async fn subscribe(&self) -> Option<SelectAll<jetstream::consumer::pull::Stream>> {
        let (chain_id, node_id) = (self.ctx.chain_id, self.ctx.node_id);
        let mut feeds = Vec::new();
        for event in names::CLAIM_EVENTS {
            let name = names::claim_consumer(chain_id, node_id, event);
            let config = storage::claim_consumer(chain_id, node_id, event);
            let messages = match self
                .ctx
                .chain_stream
                .get_or_create_consumer(&name, config)
                .await
            {
                Ok(consumer) => consumer.messages().await,
                Err(e) => {
                    tracing::error!(consumer = %name, error = %e, "claim mode: no consumer");
                    return None;
                }
            };
            match messages {
                Ok(messages) => feeds.push(messages),
                Err(e) => {
                    tracing::error!(consumer = %name, error = %e, "claim mode: no consumer");
                    return None;
                }
            }
        }
        Some(futures::stream::select_all(feeds))
    }

    /// Claims the job `message` announces when the node can take it and it fits; hands
    /// the message back for later when the node is full or the chain did not answer.
    async fn consider(&self, message: jetstream::Message) {
        let job_id = serde_json::from_slice::<EventEnvelope>(&message.payload)
            .ok()
            .and_then(|envelope| envelope.event.key.parse::<u64>().ok());
        let Some(job_id) = job_id else {
            let _ = message.ack().await;
            return;
        };
        if !self.capacity.can_take_one().await {
            let _ = message
                .ack_with(jetstream::AckKind::Nak(Some(CLAIM_RETRY)))
                .await;
            return;
        }
        self.consider_job(job_id, &message).await;
    }

    #[instrument(name = "claim", skip_all, fields(job_id))]
    async fn consider_job(&self, job_id: u64, message: &jetstream::Message) {
        match self.ctx.chain.job(job_id).await {
            Ok(info)
                if claimable(&info, &self.capabilities, self.min_payment)
                    && kind_accepted(&self.ctx, job_id, &info).await =>
            {
                let ack = self.claim(job_id).await;
                let _ = message.ack_with(ack).await;
            }
            // Not open, not a fit, or not worth it: nothing to do, now or later (a requeue
            // is a new event).
            Ok(_) => {
                let _ = message.ack().await;
            }
            Err(e) => {
                tracing::debug!(error = %e, "claim mode: getJob");
                let _ = message
                    .ack_with(jetstream::AckKind::Nak(Some(CLAIM_RETRY)))
                    .await;
            }
        }
    }

    /// Sends the claim; how to acknowledge the message that announced the job.
    async fn claim(&self, job_id: u64) -> jetstream::AckKind {
        match self.ctx.chain.claim(job_id, self.ctx.node_id).await {
            Ok(()) => {
                self.capacity.claimed.add(job_id);
                tracing::info!("claimed");
                metrics::claim("claimed");
                jetstream::AckKind::Ack
            }
            // Unanswered: the job is considered again later.
            Err(e) if e.is_retryable() => {
                tracing::debug!(error = %e, "claim not sent");
                jetstream::AckKind::Nak(Some(CLAIM_RETRY))
            }
            // Refused (taken meanwhile, or the chain's checks said no).
            Err(e) => {
                tracing::debug!(error = %e, "claim refused");
                metrics::claim("refused");
                jetstream::AckKind::Ack
            }
        }
    }
}

/// What claim mode may take on: `max_concurrent` less the running jobs and the jobs
/// claimed but not started. (Not the slot semaphore: the assignment loop holds a permit
/// while it waits for the next assignment.)
#[derive(Debug)]
pub(crate) struct Capacity {
    pub(crate) max: usize,
    pub(crate) running: Stops,
    pub(crate) claimed: Arc<Claimed>,
    pub(crate) health: Arc<Health>,
}

impl Capacity {
    async fn can_take_one(&self) -> bool {
        let running = self.running.lock().await.len();
        self.health.is_healthy() && running + self.claimed.outstanding() < self.max
    }
}

/// Jobs claimed whose assignment the worker has not pulled yet: each counts as a slot
/// taken, so that claim mode claims no more than the node can run.
#[derive(Debug, Default)]
pub(crate) struct Claimed(std::sync::Mutex<HashMap<u64, Instant>>);

impl Claimed {
    /// A claim's assignment that has not arrived after this long never will (the claim
    /// was reorganised away): it stops counting.
    const FORGET_AFTER: Duration = Duration::from_secs(60);

    fn add(&self, job_id: u64) {
        self.jobs().insert(job_id, Instant::now());
    }

    pub(crate) fn taken_up(&self, job_id: u64) {
        self.jobs().remove(&job_id);
    }

    fn outstanding(&self) -> usize {
        let mut jobs = self.jobs();
        jobs.retain(|_, at| at.elapsed() < Self::FORGET_AFTER);
        jobs.len()
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        // Nothing panics while holding it; a poisoned map is still a valid map.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether the job's kind (training, inference) is one the provider takes.
async fn kind_accepted(ctx: &Ctx, job_id: u64, info: &JobMarket::JobInfo) -> bool {
    let Ok(bytes) = ctx.spec_bytes(job_id, info.specHash).await else {
        return false;
    };
    match JobSpec::from_slice(&bytes) {
        Ok(spec) => match spec.kind {
            JobKind::Training => ctx.settings.accept_training,
            JobKind::Inference => ctx.settings.accept_inference,
        },
        // A broken spec is not worth a claim (and a reject).
        Err(_) => false,
    }
}

/// Whether an Open job fits the node and pays enough (the chain re-checks on `claim`).
pub fn claimable(
    info: &JobMarket::JobInfo,
    node: &NodeRegistry::NodeCapabilities,
    min_payment: U256,
) -> bool {
    JobStatus::try_from(info.status) == Ok(JobStatus::Open)
        && U256::from(info.bounty) >= min_payment
        && eligibility::capable(
            &Requirements::from(&info.requirements),
            &Capabilities::from(node),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Stop;

    #[test]
    fn a_cpu_job_that_names_vram_is_claimable_only_with_that_vram_as_on_chain() {
        // The chain checks VRAM whatever the GPU count (`_checkEligible`); the worker's old
        // copy skipped it for CPU jobs and claimed jobs the chain then refused.
        let info = JobMarket::JobInfo {
            status: u8::from(JobStatus::Open),
            bounty: alloy::primitives::aliases::U96::from(100),
            requirements: JobMarket::JobRequirements {
                minGpuCount: 0,
                minVramMiB: 1_024,
                maxPricePerGpuHour: alloy::primitives::aliases::U96::from(10),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut node = NodeRegistry::NodeCapabilities {
            vramMiB: 512,
            ..Default::default()
        };
        assert!(!claimable(&info, &node, U256::ZERO));
        node.vramMiB = 1_024;
        assert!(claimable(&info, &node, U256::ZERO));
        assert!(!claimable(&info, &node, U256::from(101)), "pays too little");
        let assigned = JobMarket::JobInfo {
            status: u8::from(JobStatus::Assigned),
            ..info
        };
        assert!(!claimable(&assigned, &node, U256::ZERO));
    }

    #[tokio::test]
    async fn claimed_jobs_hold_slots_until_their_assignment_is_pulled() {
        let capacity = Capacity {
            max: 2,
            running: Arc::default(),
            claimed: Arc::default(),
            health: Arc::new(Health::new()),
        };
        assert!(capacity.can_take_one().await);
        capacity.claimed.add(7);
        assert!(capacity.can_take_one().await, "one slot left");
        capacity.claimed.add(8);
        assert!(!capacity.can_take_one().await, "both slots promised");
        // Job 7's assignment is pulled: it runs now instead of being promised.
        capacity.claimed.taken_up(7);
        capacity
            .running
            .lock()
            .await
            .insert((7, 1), Stop::default());
        assert!(!capacity.can_take_one().await, "one running, one promised");
        capacity.claimed.taken_up(8);
        assert!(capacity.can_take_one().await);
        capacity.health.fail("disk full");
        assert!(
            !capacity.can_take_one().await,
            "an unhealthy node takes nothing"
        );
    }
}
