//! Waiting between retries: exponential, 100 ms doubling to 5 s, with jitter, and
//! cancellable. The delays come from `backon`; services with a retry loop of their own
//! (resume after an error, wait for the chain) hold a [`Backoff`], and one-shot operations
//! use `backon::Retryable` directly with [`policy`], or with [`attempts`] where a step is
//! tried a fixed number of times (the worker's job steps and downloads). Every crate calls
//! its errors' retry predicate `is_retryable`.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio_util::sync::CancellationToken;

pub use backon::Retryable;

/// The first delay.
pub const FIRST: Duration = Duration::from_millis(100);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(5);

/// The workspace's retry policy: from [`FIRST`] doubling to [`MAX`], with jitter, for ever
/// (the caller decides when to stop).
pub fn policy() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(FIRST)
        .with_max_delay(MAX)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
}

/// `attempts` tries in all (at least one), the first pause `first`, doubling up to `max`,
/// without jitter: for a step whose failure, persisting, is reported rather than waited
/// out.
pub fn attempts(attempts: u32, first: Duration, max: Duration) -> ExponentialBuilder {
    let retries = attempts.max(1) - 1;
    ExponentialBuilder::default()
        .with_min_delay(first)
        .with_max_delay(max)
        .with_factor(2.0)
        .with_max_times(retries as usize)
}

/// The state of one retry loop.
#[derive(Debug)]
pub struct Backoff {
    delays: ExponentialBackoff,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            delays: policy().build(),
        }
    }
}

impl Backoff {
    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        self.delays.next().unwrap_or(MAX)
    }

    /// Sleeps for the next delay; `false` when `cancel` fired first.
    pub async fn wait(&mut self, cancel: &CancellationToken) -> bool {
        let delay = self.next_delay();
        tokio::select! {
            () = cancel.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }

    /// After a success: the next failure waits [`FIRST`] again.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_and_reset() {
        let mut backoff = Backoff::default();
        let delays: Vec<Duration> = (0..12).map(|_| backoff.next_delay()).collect();
        // Jitter adds up to one delay more.
        assert!(delays[0] >= FIRST && delays[0] <= 2 * FIRST, "{delays:?}");
        assert!(delays.iter().all(|d| *d <= 2 * MAX), "{delays:?}");
        assert!(delays[11] >= MAX, "{delays:?}");
        backoff.reset();
        assert!(backoff.next_delay() <= 2 * FIRST);
    }

    #[test]
    fn a_bounded_policy_pauses_between_its_attempts() {
        // backon multiplies in f32: whole milliseconds are what is meant.
        let millis = |tries, first| -> Vec<u128> {
            attempts(tries, first, MAX)
                .build()
                .map(|delay| delay.as_millis())
                .collect()
        };
        assert_eq!(millis(5, Duration::from_millis(200)), [200, 400, 800, 1600]);
        assert_eq!(
            millis(8, Duration::from_secs(1)),
            [1000, 2000, 4000, 5000, 5000, 5000, 5000]
        );
        assert!(millis(1, FIRST).is_empty());
        assert!(millis(0, FIRST).is_empty(), "one try at least");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_returns_false_at_once() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(!Backoff::default().wait(&cancel).await);
        assert!(Backoff::default().wait(&CancellationToken::new()).await);
    }
}
