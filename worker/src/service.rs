//! The worker process: start-up (`node`), the heartbeat and the health check (`health`),
//! claim mode (`claim`), the assignment loop (`assignments`) and the graceful shutdown
//! (`shutdown`), each its own module; this one runs them in order.

use std::sync::Arc;

use alloy::signers::local::PrivateKeySigner;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::assignments::{Assignments, Running};
pub use crate::claim::claimable;
use crate::claim::{Capacity, Claimed, Claimer};
use crate::config::Config;
pub use crate::error::WorkerError;
use crate::health::{self, Health};
use crate::metrics;
use crate::node::{self, Node};
use crate::shutdown::{self, Background};

/// Hooks for tests and benchmarks.
#[derive(Debug, Default)]
pub struct Hooks {
    /// Receives each job's start: the time from its assignment message to its container
    /// or module running, and its steps.
    pub started: Option<mpsc::UnboundedSender<crate::job::Started>>,
    /// Receives the node id once the node is registered.
    pub node_id: Option<tokio::sync::oneshot::Sender<u64>>,
}

/// Runs the worker until `shutdown` fires, then drains it (see `shutdown`).
pub async fn run(
    config: Config,
    signer: PrivateKeySigner,
    shutdown: CancellationToken,
    mut hooks: Hooks,
) -> Result<(), WorkerError> {
    let Some(Node { ctx, capabilities }) =
        node::start(&config, signer, &shutdown, &mut hooks).await?
    else {
        return Ok(());
    };
    // The slots' spaces made ahead are released however the worker ends.
    let _spaces = ctx.spaces.closing();
    // The first job is not the one to wait for the validator's grammar to compile.
    gantry_protocol::spec::JobSpec::prepare_validator();
    let health = Arc::new(Health::new());
    metrics::healthy(true);
    // The node runs at once what both the chain and its provider allow; the matcher
    // respects the first, and the excess of either is given back at once.
    let capacity = usize::from(
        (config.jobs.max_concurrent)
            .min(capabilities.maxConcurrentJobs)
            .max(1),
    );
    let slots = Arc::new(Semaphore::new(capacity));
    let running = Running::default();

    // Heartbeats stop last: they run until every job has been answered.
    let heartbeats_done = CancellationToken::new();
    let (heartbeat, health_task) =
        spawn_liveness(&config, &ctx, &health, &running, &heartbeats_done);

    let claimed = Arc::new(Claimed::default());
    let claimer = config.jobs.auto_accept.then(|| {
        let claimer = Claimer {
            ctx: ctx.clone(),
            capabilities,
            min_payment: config.jobs.auto_accept_min_payment,
            capacity: Capacity {
                slots: slots.clone(),
                claimed: claimed.clone(),
                health: health.clone(),
            },
        };
        tokio::spawn(claimer.run(shutdown.clone()))
    });

    // Verified jobs' seats (WASM, and Docker where the node opted in): their own loop,
    // one seat at a time. A seat's message stays unacknowledged until it is revealed, so
    // one cut short by a shutdown is taken up again by the next run, from its seal record.
    let seat_tasks = tokio_util::task::TaskTracker::new();
    let seats = ctx.serves_seats().then(|| {
        let seats = crate::seats::Seats {
            ctx: ctx.clone(),
            store: crate::seats::SealStore::new(&ctx.work_dir),
            slots: Arc::new(Semaphore::new(1)),
            tasks: seat_tasks.clone(),
        };
        let stop = shutdown.clone();
        tokio::spawn(async move {
            if let Err(e) = seats.run(stop.clone()).await {
                // A node in the pool that serves no seats would be drawn and slashed:
                // the worker stops (and its supervisor starts it again).
                tracing::error!(error = %e, "the seats loop ended: stopping the worker");
                stop.cancel();
            }
        })
    });
    let _seats = seats.map(AbortOnDrop);
    let assignments = Assignments {
        ctx: ctx.clone(),
        health,
        running: running.clone(),
        claimed,
        slots,
        capacity,
    };
    let close_assignments = CancellationToken::new();
    let mut assignments =
        tokio::spawn(assignments.run(shutdown.clone(), close_assignments.clone()));
    tokio::select! {
        () = shutdown.cancelled() => {}
        ended = &mut assignments => {
            // Down without the drain: the jobs stop where they are, unanswered; their
            // messages are redelivered to the next run.
            running.abort();
            heartbeats_done.cancel();
            return match ended {
                Ok(Ok(())) => Err(WorkerError::AssignmentsEnded),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(WorkerError::Panicked(e.to_string())),
            };
        }
    }
    let background = Background {
        heartbeats_done,
        heartbeat,
        health: health_task,
        claimer,
        assignments,
        close_assignments,
    };
    // The seats first: one not committed yet is given back, one committed leaves its
    // record for the next run; none is left Seated on a node about to be marked inactive.
    seat_tasks.close();
    if tokio::time::timeout(config.jobs.shutdown_grace, seat_tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("seats still running at the end of the shutdown grace");
    }
    shutdown::drain(&ctx, &running, background, config.jobs.shutdown_grace).await
}

/// The heartbeat and the health check, until `done` fires; the heartbeat keeps beating
/// while `running` holds jobs.
fn spawn_liveness(
    config: &Config,
    ctx: &crate::job::Ctx,
    health: &Arc<Health>,
    running: &Running,
    done: &CancellationToken,
) -> (tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>) {
    let holds_jobs = {
        let running = running.clone();
        move || running.len() > 0
    };
    let heartbeat = tokio::spawn(health::heartbeat_loop(
        ctx.chain.clone(),
        ctx.node_id,
        config.jobs.heartbeat_interval,
        health.clone(),
        holds_jobs,
        ctx.serves_seats(),
        done.clone(),
    ));
    let health_task = tokio::spawn(health::health_loop(
        ctx.executor.clone(),
        config.work_dir.clone(),
        health.clone(),
        done.clone(),
    ));
    (heartbeat, health_task)
}

/// A task aborted when this is dropped (the seats loop, when the worker ends).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
