//! The worker process: start-up (`node`), the heartbeat and the health check (`health`),
//! claim mode (`claim`), the assignment loop (`assignments`) and the graceful shutdown
//! (`shutdown`), each its own module; this one runs them in order.

use std::sync::Arc;
use std::time::Duration;

use alloy::signers::local::PrivateKeySigner;
use tokio::sync::mpsc;
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
    /// Receives (job id, time from the assignment message to the container running).
    pub started: Option<mpsc::UnboundedSender<(u64, Duration)>>,
    /// Receives the node id once the node is registered.
    pub node_id: Option<tokio::sync::oneshot::Sender<u64>>,
}

/// Runs the worker until `shutdown` fires.
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
    let health = Arc::new(Health::new());
    metrics::healthy(true);

    // Heartbeats stop last: they run until every job has been answered.
    let heartbeats_done = CancellationToken::new();
    let heartbeat = tokio::spawn(health::heartbeat_loop(
        ctx.chain.clone(),
        ctx.node_id,
        config.jobs.heartbeat_interval,
        health.clone(),
        heartbeats_done.clone(),
    ));
    let health_task = tokio::spawn(health::health_loop(
        ctx.executor.clone(),
        config.work_dir.clone(),
        health.clone(),
        heartbeats_done.clone(),
    ));

    let max_concurrent = usize::from(config.jobs.max_concurrent);
    let running = Running::default();
    let claimed = Arc::new(Claimed::default());
    let claimer = config.jobs.auto_accept.then(|| {
        let claimer = Claimer {
            ctx: ctx.clone(),
            capabilities,
            min_payment: config.jobs.auto_accept_min_payment,
            capacity: Capacity {
                max: max_concurrent,
                running: running.stops.clone(),
                claimed: claimed.clone(),
                health: health.clone(),
            },
        };
        tokio::spawn(claimer.run(shutdown.clone()))
    });

    let assignments = Assignments {
        ctx: ctx.clone(),
        health,
        running: running.clone(),
        claimed,
        max_concurrent,
    };
    if let Err(e) = assignments.run(&shutdown).await {
        // Down without the drain: the jobs stop where they are, unanswered; their
        // messages are redelivered to the next run.
        running.abort();
        return Err(e);
    }
    let background = Background {
        heartbeats_done,
        heartbeat,
        health: health_task,
        claimer,
    };
    shutdown::drain(&ctx, &running, background, config.jobs.shutdown_grace).await;
    Ok(())
}
