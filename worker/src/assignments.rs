//! The assignment loop: take every assignment of the node as it arrives, check it
//! on-chain, and run it in its own task when a slot is free, or give it back at once when
//! not (no free slot, the node unhealthy or shutting down): a job held and not run would
//! cost the node more the longer it waits, and a slash if the node went inactive under it.
//!
//! Assignments come from the durable consumer `gantry_<chain>_worker_<node>`, filtered to
//! `gantry.<chain>.ev.JobAssigned.<node>`. A message stays unacknowledged while its job
//! runs (kept alive with in-progress acks), so a worker that dies gets it redelivered
//! when it comes back; the chain check then decides whether to run it again. An attempt
//! over on chain (past its `until`, or no longer this node's) is acknowledged and
//! dropped, never run again: nothing could be answered for it any more.
//!
//! ```text
//!  JobAssigned.<node> ──▶ (job, until) running already? skip ──▶ task: check on chain
//!      ──▶ admission(draining, health, slot) ──▶ run (slot held) │ give back at once (reject)
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::StreamExt;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::GantryEvent;
use gantry_protocol::{names, storage};
use tokio::sync::{Mutex as AsyncMutex, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::instrument;

use crate::claim::Claimed;
use crate::error::WorkerError;
use crate::fault::FaultClass;
use crate::health::Health;
use crate::job::{Assignment, Ctx, GiveBack, Outcome, Stop, StopReason};
use crate::metrics;

/// How long an assignment whose answer could not be sent waits before it is redelivered
/// (and the chain asked again).
const UNREPORTED_RETRY: Duration = Duration::from_secs(5);

/// The stop signals of the assignments being handled, by (job id, the attempt's end).
pub(crate) type Stops = Arc<AsyncMutex<HashMap<(u64, u64), Stop>>>;

/// The assignments this node is handling: their stop signals and their tasks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Running {
    pub(crate) stops: Stops,
    tasks: TaskTracker,
    /// Fired when the worker goes down without the shutdown drain: every task is
    /// dropped where it is.
    abort: CancellationToken,
}

impl Running {
    fn spawn(&self, job: impl Future<Output = ()> + Send + 'static) {
        let abort = self.abort.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = job => {}
                () = abort.cancelled() => {}
            }
        });
    }

    /// Assignments whose task has not ended: jobs the node holds.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Waits until no assignment's task is left.
    pub(crate) async fn wait(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Asks every running job to stop.
    pub(crate) async fn stop_all(&self, reason: StopReason) {
        for stop in self.stops.lock().await.values() {
            stop.stop(reason);
        }
    }

    /// Drops every task where it is (their messages are redelivered later).
    pub(crate) fn abort(&self) {
        self.abort.cancel();
    }
}

/// Whether a job the chain assigned to this node runs now, or is given back at once and
/// why: nothing starts while the worker is draining for shutdown or the node is
/// unhealthy, and no more jobs run than the node takes at once (`capacity`, the smaller
/// of its on-chain `maxConcurrentJobs` and the config's). Pure.
pub(crate) fn admission<P>(
    draining: bool,
    unhealthy: Option<String>,
    slot: Option<P>,
    capacity: usize,
) -> Result<P, GiveBack> {
    if draining {
        return Err(GiveBack::ShuttingDown);
    }
    if let Some(why) = unhealthy {
        return Err(GiveBack::Unhealthy(why));
    }
    slot.ok_or(GiveBack::OverCapacity { capacity })
}

/// The assignment loop and what it hands each assignment.
#[derive(Debug)]
pub(crate) struct Assignments {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) health: Arc<Health>,
    pub(crate) running: Running,
    pub(crate) claimed: Arc<Claimed>,
    /// One permit per job the node runs at once.
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) capacity: usize,
}

impl Assignments {
    /// Takes assignments until `closed` fires (`Ok`) or the consumer fails. Once
    /// `draining` fires (the worker shuts down) it goes on taking them, to give each back
    /// at once while the node is still active.
    pub(crate) async fn run(
        self,
        draining: CancellationToken,
        closed: CancellationToken,
    ) -> Result<(), WorkerError> {
        let mut messages = self.subscribe().await?;
        tracing::info!(
            node_id = self.ctx.node_id,
            capacity = self.capacity,
            "taking work"
        );
        loop {
            let message = tokio::select! {
                () = closed.cancelled() => break,
                message = messages.next() => message,
            };
            let received = Instant::now();
            let message = match message {
                Some(Ok(message)) => message,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "assignment consumer");
                    continue;
                }
                None => return Err(WorkerError::AssignmentsEnded),
            };
            self.take(message, received, &draining).await;
        }
        Ok(())
    }

    async fn subscribe(&self) -> Result<jetstream::consumer::pull::Stream, WorkerError> {
        let (chain_id, node_id) = (self.ctx.chain_id, self.ctx.node_id);
        let consumer_name = names::worker_consumer(chain_id, node_id);
        let consumer = self
            .ctx
            .chain_stream
            .get_or_create_consumer(
                &consumer_name,
                storage::assignment_consumer(chain_id, node_id),
            )
            .await
            .map_err(|e| WorkerError::nats(format!("consumer {consumer_name}"), e))?;
        consumer
            .messages()
            .await
            .map_err(|e| WorkerError::nats(format!("consumer {consumer_name}"), e))
    }

    /// Hands the assignment `message` names to a task of its own, unless it is being
    /// handled already (a redelivery).
    async fn take(
        &self,
        message: jetstream::Message,
        received: Instant,
        draining: &CancellationToken,
    ) {
        let redelivered = message.info().is_ok_and(|info| info.delivered > 1);
        let assignment = match parse_assignment(&message.payload, received, redelivered) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, subject = %message.subject, "not an assignment; skipping it");
                let _ = message.ack().await;
                return;
            }
        };
        let key = (assignment.job_id, assignment.until);
        let stop = {
            let mut stops = self.running.stops.lock().await;
            if stops.contains_key(&key) {
                // A redelivery of an assignment being handled: its task acknowledges it.
                tracing::debug!(job_id = key.0, until = key.1, "already handled");
                return;
            }
            let stop = Stop::default();
            stops.insert(key, stop.clone());
            stop
        };
        self.running.spawn(handle(
            Handler {
                ctx: self.ctx.clone(),
                health: self.health.clone(),
                claimed: self.claimed.clone(),
                slots: self.slots.clone(),
                capacity: self.capacity,
                draining: draining.clone(),
            },
            self.running.stops.clone(),
            message,
            assignment,
            stop,
        ));
    }
}

/// What an assignment's task needs besides its message.
struct Handler {
    ctx: Arc<Ctx>,
    health: Arc<Health>,
    claimed: Arc<Claimed>,
    slots: Arc<Semaphore>,
    capacity: usize,
    draining: CancellationToken,
}

impl Handler {
    /// Checks the assignment on-chain, then runs the job in a free slot or gives it back.
    async fn outcome(&self, assignment: Assignment, stop: Stop) -> Outcome {
        // A claimed job counts as claimed until it holds its slot or is known not to run:
        // until then claim mode must not see that slot as free (it would claim a second job
        // that finds no slot and is given back, barring the node from it).
        let awaited = Awaited {
            claimed: &self.claimed,
            job_id: assignment.job_id,
        };
        let held = match self.ctx.check(assignment).await {
            Ok(Some(held)) => held,
            Ok(None) => return Outcome::NotOurs,
            Err(f) => return Outcome::Unreported(f),
        };
        // Still Assigned here, but past its `until`: the market refuses any answer, and
        // running it would only be refused again (a keeper reclaims it).
        match self.ctx.past(assignment.until).await {
            Ok(true) => return Outcome::Expired,
            Ok(false) => {}
            Err(f) => return Outcome::Unreported(f),
        }
        let slot: Option<OwnedSemaphorePermit> = self.slots.clone().try_acquire_owned().ok();
        drop(awaited);
        match admission(
            self.draining.is_cancelled(),
            self.health.problem(),
            slot,
            self.capacity,
        ) {
            Ok(slot) => {
                metrics::job_started();
                let outcome = self.ctx.run(held, stop, slot).await;
                metrics::job_stopped();
                outcome
            }
            Err(why) => self.ctx.give_back_now(held, why).await,
        }
    }
}

/// A claimed job whose assignment is being admitted; it stops counting as claimed when
/// dropped, on every way out of the admission.
struct Awaited<'a> {
    claimed: &'a Claimed,
    job_id: u64,
}

impl Drop for Awaited<'_> {
    fn drop(&mut self) {
        self.claimed.taken_up(self.job_id);
    }
}

/// One assignment's task: handles it with its message kept alive, then acknowledges the
/// message by the outcome.
#[instrument(
    name = "job",
    skip_all,
    fields(node_id = handler.ctx.node_id, job_id = assignment.job_id, until = assignment.until)
)]
async fn handle(
    handler: Handler,
    stops: Stops,
    message: jetstream::Message,
    assignment: Assignment,
    stop: Stop,
) {
    let outcome = tokio::select! {
        outcome = handler.outcome(assignment, stop) => outcome,
        () = keep_alive(&message) => unreachable!("the keep-alive loop never ends"),
    };
    // Unanswered (the chain refused or stayed unreachable): redelivered a little later
    // (below), so the on-chain check decides again; unless the attempt is over on chain
    // (an answer refused past `until`, the job taken away), which no answer can change:
    // left unacknowledged, its message would run the job again and again.
    let outcome = match outcome {
        Outcome::Unreported(f) => match handler.ctx.attempt_over(assignment).await {
            Ok(true) => {
                tracing::warn!(error = %f, "the attempt is over on chain unanswered: dropping it");
                if f.class == FaultClass::Node {
                    handler.health.fail(&f.reason);
                }
                Outcome::Expired
            }
            _ => Outcome::Unreported(f),
        },
        outcome => outcome,
    };
    stops
        .lock()
        .await
        .remove(&(assignment.job_id, assignment.until));
    metrics::job_outcome(outcome.label());
    match &outcome {
        Outcome::NotOurs => tracing::debug!("not assigned here (any more)"),
        outcome => tracing::info!(?outcome, "job done"),
    }
    if let Some(fault) = outcome.node_fault() {
        handler.health.fail(&fault.reason);
    }
    if matches!(outcome, Outcome::Unreported(_)) {
        let _ = message
            .ack_with(jetstream::AckKind::Nak(Some(UNREPORTED_RETRY)))
            .await;
    } else {
        let _ = message.double_ack().await;
    }
}

/// Renews the message's claim while its job runs; never ends.
async fn keep_alive(message: &jetstream::Message) {
    let mut tick = tokio::time::interval(storage::ASSIGNMENT_ACK_WAIT / 3);
    tick.tick().await;
    loop {
        tick.tick().await;
        let _ = message.ack_with(jetstream::AckKind::Progress).await;
    }
}

fn parse_assignment(
    payload: &[u8],
    received: Instant,
    redelivered: bool,
) -> Result<Assignment, String> {
    let envelope: EventEnvelope = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
    let typed = envelope.event.typed().map_err(|e| e.to_string())?;
    let GantryEvent::Market(JobMarket::JobMarketEvents::JobAssigned(assigned)) = typed else {
        return Err(format!("event {}", envelope.event.name));
    };
    Ok(Assignment {
        job_id: assigned.jobId,
        until: assigned.until.to::<u64>(),
        block: envelope.block_number,
        received,
        redelivered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_runs_only_in_a_free_slot_of_a_healthy_node_that_is_not_draining() {
        assert_eq!(admission(false, None, Some("slot"), 2), Ok("slot"));
        assert_eq!(
            admission::<()>(false, None, None, 2),
            Err(GiveBack::OverCapacity { capacity: 2 })
        );
        assert_eq!(
            admission(false, Some("disk full".into()), Some(()), 2),
            Err(GiveBack::Unhealthy("disk full".into()))
        );
        // Draining comes first: nothing new starts on the way out.
        assert_eq!(
            admission(true, Some("disk full".into()), Some(()), 2),
            Err(GiveBack::ShuttingDown)
        );
    }
}
