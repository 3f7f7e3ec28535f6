//! The container's output to NATS, one `LogLine` per line, within a rate limit; the
//! progress lines among them go to the progress reporter too. An encrypted job's lines
//! are not forwarded (the API serves logs to anyone): only its progress is.

use std::num::NonZeroU32;

use gantry_protocol::jobs::{JOBS_VERSION, LogLine, ProgressLine};
use gantry_protocol::names;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::mpsc;

use super::super::{Ctx, Held, now_ms};
use crate::docker::OutputLine;
use crate::metrics;

/// Log lines a job may send per second on average, and in a burst.
const LOG_RATE: NonZeroU32 = NonZeroU32::new(200).expect("not zero");
const LOG_BURST: NonZeroU32 = NonZeroU32::new(2_000).expect("not zero");

/// Forwards a job's output lines; those over the rate limit are dropped and counted, and
/// the next line forwarded says how many.
pub(super) struct LogForwarder<'a> {
    ctx: &'a Ctx,
    job_id: u64,
    attempt: u8,
    subject: String,
    limiter: DefaultDirectRateLimiter,
    dropped: u64,
    /// An encrypted job's: no line leaves the node.
    private: bool,
}

impl<'a> LogForwarder<'a> {
    pub(super) fn new(ctx: &'a Ctx, held: &Held, private: bool) -> Self {
        Self {
            ctx,
            job_id: held.job_id(),
            attempt: held.attempt,
            subject: names::logs_subject(ctx.chain_id, ctx.node_id, held.job_id()),
            limiter: RateLimiter::direct(Quota::per_second(LOG_RATE).allow_burst(LOG_BURST)),
            dropped: 0,
            private,
        }
    }

    /// Forwards until the container's output ends; progress lines are also sent to
    /// `progress`.
    pub(super) async fn run(
        mut self,
        mut lines: mpsc::Receiver<OutputLine>,
        progress: mpsc::Sender<ProgressLine>,
    ) {
        while let Some(line) = lines.recv().await {
            if let Some(parsed) = ProgressLine::parse(&line.line) {
                let _ = progress.send(parsed).await;
            }
            if !self.private {
                self.forward(line).await;
            }
        }
    }

    async fn forward(&mut self, line: OutputLine) {
        if self.limiter.check().is_err() {
            self.dropped += 1;
            return;
        }
        let mut text = line.line;
        if self.dropped > 0 {
            text = format!(
                "[gantry: {} lines dropped over the log rate limit] {text}",
                self.dropped
            );
            metrics::log_lines_dropped(self.dropped);
            self.dropped = 0;
        }
        let message = LogLine {
            v: JOBS_VERSION,
            job_id: self.job_id,
            attempt: self.attempt,
            stream: line.stream,
            line: text,
            at_ms: now_ms(),
        };
        super::publish_json(&self.ctx.nats, &self.subject, &message, "log line").await;
    }
}
