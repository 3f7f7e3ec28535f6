//! The pipeline of one assignment the chain confirmed: the stages, then the answer.

use std::path::Path;
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;

use super::report::Report;
use super::stages::Executed;
use super::{Ctx, GiveBack, Held, Outcome, Stop};
use crate::metrics;

impl Ctx {
    /// Runs one confirmed assignment to its end and answers on-chain. `slot` is the node's
    /// room for the job: it is freed once the container is gone, before the answer, so that
    /// the next job (assigned once the answer is mined) finds it free. (Its span, with the
    /// job id, is opened by the caller around the whole task: `assignments::handle`.)
    pub async fn run(&self, mut held: Held, stop: Stop, slot: OwnedSemaphorePermit) -> Outcome {
        let started = Instant::now();
        if held.job.terms.verification.tier == gantry_protocol::market::Verification::REFEREED {
            let outcome = {
                let _slot = slot;
                self.provide(&mut held, &stop).await
            };
            metrics::job_seconds(outcome.label(), started.elapsed());
            return outcome;
        }
        let assignment = held.assignment;
        let dir = self
            .work_dir
            .join(format!("{}-{}", assignment.job_id, assignment.until));
        let mut report = Report::new(self.node_id, assignment.job_id, held.attempt);
        let executed = self.execute(&held, &dir, &stop, &mut report, slot).await;
        let outcome = match executed {
            Ok(Executed::Done(result)) => self.submit(&mut held, result, None, report).await,
            Ok(Executed::Failed(result, failure)) => {
                self.submit(&mut held, result, Some(failure), report).await
            }
            Ok(Executed::Lost) => Outcome::Lost,
            Err(give_back) => self.give_back(&mut held, give_back, report).await,
        };
        remove_job_dir(&dir).await;
        metrics::job_seconds(outcome.label(), started.elapsed());
        outcome
    }

    /// Gives a confirmed assignment back at once, without running it (no free slot, the
    /// node unhealthy or shutting down): this early, within the market's reject grace, it is free.
    pub async fn give_back_now(&self, mut held: Held, why: GiveBack) -> Outcome {
        let report = Report::new(self.node_id, held.job_id(), held.attempt);
        self.give_back(&mut held, why, report).await
    }
}

async fn remove_job_dir(dir: &Path) {
    if let Err(e) = tokio::fs::remove_dir_all(dir).await
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %e, "could not remove the job's directory");
    }
}
