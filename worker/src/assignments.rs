//! The assignment loop: pull the node's next assignment when a slot is free, run each job
//! in its own task, and acknowledge it by the job's outcome.
//!
//! Assignments come from the durable consumer `gantry_<chain>_worker_<node>`, filtered to
//! `gantry.<chain>.ev.JobAssigned.<node>`. A message stays unacknowledged while its job
//! runs (kept alive with in-progress acks), so a worker that dies gets it redelivered
//! when it comes back; the chain check then decides whether to run it again.

use std::collections::HashMap;
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream;
use futures::StreamExt;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::GantryEvent;
use gantry_protocol::{names, storage};
use tokio::sync::futures::Notified;
use tokio::sync::{Mutex as AsyncMutex, Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::instrument;

use crate::claim::Claimed;
use crate::error::WorkerError;
use crate::health::{HEALTH_INTERVAL, Health};
use crate::job::{Assignment, Ctx, Outcome, Stop, StopReason};
use crate::metrics;

/// The stop signals of the running jobs, by (job id, attempt).
pub(crate) type Stops = Arc<AsyncMutex<HashMap<(u64, u8), Stop>>>;

/// The jobs running on this node: their stop signals and their tasks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Running {
    pub(crate) stops: Stops,
    tasks: TaskTracker,
    /// Notified each time a job's task ends.
    ended: Arc<Notify>,
    /// Fired when the worker goes down without the shutdown drain: every job task is
    /// dropped where it is.
    abort: CancellationToken,
}

impl Running {
    fn spawn(&self, job: impl Future<Output = ()> + Send + 'static) {
        // The token is dropped before `ended` is notified, so that `len` no longer counts
        // the job when the waiters look.
        let token = self.tasks.token();
        let ended = self.ended.clone();
        let abort = self.abort.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = job => {}
                () = abort.cancelled() => {}
            }
            drop(token);
            ended.notify_waiters();
        });
    }

    /// Jobs whose task has not ended.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Completes when a job's task ends.
    pub(crate) fn ended(&self) -> Notified<'_> {
        self.ended.notified()
    }

    /// Waits for every job's task to end (no more are started).
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

    /// Drops every job's task where it is (their messages are redelivered later).
    pub(crate) fn abort(&self) {
        self.abort.cancel();
    }
}

/// What the assignment loop hands each job.
#[derive(Debug)]
pub(crate) struct Assignments {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) health: Arc<Health>,
    pub(crate) running: Running,
    pub(crate) claimed: Arc<Claimed>,
    pub(crate) max_concurrent: usize,
}

impl Assignments {
    /// Takes assignments until `shutdown` fires (`Ok`) or the consumer fails.
    pub(crate) async fn run(&self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let mut messages = self.subscribe().await?;
        let slots = Arc::new(Semaphore::new(self.max_concurrent));
        tracing::info!(node_id = self.ctx.node_id, "taking work");
        loop {
            // A free slot and a healthy node before the next assignment is pulled.
            let permit = tokio::select! {
                () = shutdown.cancelled() => break,
                permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            };
            let message = tokio::select! {
                () = shutdown.cancelled() => break,
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
            if self
                .take(message, received, permit, shutdown)
                .await
                .is_break()
            {
                break;
            }
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

    /// Starts the job `message` assigns, unless it runs already; `Break` when the worker
    /// shuts down while the node is unhealthy.
    async fn take(
        &self,
        message: jetstream::Message,
        received: Instant,
        permit: OwnedSemaphorePermit,
        shutdown: &CancellationToken,
    ) -> ControlFlow<()> {
        let assignment = match parse_assignment(&message.payload, received) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, subject = %message.subject, "not an assignment; skipping it");
                let _ = message.ack().await;
                return ControlFlow::Continue(());
            }
        };
        let key = (assignment.job_id, assignment.attempt);
        if self.running.stops.lock().await.contains_key(&key) {
            // A redelivery of a job this worker is running: its task acknowledges it.
            tracing::debug!(job_id = key.0, attempt = key.1, "already running");
            return ControlFlow::Continue(());
        }
        // An unhealthy node starts nothing: the assignment waits, kept alive, until the
        // node recovers (its heartbeats stop meanwhile, so no more work is sent).
        if !self.health.is_healthy() && !wait_until_healthy(&self.health, shutdown, &message).await
        {
            let _ = message.ack_with(jetstream::AckKind::Nak(None)).await;
            return ControlFlow::Break(());
        }
        let stop = Stop::default();
        self.running.stops.lock().await.insert(key, stop.clone());
        // Running now: it counts against claim mode's capacity as such, no longer as a claim.
        self.claimed.taken_up(assignment.job_id);
        self.running.spawn(run_job(
            self.ctx.clone(),
            self.health.clone(),
            self.running.stops.clone(),
            message,
            assignment,
            stop,
            permit,
        ));
        ControlFlow::Continue(())
    }
}

/// One job's task: runs it with its message kept alive, then acknowledges the message
/// by the outcome. The slot (`_permit`) is free again when it returns.
#[instrument(
    name = "job",
    skip_all,
    fields(node_id = ctx.node_id, job_id = assignment.job_id, attempt = assignment.attempt)
)]
async fn run_job(
    ctx: Arc<Ctx>,
    health: Arc<Health>,
    stops: Stops,
    message: jetstream::Message,
    assignment: Assignment,
    stop: Stop,
    _permit: OwnedSemaphorePermit,
) {
    metrics::job_started();
    let outcome = tokio::select! {
        outcome = ctx.run(assignment, stop) => outcome,
        () = keep_alive(&message) => unreachable!("the keep-alive loop never ends"),
    };
    stops
        .lock()
        .await
        .remove(&(assignment.job_id, assignment.attempt));
    metrics::job_ended(outcome.label());
    tracing::info!(outcome = ?outcome, "job done");
    if let Some(fault) = outcome.node_fault() {
        health.fail(&fault.reason);
    }
    // Unanswered (the chain refused or stayed unreachable): redelivered, so the on-chain
    // check decides again.
    let answered = !matches!(outcome, Outcome::Unreported(_));
    if answered {
        let _ = message.double_ack().await;
    } else {
        let _ = message.ack_with(jetstream::AckKind::Nak(None)).await;
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

/// Waits for the node to be healthy, renewing `message`'s claim meanwhile; `false` when
/// the worker is shutting down first.
async fn wait_until_healthy(
    health: &Health,
    shutdown: &CancellationToken,
    message: &jetstream::Message,
) -> bool {
    // Checked every health interval too: a recovery between the check and the wait is
    // not missed for long.
    let mut renew = tokio::time::interval(HEALTH_INTERVAL);
    while !health.is_healthy() {
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = health.recovered() => {}
            _ = renew.tick() => {
                let _ = message.ack_with(jetstream::AckKind::Progress).await;
            }
        }
    }
    true
}

fn parse_assignment(payload: &[u8], received: Instant) -> Result<Assignment, String> {
    let envelope: EventEnvelope = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
    let typed = envelope.event.typed().map_err(|e| e.to_string())?;
    let GantryEvent::Market(JobMarket::JobMarketEvents::JobAssigned(assigned)) = typed else {
        return Err(format!("event {}", envelope.event.name));
    };
    Ok(Assignment {
        job_id: assigned.jobId,
        attempt: assigned.attempt,
        received,
    })
}
