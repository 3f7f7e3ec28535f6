//! A service's tasks under one supervisor: every task is tracked (a `TaskTracker`) so that
//! shutdown waits for all of them, and a critical task that ends — with an error, a panic,
//! or at all before shutdown — cancels the rest, and the service exits with its error.
//! (reth's `TaskExecutor::spawn_critical`, in a few lines.)

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The tasks of one service.
#[derive(Debug, Clone)]
pub struct Supervisor {
    tracker: TaskTracker,
    shutdown: CancellationToken,
    failure: Arc<Mutex<Option<anyhow::Error>>>,
}

impl Supervisor {
    /// Tasks that stop when `shutdown` fires (and fire it when a critical one ends).
    pub fn new(shutdown: CancellationToken) -> Self {
        Self {
            tracker: TaskTracker::new(),
            shutdown,
            failure: Arc::default(),
        }
    }

    /// The token every task should watch.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Runs `task`; when it ends, the service ends: its error or panic (the first one
    /// recorded) becomes the service's.
    pub fn spawn_critical<F, E>(&self, name: &'static str, task: F)
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<anyhow::Error> + Send + 'static,
    {
        let shutdown = self.shutdown.clone();
        let failure = Arc::clone(&self.failure);
        self.tracker.spawn(async move {
            // A panic is caught here, or the rest would never hear of it.
            let outcome = match AssertUnwindSafe(task).catch_unwind().await {
                Ok(outcome) => outcome.map_err(Into::into),
                Err(panic) => Err(anyhow::anyhow!("panicked: {}", panic_message(&*panic))),
            };
            if let Err(error) = outcome {
                let error = error.context(name);
                tracing::error!(
                    task = name,
                    error = format!("{error:#}"),
                    "critical task failed"
                );
                let mut first = failure
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                first.get_or_insert(error);
            } else if !shutdown.is_cancelled() {
                tracing::warn!(task = name, "critical task ended; stopping the service");
            }
            shutdown.cancel();
        });
    }

    /// Waits for every task to end (they end at shutdown); the first critical failure.
    pub async fn wait(self) -> anyhow::Result<()> {
        self.tracker.close();
        self.tracker.wait().await;
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        failure.map_or(Ok(()), Err)
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A supervisor of `shutdown` with one critical task that waits for it.
    fn waiting(shutdown: &CancellationToken) -> Supervisor {
        let tasks = Supervisor::new(shutdown.clone());
        let watcher = shutdown.clone();
        tasks.spawn_critical("waits", async move {
            watcher.cancelled().await;
            Ok::<(), anyhow::Error>(())
        });
        tasks
    }

    #[tokio::test]
    async fn a_failing_critical_task_cancels_the_others_and_is_the_error() {
        let shutdown = CancellationToken::new();
        let tasks = waiting(&shutdown);
        tasks.spawn_critical("fails", async { Err(anyhow::anyhow!("boom")) });
        let error = tasks.wait().await.unwrap_err();
        assert!(shutdown.is_cancelled());
        assert_eq!(format!("{error:#}"), "fails: boom");
    }

    #[tokio::test]
    async fn a_panicking_critical_task_cancels_the_others_and_is_the_error() {
        let shutdown = CancellationToken::new();
        let tasks = waiting(&shutdown);
        let index = std::hint::black_box(7);
        tasks.spawn_critical("panics", async move {
            let slots: Vec<u8> = Vec::new();
            let _ = slots[index];
            Ok::<(), anyhow::Error>(())
        });
        let error = tasks.wait().await.unwrap_err();
        assert!(shutdown.is_cancelled());
        let message = format!("{error:#}");
        assert!(
            message.starts_with("panics: panicked: index out of bounds"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_critical_task_that_ends_early_stops_the_service() {
        let shutdown = CancellationToken::new();
        let tasks = waiting(&shutdown);
        tasks.spawn_critical("ends", async { Ok::<(), anyhow::Error>(()) });
        tasks.wait().await.unwrap();
        assert!(shutdown.is_cancelled());
    }

    #[tokio::test]
    async fn at_shutdown_every_task_ends_and_the_service_is_fine() {
        let shutdown = CancellationToken::new();
        let tasks = Supervisor::new(shutdown.clone());
        for _ in 0..3 {
            let watcher = shutdown.clone();
            tasks.spawn_critical("waits", async move {
                watcher.cancelled().await;
                Ok::<(), std::io::Error>(())
            });
        }
        shutdown.cancel();
        tasks.wait().await.unwrap();
    }
}
