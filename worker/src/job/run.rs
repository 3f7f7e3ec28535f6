//! The pipeline of one assignment: the chain check, the stages, the answer.

use std::path::Path;
use std::time::Instant;

use super::report::Report;
use super::stages::Executed;
use super::{Assignment, Ctx, Outcome, Stop};
use crate::metrics;

impl Ctx {
    /// Runs one assignment to its end and answers on-chain. (Its span, with the job id,
    /// is opened by the caller around the whole task: `assignments::run_job`.)
    pub async fn run(&self, assignment: Assignment, stop: Stop) -> Outcome {
        let info = match self.job_info(assignment.job_id).await {
            Ok(info) => info,
            Err(f) => return Outcome::Unreported(f),
        };
        if !self.is_ours(&info, assignment.attempt) {
            return Outcome::NotOurs;
        }
        let started = Instant::now();
        let dir = self
            .work_dir
            .join(format!("{}-{}", assignment.job_id, assignment.attempt));
        let mut report = Report::new(self.node_id, assignment.job_id, assignment.attempt);
        let executed = self
            .execute(assignment, &info, &dir, &stop, &mut report)
            .await;
        let outcome = match executed {
            Ok(Executed::Done(result)) => self.submit(assignment.job_id, result, report).await,
            Ok(Executed::Lost) => Outcome::Lost,
            Err(failure) => self.give_up(assignment, failure, report, &stop).await,
        };
        remove_job_dir(&dir).await;
        metrics::job_seconds(outcome.label(), started.elapsed());
        outcome
    }
}

async fn remove_job_dir(dir: &Path) {
    if let Err(e) = tokio::fs::remove_dir_all(dir).await
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %e, "could not remove the job's directory");
    }
}
