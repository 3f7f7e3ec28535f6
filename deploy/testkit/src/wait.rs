//! Waiting for what a test expects, woken by events rather than timers.

use std::future::Future;
use std::time::Duration;

use futures::{Stream, StreamExt};

/// How long a [`crate::TestNet`] waits for one step unless its builder says otherwise.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Waits until `condition` holds: checks it now, then again each time `wakes` yields (a
/// NATS subscription, Docker's event stream, …), never on a timer. Panics naming `what`
/// when `patience` runs out first.
pub async fn wait_until<W, F, Fut>(what: &str, patience: Duration, mut wakes: W, mut condition: F)
where
    W: Stream + Unpin,
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let reached = async {
        loop {
            if condition().await {
                return;
            }
            wakes.next().await;
        }
    };
    tokio::time::timeout(patience, reached)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
}
