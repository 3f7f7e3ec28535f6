//! Claim mode (`auto_accept`): watch new and requeued jobs and claim those the node fits,
//! reading each job's terms and state from the chain (the claim passes them).
//! The node's two durable consumers (`storage::claim_consumer`) each hold one message at
//! a time: while the node has no free slot or is unhealthy the message is handed back for
//! later, so a job is considered when the node could take it, and a restart goes on where
//! it stopped. A claimed job arrives as an assignment like any other.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::time::SystemTime;

use alloy::primitives::U256;
use async_nats::jetstream;
use futures::StreamExt;
use futures::stream::SelectAll;
use gantry_protocol::bindings::NodeRegistry;
use gantry_protocol::eligibility::{self, Capabilities};
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::market::Job;
use gantry_protocol::spec::{JobKind, JobSpec};
use gantry_protocol::status::JobStatus;
use gantry_protocol::{names, storage};
use gantry_runtime::market::ReadJobError;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::instrument;

use crate::chain::ChainError;
use crate::health::Health;
use crate::job::{Ctx, clock};
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
        if !self.capacity.can_take_one() {
            let _ = message
                .ack_with(jetstream::AckKind::Nak(Some(CLAIM_RETRY)))
                .await;
            return;
        }
        self.consider_job(job_id, &message).await;
    }

    #[instrument(name = "claim", skip_all, fields(job_id))]
    async fn consider_job(&self, job_id: u64, message: &jetstream::Message) {
        let ack = match self.chain_view(job_id).await {
            Ok(Some(job)) if worth_claiming(&self.ctx, job_id, &job).await => {
                self.claim(job_id, job).await
            }
            // Not open, not a fit, barred, or not worth it: nothing to do, now or later (a
            // requeue is a new event).
            Ok(_) => jetstream::AckKind::Ack,
            Err(e) => {
                tracing::debug!(error = %e, "claim mode: reading the job");
                jetstream::AckKind::Nak(Some(CLAIM_RETRY))
            }
        };
        let _ = message.ack_with(ack).await;
    }

    /// The job as the chain holds it, when the node may claim it: Open, a fit, paying
    /// enough, an attempt that fits before its deadline, and the node not barred from it.
    async fn chain_view(&self, job_id: u64) -> Result<Option<Job>, ChainError> {
        let chain = &self.ctx.chain;
        let job = match chain.read_job(job_id).await {
            Ok(job) => job,
            Err(ChainError::ReadJob(ReadJobError::NotPosted(_))) => return Ok(None),
            Err(e) => return Err(e),
        };
        let now = clock::chain_now(chain.now().await?, SystemTime::now());
        if !claimable(&job, &self.capabilities, self.min_payment, now) {
            return Ok(None);
        }
        if job.state.barred > 0 && chain.is_barred(job_id, self.ctx.node_id).await? {
            return Ok(None);
        }
        Ok(Some(job))
    }

    /// Sends the claim; how to acknowledge the message that announced the job.
    async fn claim(&self, job_id: u64, mut job: Job) -> jetstream::AckKind {
        // Counted before it is sent: its assignment can arrive (and be taken up) before
        // the claim's receipt does.
        self.capacity.claimed.add(job_id);
        let claimed = self
            .ctx
            .chain
            .claim(job_id, self.ctx.node_id, &mut job)
            .await;
        if claimed.is_err() {
            self.capacity.claimed.taken_up(job_id);
        }
        match claimed {
            Ok(()) => {
                tracing::info!(until = job.state.until, "claimed");
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

/// What claim mode may take on: the node's free slots less the jobs claimed but not in a
/// slot yet (each will take a slot when its assignment is admitted; one that found none
/// would be given back).
#[derive(Debug)]
pub(crate) struct Capacity {
    /// The assignment loop's slots: one permit per job the node runs at once.
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) claimed: Arc<Claimed>,
    pub(crate) health: Arc<Health>,
}

impl Capacity {
    fn can_take_one(&self) -> bool {
        self.health.is_healthy() && self.slots.available_permits() > self.claimed.outstanding()
    }
}

/// Jobs claimed whose assignment has not taken its slot yet (not pulled, or pulled and
/// still being checked): each counts as a slot taken, so that claim mode claims no more
/// than the node can run.
#[derive(Debug, Default)]
pub(crate) struct Claimed(std::sync::Mutex<HashMap<u64, Instant>>);

impl Claimed {
    /// A claim's assignment that has not arrived after this long never will (the claim
    /// was reorganised away): it stops counting.
    const FORGET_AFTER: Duration = Duration::from_secs(60);

    fn add(&self, job_id: u64) {
        self.jobs().insert(job_id, Instant::now());
    }

    /// The job's assignment holds its slot or will not run, or its claim failed: it no
    /// longer waits.
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

/// Whether the job's spec is one the provider takes: its kind (training, inference), and
/// for a refereed job everything a verified run is admitted on (`Ctx::admit_verified`:
/// the profile, the fit rule, the output, the reveal window, the node's speed, the module
/// compiled and linked) and the node's bucket of sealed results: all checked before the
/// claim, since a claimed job given back after the grace is charged.
async fn worth_claiming(ctx: &Ctx, job_id: u64, job: &Job) -> bool {
    if job.terms.verification.is_verified() {
        return ctx.sealed_results && ctx.admit_verified(job_id, job, None).await.is_ok();
    }
    let Ok(bytes) = ctx.spec_bytes(job_id, job.terms.spec_hash).await else {
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

/// Whether an Open job fits the node, pays enough and has room for an attempt started at
/// chain time `now` (the chain re-checks all of it, and the bar, on `claim`).
pub fn claimable(
    job: &Job,
    node: &NodeRegistry::NodeCapabilities,
    min_payment: U256,
    now: u64,
) -> bool {
    job.state.status == JobStatus::Open
        // A replicated job's seats are drawn, never claimed; a refereed job's provider
        // claims it through the tier's own call (`claimRefereed`).
        && matches!(
            job.terms.verification.tier,
            gantry_protocol::market::Verification::NONE_TIER
                | gantry_protocol::market::Verification::REFEREED
        )
        && U256::from(job.terms.bounty) >= min_payment
        && job.terms.fits(now)
        && eligibility::capable(&job.terms.requirements, &Capabilities::from(node))
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, B256};
    use gantry_protocol::eligibility::Requirements;
    use gantry_protocol::market::{Policy, State, Terms};

    use super::*;

    fn open_job(requirements: Requirements, bounty: u128, deadline: u64) -> Job {
        let terms = Terms {
            submitter: Address::ZERO,
            bounty,
            spec_hash: B256::ZERO,
            requirements,
            deadline,
            policy: 1,
            verification: gantry_protocol::market::Verification::NONE,
        };
        Job {
            state: State::posted(&terms, &Policy::default()),
            terms,
        }
    }

    #[test]
    fn a_cpu_job_that_names_vram_is_claimable_only_with_that_vram_as_on_chain() {
        // The chain checks VRAM whatever the GPU count (`_checkEligible`); the worker's old
        // copy skipped it for CPU jobs and claimed jobs the chain then refused.
        let job = open_job(
            Requirements {
                min_vram_mib: 1_024,
                max_price_per_gpu_hour: 10,
                max_runtime: 600,
                ..Requirements::default()
            },
            100,
            10_000,
        );
        let mut node = NodeRegistry::NodeCapabilities {
            vramMiB: 512,
            engines: gantry_protocol::eligibility::Engines::DOCKER.0,
            ..Default::default()
        };
        assert!(!claimable(&job, &node, U256::ZERO, 1_000));
        node.vramMiB = 1_024;
        assert!(claimable(&job, &node, U256::ZERO, 1_000));
        assert!(
            !claimable(&job, &node, U256::from(101), 1_000),
            "pays too little"
        );
        assert!(
            !claimable(&job, &node, U256::ZERO, 9_401),
            "an attempt started now would end after the deadline"
        );
        let mut assigned = job;
        assigned.state.status = JobStatus::Assigned;
        assert!(!claimable(&assigned, &node, U256::ZERO, 1_000));
    }

    #[test]
    fn a_refereed_job_is_claimed_and_a_replicated_one_never() {
        let mut job = open_job(
            Requirements {
                max_runtime: 600,
                engine: 1,
                ..Requirements::default()
            },
            100,
            10_000,
        );
        let node = NodeRegistry::NodeCapabilities {
            engines: gantry_protocol::eligibility::Engines::WASM.0,
            cpuCores: 1,
            ..Default::default()
        };
        assert!(claimable(&job, &node, U256::ZERO, 1_000));
        job.terms.verification = gantry_protocol::market::Verification {
            tier: gantry_protocol::market::Verification::REFEREED,
            size: 3,
            quorum: 0,
            reveal_window: 60,
        };
        assert!(claimable(&job, &node, U256::ZERO, 1_000), "claimRefereed");
        job.terms.verification.tier = gantry_protocol::market::Verification::REPLICATED;
        job.terms.verification.quorum = 2;
        assert!(
            !claimable(&job, &node, U256::ZERO, 1_000),
            "seats are drawn"
        );
    }

    #[test]
    fn claimed_jobs_hold_slots_until_their_assignment_is_pulled() {
        let capacity = Capacity {
            slots: Arc::new(Semaphore::new(2)),
            claimed: Arc::default(),
            health: Arc::new(Health::new()),
        };
        assert!(capacity.can_take_one());
        capacity.claimed.add(7);
        assert!(capacity.can_take_one(), "one slot left");
        capacity.claimed.add(8);
        assert!(!capacity.can_take_one(), "both slots promised");
        // Job 7's assignment is pulled: it runs now in a slot instead of being promised.
        capacity.claimed.taken_up(7);
        let running = capacity.slots.clone().try_acquire_owned().unwrap();
        assert!(!capacity.can_take_one(), "one running, one promised");
        capacity.claimed.taken_up(8);
        assert!(capacity.can_take_one());
        drop(running);
        capacity.health.fail("disk full");
        assert!(!capacity.can_take_one(), "an unhealthy node takes nothing");
    }
}
