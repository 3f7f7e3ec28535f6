//! How matcher replicas share the open jobs: a durable JetStream consumer over the
//! JobPosted and JobRequeued events. Each event is delivered to one replica, which holds
//! it unacknowledged while the job is open: holding it is the replica's claim on the job.
//! The holder renews its claims (in-progress acks) well within the consumer's ack wait;
//! when a replica dies, its claims lapse after the ack wait and the server redelivers them
//! to the others. A claim is acknowledged once the view shows the job placed or settled.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use async_nats::jetstream::{self, AckKind, consumer, message::Acker};
use futures::StreamExt;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::events::event_name;
use gantry_protocol::names;

use crate::error::StreamError;
use crate::view::Changes;

/// A replica's claim on one open job.
pub struct Claim {
    pub job: u64,
    /// Stream sequence of the event: the view decides about the claim once it has applied
    /// at least this far.
    pub sequence: u64,
    /// When this replica received it, for the event-to-assign metric.
    pub received: std::time::Instant,
    acker: Acker,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("job", &self.job)
            .field("sequence", &self.sequence)
            .finish_non_exhaustive()
    }
}

impl Claim {
    /// The job is placed or settled: nobody needs to hold it any more.
    pub async fn release(self) {
        if let Err(e) = self.acker.ack().await {
            tracing::warn!(job_id = self.job, error = %e, "acknowledging a claim");
        }
    }

    /// Keeps the claim from lapsing.
    pub async fn renew(&self) {
        if let Err(e) = self.acker.ack_with(AckKind::Progress).await {
            tracing::warn!(job_id = self.job, error = %e, "renewing a claim");
        }
    }

    /// Hands the job to another replica now (shutdown).
    pub async fn give_back(self) {
        if let Err(e) = self.acker.ack_with(AckKind::Nak(None)).await {
            tracing::warn!(job_id = self.job, error = %e, "giving a claim back");
        }
    }
}

/// The shared consumer's deliveries.
pub struct Claims {
    messages: consumer::pull::Stream,
}

impl std::fmt::Debug for Claims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claims").finish_non_exhaustive()
    }
}

impl Claims {
    /// Opens (creating on first use) the chain's shared matcher consumer.
    pub async fn open(
        js: &jetstream::Context,
        chain_id: u64,
        claim_ttl: std::time::Duration,
        max_claims: i64,
    ) -> Result<Self, StreamError> {
        let stream = js
            .get_stream(names::stream_name(chain_id))
            .await
            .map_err(|e| StreamError::nats("chain stream", e))?;
        let name = names::matcher_consumer(chain_id);
        let consumer: consumer::PullConsumer = stream
            .get_or_create_consumer(
                &name,
                consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    description: Some("open jobs shared by the matcher replicas".into()),
                    filter_subjects: vec![
                        names::event_filter(chain_id, event_name::<JobMarket::JobPosted>()),
                        names::event_filter(chain_id, event_name::<JobMarket::JobRequeued>()),
                    ],
                    deliver_policy: consumer::DeliverPolicy::All,
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: claim_ttl,
                    max_deliver: -1,
                    max_ack_pending: max_claims,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| StreamError::nats("matcher consumer", e))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| StreamError::nats("matcher consumer messages", e))?;
        Ok(Self { messages })
    }

    /// The next claim if one is already buffered (a pull brings many at once).
    pub fn next_ready(&mut self) -> Option<Result<Claim, StreamError>> {
        use futures::FutureExt;
        self.next().now_or_never().flatten()
    }

    /// The next claim; `None` when the consumer ended.
    pub async fn next(&mut self) -> Option<Result<Claim, StreamError>> {
        let message = match self.messages.next().await? {
            Ok(message) => message,
            Err(e) => return Some(Err(StreamError::nats("matcher consumer", e))),
        };
        Some(claim_of(message))
    }
}

fn claim_of(message: jetstream::Message) -> Result<Claim, StreamError> {
    let sequence = message
        .info()
        .map_err(|e| StreamError::nats("message info", e))?
        .stream_sequence;
    let subject = message.subject.to_string();
    let job = subject
        .rsplit('.')
        .next()
        .and_then(|key| key.parse::<u64>().ok())
        .ok_or_else(|| StreamError::BadMessage {
            sequence,
            reason: format!("no job id in the subject {subject}"),
        })?;
    let (_, acker) = message.split();
    Ok(Claim {
        job,
        sequence,
        received: std::time::Instant::now(),
        acker,
    })
}

/// The claims a replica holds, by job (a job may have been claimed by its posting and by a
/// requeue).
#[derive(Debug, Default)]
pub struct Held {
    by_job: BTreeMap<u64, Vec<Claim>>,
    /// The view's block when each held job was first seen no longer open.
    closed_at: HashMap<u64, u64>,
    /// Jobs claimed since the last `take_done` (their job may have closed already).
    fresh: HashSet<u64>,
}

impl crate::round::Holding for Held {
    fn holds(&self, job: u64) -> bool {
        self.by_job.contains_key(&job)
    }

    fn from(&self, from: u64) -> impl Iterator<Item = u64> + '_ {
        self.by_job
            .range(from..)
            .chain(self.by_job.range(..from))
            .map(|(job, _)| *job)
    }
}

impl Held {
    pub fn insert(&mut self, claim: Claim) {
        self.fresh.insert(claim.job);
        self.by_job.entry(claim.job).or_default().push(claim);
    }

    pub fn contains(&self, job: u64) -> bool {
        self.by_job.contains_key(&job)
    }

    pub fn len(&self) -> usize {
        self.by_job.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_job.is_empty()
    }

    /// When this replica first received a claim on `job`.
    pub fn received(&self, job: u64) -> Option<std::time::Instant> {
        self.by_job
            .get(&job)
            .and_then(|claims| claims.iter().map(|c| c.received).min())
    }

    /// Removes the claims the view has decided about for good: their job is no longer
    /// open (`still_open`), the view has applied their event (`applied`, its stream
    /// position), and the block where the view (at `block`) first saw the job closed is
    /// final (`final_block`). A claim is the only thing that makes a replica place a job:
    /// released at an assignment a reorganisation then undoes, the job would be open with
    /// nobody to place it until it expires. Held until final, a job reopened by a
    /// retraction is placed again by its holder.
    ///
    /// Only the jobs that can have closed are looked at: those the view `changed`, those
    /// claimed since the last call, and those seen closed before (waiting for finality or
    /// for their event).
    pub fn take_done(
        &mut self,
        applied: u64,
        block: u64,
        final_block: u64,
        changed: &Changes,
        still_open: impl Fn(u64) -> bool,
    ) -> Vec<Claim> {
        let jobs: Vec<u64> = if changed.all {
            self.by_job.keys().copied().collect()
        } else {
            let mut jobs: BTreeSet<u64> = changed
                .jobs
                .iter()
                .filter(|job| self.by_job.contains_key(job))
                .copied()
                .collect();
            jobs.extend(self.fresh.iter().copied());
            jobs.extend(self.closed_at.keys().copied());
            jobs.into_iter().collect()
        };
        self.fresh.clear();
        let mut done = Vec::new();
        for job in jobs {
            let Some(claims) = self.by_job.get_mut(&job) else {
                self.closed_at.remove(&job);
                continue;
            };
            if still_open(job) {
                self.closed_at.remove(&job);
                continue;
            }
            if *self.closed_at.entry(job).or_insert(block) > final_block {
                continue;
            }
            let (decided, waiting): (Vec<Claim>, Vec<Claim>) =
                claims.drain(..).partition(|c| c.sequence <= applied);
            done.extend(decided);
            *claims = waiting;
            if claims.is_empty() {
                self.by_job.remove(&job);
                self.closed_at.remove(&job);
            }
        }
        done
    }

    pub async fn renew_all(&self) {
        for claim in self.by_job.values().flatten() {
            claim.renew().await;
        }
    }

    pub async fn give_back_all(&mut self) {
        self.closed_at.clear();
        self.fresh.clear();
        for claim in std::mem::take(&mut self.by_job).into_values().flatten() {
            claim.give_back().await;
        }
    }
}
