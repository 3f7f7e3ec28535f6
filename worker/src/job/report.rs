//! The answer: `submitResult` (the job's result, or the failure report of a job that
//! failed by itself) or `reject` (a job given back), each passing the job's terms and
//! current state and followed by the completion report on the jobs stream.

use alloy::primitives::B256;
use gantry_protocol::jobs::{CompletionReport, CompletionStatus, JOBS_VERSION};
use gantry_protocol::market::State;
use gantry_protocol::names;
use gantry_protocol::status::JobStatus;

use super::{Ctx, GiveBack, Held, Outcome, chain_failure, now_ms, retry};
use crate::chain::ChainError;
use crate::fault::Failure;
use crate::metrics;

/// How often the block number is read while a result waits to be final.
const FINALITY_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// A result uploaded to the results bucket, ready to be submitted.
#[derive(Debug)]
pub(super) struct Uploaded {
    pub(super) hash: B256,
    pub(super) uri: String,
    pub(super) size: u64,
}

/// The completion report as it fills in.
#[derive(Debug, Clone)]
pub(super) struct Report {
    node_id: u64,
    job_id: u64,
    attempt: u8,
    pub(super) compute_secs: u64,
    pub(super) gpu_secs: u64,
    pub(super) avg_gpu_utilization: Option<f64>,
}

impl Report {
    pub(super) fn new(node_id: u64, job_id: u64, attempt: u8) -> Self {
        Self {
            node_id,
            job_id,
            attempt,
            compute_secs: 0,
            gpu_secs: 0,
            avg_gpu_utilization: None,
        }
    }

    fn finish(
        self,
        status: CompletionStatus,
        result: Option<Uploaded>,
        error: Option<String>,
    ) -> CompletionReport {
        let (result_hash, result_uri, output_bytes) = match result {
            Some(Uploaded { hash, uri, size }) => (Some(hash), Some(uri), Some(size)),
            None => (None, None, None),
        };
        CompletionReport {
            v: JOBS_VERSION,
            job_id: self.job_id,
            node_id: self.node_id,
            attempt: self.attempt,
            status,
            result_hash,
            result_uri,
            output_bytes,
            compute_secs: self.compute_secs,
            gpu_secs: self.gpu_secs,
            avg_gpu_utilization: self.avg_gpu_utilization,
            error,
            at_ms: now_ms(),
        }
    }
}

/// The answer the worker sends for a held job.
#[derive(Debug, Clone, Copy)]
enum Answer<'a> {
    Submit { hash: B256, uri: &'a str },
    Reject { reason: &'a str },
}

impl Answer<'_> {
    fn call(&self) -> &'static str {
        match self {
            Self::Submit { .. } => "submitResult",
            Self::Reject { .. } => "reject",
        }
    }
}

/// What became of an answer.
#[derive(Debug)]
enum Sent {
    /// Mined; the held job was moved on by its events.
    Mined,
    /// The job had moved on before the answer landed (our own earlier try whose receipt
    /// was lost, a reclaim, a reorg): this is where it is now.
    MovedOn(Box<State>),
}

impl Ctx {
    /// Submits the result hash on-chain (a failure report's when `failure`), then the
    /// completion report.
    pub(super) async fn submit(
        &self,
        held: &mut Held,
        result: Uploaded,
        failure: Option<Failure>,
        report: Report,
    ) -> Outcome {
        let answer = Answer::Submit {
            hash: result.hash,
            uri: &result.uri,
        };
        let result_hash = result.hash;
        let submitted = match self.answer(held, answer).await {
            Ok(Sent::Mined) => true,
            // Our own earlier try landed: the job is past Assigned on this node.
            Ok(Sent::MovedOn(state)) => {
                state.node_id == self.node_id
                    && matches!(
                        state.status,
                        JobStatus::Submitted | JobStatus::Disputed | JobStatus::Completed
                    )
            }
            Err(f) => return Outcome::Unreported(f),
        };
        if !submitted {
            return Outcome::Lost;
        }
        // Mined is not final: a reorganisation can un-mine the result, and nobody else
        // would send it again.
        match self.until_final(held, answer).await {
            Ok(true) => {}
            Ok(false) => return Outcome::Lost,
            Err(f) => return Outcome::Unreported(f),
        }
        let error = failure.as_ref().map(|f| f.reason.clone());
        let completion = report.finish(CompletionStatus::Submitted, Some(result), error);
        self.publish_report(completion).await;
        match failure {
            None => Outcome::Submitted { result_hash },
            Some(failure) => {
                tracing::info!(reason = %failure.reason, "the job failed by itself: its failure report was submitted");
                Outcome::Failed {
                    result_hash,
                    failure,
                }
            }
        }
    }

    /// Gives the job back with `reject` and the reason, then the completion report.
    pub(super) async fn give_back(
        &self,
        held: &mut Held,
        why: GiveBack,
        report: Report,
    ) -> Outcome {
        let reason = why.reason();
        tracing::warn!(%reason, "giving the job back");
        let sent = self.answer(held, Answer::Reject { reason: &reason }).await;
        let outcome = match sent {
            Ok(Sent::Mined) => Outcome::GivenBack(why.clone()),
            Ok(Sent::MovedOn(state)) if state.status == JobStatus::Assigned => {
                // Assigned to another attempt meanwhile (a reorg): not ours to answer.
                Outcome::Lost
            }
            Ok(Sent::MovedOn(_)) => {
                // Back on the market (or failed) all the same: our earlier try landed, or
                // a keeper reclaimed it first.
                tracing::info!("the job moved on before the reject landed");
                Outcome::GivenBack(why.clone())
            }
            Err(f) => Outcome::Unreported(Failure {
                reason: format!("{reason}; reject failed: {}", f.reason),
                ..f
            }),
        };
        if matches!(outcome, Outcome::GivenBack(_)) {
            let status = match why {
                GiveBack::Job(_) => CompletionStatus::JobFault,
                _ => CompletionStatus::NodeFault,
            };
            self.publish_report(report.finish(status, None, Some(reason)))
                .await;
        }
        outcome
    }

    /// Sends `answer` for the held job with its current state, retried while the chain is
    /// unreachable. A state the market calls stale is read again: when the job is still
    /// this attempt's (the fold missed something) the answer is sent once more with it,
    /// else where the job is now is returned.
    async fn answer(&self, held: &mut Held, answer: Answer<'_>) -> Result<Sent, Failure> {
        let job_id = held.job_id();
        for _ in 0..2 {
            let job = held.job;
            let sent = retry(answer.call(), || async move {
                let mut job = job;
                let sent = match answer {
                    Answer::Submit { hash, uri } => {
                        self.chain
                            .submit_result(job_id, &mut job, hash, uri.to_owned())
                            .await
                    }
                    Answer::Reject { reason } => {
                        self.chain.reject(job_id, &mut job, reason.to_owned()).await
                    }
                };
                match sent {
                    Ok(()) => Ok(Some(job)),
                    Err(ChainError::Stale { .. }) => Ok(None),
                    Err(e) => Err(chain_failure(e)),
                }
            })
            .await?;
            if let Some(moved_on) = sent {
                held.job = moved_on;
                return Ok(Sent::Mined);
            }
            let current = retry("read the job", || async {
                self.chain.read_job(job_id).await.map_err(chain_failure)
            })
            .await?;
            if !self.is_ours(&current, held.assignment.until) {
                return Ok(Sent::MovedOn(Box::new(current.state)));
            }
            tracing::warn!("the held state was stale; sending again with the chain's");
            held.job = current;
        }
        Err(Failure::node(format!(
            "{}: the market keeps calling job {job_id}'s state stale",
            answer.call()
        )))
    }

    /// Waits until the chain is `finality_depth` blocks past the submitted result and checks
    /// that it is still there; a result un-mined by a reorganisation (the job back to
    /// Assigned on this node, same attempt) is submitted again, and waited for again.
    /// `false`: the job is no longer this attempt's (reorganised away with its
    /// assignment, or taken).
    async fn until_final(&self, held: &mut Held, answer: Answer<'_>) -> Result<bool, Failure> {
        let depth = self.settings.finality_depth;
        if depth == 0 {
            return Ok(true);
        }
        let job_id = held.job_id();
        loop {
            let block_number = || async {
                retry("read the block number", || async {
                    self.chain.block_number().await.map_err(chain_failure)
                })
                .await
            };
            let final_at = block_number().await? + depth;
            while block_number().await? < final_at {
                tokio::time::sleep(FINALITY_POLL).await;
            }
            let current = retry("read the job", || async {
                self.chain.read_job(job_id).await.map_err(chain_failure)
            })
            .await?;
            let state = &current.state;
            if state.node_id == self.node_id
                && matches!(
                    state.status,
                    JobStatus::Submitted | JobStatus::Disputed | JobStatus::Completed
                )
            {
                return Ok(true);
            }
            if !self.is_ours(&current, held.assignment.until) {
                return Ok(false);
            }
            tracing::warn!(
                "the submitted result was un-mined by a reorganisation: submitting it again"
            );
            metrics::result_resubmitted();
            held.job = current;
            if let Sent::MovedOn(state) = self.answer(held, answer).await?
                && state.node_id != self.node_id
            {
                return Ok(false);
            }
        }
    }

    /// Publishes the completion report on the jobs stream; one that still cannot be
    /// published after the retries is logged and dropped.
    async fn publish_report(&self, report: CompletionReport) {
        let subject = names::completion_subject(self.chain_id, report.node_id, report.job_id);
        let payload = serde_json::to_vec(&report).expect("reports serialize");
        let published = retry("publish the completion report", || async {
            self.jobs_js
                .publish(subject.clone(), payload.clone().into())
                .await
                .map_err(|e| Failure::transient(e.to_string()))?
                .await
                .map_err(|e| Failure::transient(e.to_string()))
        })
        .await;
        if let Err(f) = published {
            tracing::warn!(error = %f, "completion report not published");
        }
    }
}
