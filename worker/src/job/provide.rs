//! A refereed job this node was placed on (design 18, §2.6 and §6, worker rule 5): run as
//! a seat's (deterministic WASM, the fit rule, the canonical outcome), sealed for
//! `PROVIDER_SEAT` with an OS-random salt, the seal record persisted with fsync **before**
//! `submitRefereedResult`, the outcome's tar and what opens the seal put into the node's
//! own bucket of sealed results (the submitter reads it, no worker can), then the seal
//! submitted. What may follow (a dispute, the reveal) is the seats loop's, from the record
//! and the chain ([`crate::seats`]): it outlives this assignment's task.
//!
//! ```text
//!  JobAssigned (refereed) ──▶ run_seat ──▶ salt, seal ──▶ record (fsync)
//!      ──▶ put <job>-p, <job>-p.seal under the node's id in gantry_<chain>_sealed ──▶ submitRefereedResult
//!  not deterministic WASM, does not fit, node too slow ──▶ rejectRefereed (free within the grace)
//! ```

use gantry_protocol::market::PROVIDER_SEAT;
use gantry_protocol::names::{self, ProviderSeal};
use tokio_util::sync::CancellationToken;

use super::report::Report;
use super::{Ctx, GiveBack, Held, Outcome, Stop, StopReason};
use crate::fault::Failure;
use crate::seats::{SealRecord, SealStore};

impl Ctx {
    /// Provides the confirmed refereed assignment `held`: its outcome sealed and submitted,
    /// or the job given back.
    pub(super) async fn provide(&self, held: &mut Held, stop: &Stop) -> Outcome {
        let job_id = held.job_id();
        if !self.sealed_results {
            let why = Failure::job(
                "this node cannot reach the bucket of sealed results to give the submitter the \
                 outcome (the network's auth service makes it): given back",
            );
            let report = Report::new(self.node_id, job_id, held.attempt);
            return self.give_back(held, GiveBack::Job(why), report).await;
        }
        let store = SealStore::new(&self.work_dir);
        let record = match store.load(job_id, PROVIDER_SEAT).await {
            Ok(record) => record,
            Err(failure) => return Outcome::Unreported(failure),
        };
        let mut record = match record {
            // Sealed before a restart: the same seal is put and submitted again.
            Some(record) => record,
            None => match self.seal_outcome(held, stop, &store).await {
                Ok(record) => record,
                Err(outcome) => return outcome,
            },
        };
        if !record.put {
            if let Err(failure) = self.put_sealed(job_id, &record).await {
                return Outcome::Unreported(failure);
            }
            // Put once: a retry does not pile copies up in the bucket.
            record.put = true;
            if let Err(failure) = store.save(&record).await {
                return Outcome::Unreported(failure);
            }
        }
        let uri = names::provider_result_uri(self.chain_id, self.node_id, job_id);
        if let Err(e) = self
            .chain
            .submit_refereed_result(job_id, &mut held.job, record.seal, uri)
            .await
        {
            return Outcome::Unreported(Failure::transient(e.to_string()));
        }
        tracing::info!(seal = %record.seal, "submitted the sealed result");
        // The seats loop watches the job from here (from the chain: a record that could
        // not be marked is watched all the same).
        record.committed = true;
        if let Err(failure) = store.save(&record).await {
            tracing::warn!(error = %failure, "the seal record could not be marked submitted");
        }
        Outcome::Submitted {
            result_hash: record.seal,
        }
    }

    /// Runs the job for its provider and keeps its sealed outcome (saved with fsync);
    /// `Err` is the assignment's outcome when it did not run to a result.
    async fn seal_outcome(
        &self,
        held: &mut Held,
        stop: &Stop,
        store: &SealStore,
    ) -> Result<SealRecord, Outcome> {
        let job_id = held.job_id();
        let stop_by = held
            .assignment
            .until
            .saturating_sub(self.settings.answer_margin.as_secs());
        let dir = self.work_dir.join(format!("provide-{job_id}"));
        let token = CancellationToken::new();
        let keep = store.tar(job_id, PROVIDER_SEAT);
        let ran = {
            // Its grace runs from the assignment (`until` less the job's max runtime).
            let assigned_at = held
                .assignment
                .until
                .saturating_sub(u64::from(held.job.terms.requirements.max_runtime));
            let run = self.run_seat(
                job_id,
                &held.job,
                &dir,
                &keep,
                super::SeatTime {
                    seated_at: assigned_at,
                    stop_by,
                },
                token.clone(),
            );
            tokio::pin!(run);
            tokio::select! {
                ran = &mut run => ran,
                () = stop.stopped() => {
                    token.cancel();
                    run.await
                }
            }
        };
        let _ = tokio::fs::remove_dir_all(&dir).await;
        let report = Report::new(self.node_id, job_id, held.attempt);
        let run = match ran {
            Ok(run) => run,
            Err(failure) => {
                let why = match stop.reason() {
                    Some(StopReason::Lost) => return Err(Outcome::Lost),
                    Some(StopReason::Shutdown) => GiveBack::ShuttingDown,
                    _ => GiveBack::from_failure(failure),
                };
                return Err(self.give_back(held, why, report).await);
            }
        };
        let record = self
            .seal(job_id, PROVIDER_SEAT, run)
            .map_err(Outcome::Unreported)?;
        store.save(&record).await.map_err(Outcome::Unreported)?;
        Ok(record)
    }

    /// Puts the outcome's tar and what opens its seal into the bucket of sealed results,
    /// under the node's id, for the submitter.
    async fn put_sealed(&self, job_id: u64, record: &SealRecord) -> Result<(), Failure> {
        let bucket = names::sealed_bucket(self.chain_id);
        let tar = tokio::fs::File::open(&record.tar)
            .await
            .map_err(|e| Failure::node(format!("the outcome's tar: {e}")))?;
        let put = |e: gantry_runtime::nats::NatsError| Failure::transient(format!("{bucket}: {e}"));
        gantry_runtime::objects::put(
            &self.jobs_js,
            &bucket,
            self.node_id,
            &names::provider_result_key(job_id),
            Default::default(),
            tar,
        )
        .await
        .map_err(put)?;
        let opening = serde_json::to_vec(&ProviderSeal {
            node: self.node_id,
            digest: record.digest,
            salt: record.salt,
        })
        .expect("a seal serializes");
        gantry_runtime::objects::put(
            &self.jobs_js,
            &bucket,
            self.node_id,
            &names::provider_seal_key(job_id),
            Default::default(),
            opening.as_slice(),
        )
        .await
        .map_err(put)?;
        Ok(())
    }
}
