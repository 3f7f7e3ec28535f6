//! The answer: `submitResult`, or `reject` (job fault) or `abandon` (node fault,
//! shutdown), each followed by the completion report on the jobs stream.

use std::sync::atomic::Ordering;

use alloy::primitives::B256;
use gantry_protocol::jobs::{CompletionReport, CompletionStatus, JOBS_VERSION};
use gantry_protocol::names;

use super::{Assignment, Ctx, Outcome, Stop, StopReason, chain_failure, now_ms, retry};
use crate::fault::{Failure, FaultClass};

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
        failure: Option<&Failure>,
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
            error: failure.map(|f| f.reason.clone()),
            at_ms: now_ms(),
        }
    }
}

impl Ctx {
    /// Submits the result hash on-chain, then the completion report.
    pub(super) async fn submit(&self, job_id: u64, result: Uploaded, report: Report) -> Outcome {
        let submitted = retry("submitResult", || async {
            self.chain
                .submit_result(job_id, result.hash, result.uri.clone())
                .await
                .map_err(chain_failure)
        })
        .await;
        match submitted {
            Ok(()) => {
                let result_hash = result.hash;
                let completion = report.finish(CompletionStatus::Submitted, Some(result), None);
                self.publish_report(completion).await;
                Outcome::Submitted { result_hash }
            }
            Err(f) => Outcome::Unreported(f),
        }
    }

    /// Rejects (job fault) or abandons (node fault, shutdown) after a failure.
    pub(super) async fn give_up(
        &self,
        assignment: Assignment,
        failure: Failure,
        report: Report,
        stop: &Stop,
    ) -> Outcome {
        // Taken away meanwhile: nothing to answer.
        match self.chain.job(assignment.job_id).await {
            Ok(info) if !self.is_ours(&info, assignment.attempt) => return Outcome::Lost,
            _ => {}
        }
        let shutting_down = stop.reason() == Some(StopReason::Shutdown);
        if failure.class == FaultClass::Job && !shutting_down {
            return self.reject(assignment.job_id, failure, report).await;
        }
        if shutting_down {
            self.park_until_offline().await;
        }
        self.abandon(assignment, failure, report, shutting_down)
            .await
    }

    async fn reject(&self, job_id: u64, failure: Failure, report: Report) -> Outcome {
        tracing::warn!(reason = %failure.reason, "rejecting the job");
        let sent = retry("reject", || async {
            self.chain
                .reject(job_id, failure.reason.clone())
                .await
                .map_err(chain_failure)
        })
        .await;
        self.publish_report(report.finish(CompletionStatus::JobFault, None, Some(&failure)))
            .await;
        match sent {
            Ok(()) => Outcome::Rejected(failure),
            Err(f) => Outcome::Unreported(f),
        }
    }

    /// Stopped for shutdown: waits until the node is offline, so that the job given back
    /// is not assigned straight back here.
    async fn park_until_offline(&self) {
        self.parked.fetch_add(1, Ordering::SeqCst);
        self.parked_changed.notify_waiters();
        self.offline.cancelled().await;
    }

    async fn abandon(
        &self,
        assignment: Assignment,
        failure: Failure,
        report: Report,
        shutting_down: bool,
    ) -> Outcome {
        let job_id = assignment.job_id;
        tracing::warn!(reason = %failure.reason, "giving the job back");
        let sent = retry("abandon", || async {
            self.chain.abandon(job_id).await.map_err(chain_failure)
        })
        .await;
        self.publish_report(report.finish(CompletionStatus::NodeFault, None, Some(&failure)))
            .await;
        let given_back = match sent {
            Ok(()) => Ok(()),
            // A keeper may reclaim it first (the node is inactive once the worker shuts
            // down): the job is back on the market all the same, at the same slash.
            Err(f) => match self.chain.job(job_id).await {
                Ok(info) if !self.is_ours(&info, assignment.attempt) => {
                    tracing::info!("the job was reclaimed before the abandon landed");
                    Ok(())
                }
                _ => Err(f),
            },
        };
        match given_back {
            Ok(()) if shutting_down => Outcome::Released,
            Ok(()) => Outcome::Abandoned(failure),
            Err(f) => Outcome::Unreported(Failure {
                class: failure.class,
                reason: format!("{}; abandon failed: {}", failure.reason, f.reason),
            }),
        }
    }

    /// Publishes the completion report on the jobs stream; one that still cannot be
    /// published after the retries is logged and dropped.
    async fn publish_report(&self, report: CompletionReport) {
        let subject = names::completion_subject(self.chain_id, report.job_id);
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
