//! The seats loop (design 18, §6): the verified jobs' seats this node is drawn into, from
//! the durable consumer `gantry_<chain>_seats_<node>` (`SeatDrawn` keyed by node). Each
//! seat is run, sealed, committed and revealed in a task of its own; its message stays
//! unacknowledged (kept alive) until the seat is done, so a restarted worker takes it up
//! again, and the seal store makes the restart resume where it stopped.
//!
//! ```text
//!  SeatDrawn.<node> ──▶ read job + seats: still ours, Seated? ──▶ run (deterministic WASM)
//!      ──▶ salt (OS random), seal; persisted with fsync ──▶ commitSeat
//!      ──▶ poll until the reveal phase ──▶ revealSeat ──▶ ack
//!  not deterministic WASM, or this node could not run it ──▶ rejectSeat (free within the grace)
//! ```
//!
//! Nothing of a seat is published before its decision (no logs, progress or result): a
//! seat's outputs could be copied by another seat.

use std::io::Read as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::B256;
use async_nats::jetstream;
use futures::StreamExt;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::market::{self, Seat};
use gantry_protocol::status::JobStatus;
use gantry_protocol::{names, storage};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::WorkerError;
use crate::fault::Failure;
use crate::job::Ctx;

/// How often a seat's task asks the chain whether its reveal phase began.
const REVEAL_POLL: Duration = Duration::from_secs(1);
/// How often a seat's message is kept alive while its task works.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// What a seat's node keeps of its seal until it is revealed: written with fsync before
/// `commitSeat`, so a worker that dies after committing can still reveal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealRecord {
    pub job: u64,
    pub seat: u8,
    pub digest: B256,
    pub salt: B256,
    pub seal: B256,
    /// The canonical outcome's tar (for the upload after the decision).
    pub tar: PathBuf,
    pub committed: bool,
}

/// The seal records, one file each under `<work_dir>/seals/`.
#[derive(Debug, Clone)]
pub struct SealStore {
    dir: PathBuf,
}

impl SealStore {
    pub fn new(work_dir: &std::path::Path) -> Self {
        Self {
            dir: work_dir.join("seals"),
        }
    }

    fn path(&self, job: u64, seat: u8) -> PathBuf {
        self.dir.join(format!("{job}-s{seat}.json"))
    }

    /// Where seat `seat` of `job` keeps its outcome's tar.
    pub fn tar(&self, job: u64, seat: u8) -> PathBuf {
        self.dir.join(format!("{job}-s{seat}.tar"))
    }

    pub async fn load(&self, job: u64, seat: u8) -> Result<Option<SealRecord>, Failure> {
        match tokio::fs::read(self.path(job, seat)).await {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Failure::node(format!("seal record of job {job} seat {seat}: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Failure::node(format!(
                "seal record of job {job} seat {seat}: {e}"
            ))),
        }
    }

    /// Writes `record` durably: a temporary file synced, renamed over the old one, the
    /// directory synced.
    pub async fn save(&self, record: &SealRecord) -> Result<(), Failure> {
        let dir = self.dir.clone();
        let path = self.path(record.job, record.seat);
        let bytes = serde_json::to_vec(record).expect("a record serializes");
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            use std::io::Write as _;
            std::fs::create_dir_all(&dir)?;
            let temporary = path.with_extension("json.new");
            let mut file = std::fs::File::create(&temporary)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &path)?;
            std::fs::File::open(&dir)?.sync_all()
        })
        .await
        .map_err(|e| Failure::node(format!("seal store: {e}")))?
        .map_err(|e| Failure::node(format!("seal store: {e}")))
    }
}

/// 32 bytes from the operating system's random source.
fn os_random() -> Result<B256, Failure> {
    let mut salt = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut salt))
        .map_err(|e| Failure::node(format!("the OS random source: {e}")))?;
    Ok(B256::from(salt))
}

/// The seats loop of this node.
pub(crate) struct Seats {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) store: SealStore,
    /// Seats run one at a time (a verified run is a WASM job's, on the job slots' disks).
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) tasks: TaskTracker,
}

impl Seats {
    /// Takes the node's seats until `shutdown` fires (`Ok`) or the consumer fails.
    pub(crate) async fn run(self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        let (chain_id, node_id) = (self.ctx.chain_id, self.ctx.node_id);
        let name = names::seat_consumer(chain_id, node_id);
        let consumer = self
            .ctx
            .chain_stream
            .get_or_create_consumer(&name, storage::seat_consumer(chain_id, node_id))
            .await
            .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| WorkerError::nats(format!("consumer {name}"), e))?;
        let mut taken = std::collections::HashSet::new();
        loop {
            let message = tokio::select! {
                () = shutdown.cancelled() => break,
                message = messages.next() => message,
            };
            let message = match message {
                Some(Ok(message)) => message,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "seat consumer");
                    continue;
                }
                None => return Err(WorkerError::AssignmentsEnded),
            };
            let Some((drawn, block)) = parse(&message.payload) else {
                tracing::error!(subject = %message.subject, "not a SeatDrawn event; skipping it");
                let _ = message.ack().await;
                continue;
            };
            // A redelivery of a seat whose task runs: that task acknowledges it.
            if !taken.insert((drawn.jobId, drawn.seat, drawn.until.to::<u64>())) {
                continue;
            }
            let (ctx, store, slots) = (self.ctx.clone(), self.store.clone(), self.slots.clone());
            self.tasks.spawn(async move {
                let message = Arc::new(message);
                let alive = {
                    let message = message.clone();
                    tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(KEEP_ALIVE).await;
                            let _ = message.ack_with(jetstream::AckKind::Progress).await;
                        }
                    })
                };
                let done = serve(&ctx, &store, &slots, &drawn, block).await;
                alive.abort();
                match done {
                    Ok(()) => {
                        let _ = message.ack().await;
                    }
                    Err(failure) => {
                        tracing::warn!(job_id = drawn.jobId, seat = drawn.seat, error = %failure, "seat: will try again");
                        let _ = message
                            .ack_with(jetstream::AckKind::Nak(Some(Duration::from_secs(5))))
                            .await;
                    }
                }
            });
        }
        Ok(())
    }
}

fn parse(payload: &[u8]) -> Option<(JobMarket::SeatDrawn, u64)> {
    let envelope: EventEnvelope = serde_json::from_slice(payload).ok()?;
    let drawn = serde_json::from_value(envelope.event.data).ok()?;
    Some((drawn, envelope.block_number))
}

/// One seat, from its draw to its reveal. `Err`: a transient failure (the chain or the
/// disk): the message comes back and the seat is taken up again where the store says.
#[tracing::instrument(skip_all, fields(job_id = drawn.jobId, seat = drawn.seat))]
async fn serve(
    ctx: &Ctx,
    store: &SealStore,
    slots: &Semaphore,
    drawn: &JobMarket::SeatDrawn,
    block: u64,
) -> Result<(), Failure> {
    let (job_id, seat) = (drawn.jobId, drawn.seat);
    if drawn.nodeId != ctx.node_id {
        return Ok(());
    }
    while ctx.chain.block_number().await.map_err(transient)? < block {
        tokio::time::sleep(REVEAL_POLL).await;
    }
    let mut record = store.load(job_id, seat).await?;
    if record.is_none() {
        let (job, s) = seat_of(ctx, job_id, seat, None).await?;
        if job.state.status != JobStatus::Committing
            || s.node_id != ctx.node_id
            || s.phase != Seat::SEATED
        {
            tracing::info!(status = ?job.state.status, phase = s.phase, "the seat is no longer this node's to run");
            return Ok(());
        }
        let _slot = slots
            .acquire()
            .await
            .map_err(|_| Failure::node("the seats' slots closed"))?;
        let now = ctx.chain_now().await?;
        let timeout = Duration::from_secs(s.until.saturating_sub(now))
            .saturating_sub(ctx.settings.answer_margin);
        let dir = ctx.work_dir.join(format!("seat-{job_id}-{seat}"));
        match ctx
            .run_seat(job_id, &job, &dir, &store.tar(job_id, seat), timeout)
            .await
        {
            Ok(mut run) => {
                if ctx.test.corrupt_digest {
                    // The test hook's lying replica: a digest no honest node computes.
                    run.digest = alloy::primitives::keccak256(run.digest);
                }
                let salt = os_random()?;
                let seal = market::seal(
                    ctx.chain_id,
                    ctx.chain.market_address(),
                    job_id,
                    seat,
                    ctx.node_id,
                    run.digest,
                    salt,
                );
                let made = SealRecord {
                    job: job_id,
                    seat,
                    digest: run.digest,
                    salt,
                    seal,
                    tar: run.tar,
                    committed: false,
                };
                store.save(&made).await?;
                tracing::info!(digest = %run.digest, "sealed the seat's outcome");
                record = Some(made);
            }
            Err(failure) => {
                tracing::warn!(reason = %failure, "giving the seat back");
                ctx.chain
                    .reject_seat(job_id, seat, &s)
                    .await
                    .map_err(transient)?;
                return Ok(());
            }
        }
    }
    let mut record = record.expect("sealed above or before");
    if !record.committed {
        let (_, s) = seat_of(ctx, job_id, seat, None).await?;
        if s.node_id == ctx.node_id && s.phase == Seat::SEATED {
            ctx.chain
                .commit_seat(job_id, seat, &s, record.seal)
                .await
                .map_err(transient)?;
            tracing::info!(seal = %record.seal, "committed");
        } else if s.node_id != ctx.node_id || s.phase == 0 {
            return Ok(());
        }
        record.committed = true;
        store.save(&record).await?;
    }
    // Never earlier than the reveal phase: a reveal sent before it is refused, and its
    // calldata would show the digest and the salt to everyone.
    loop {
        let job = ctx.chain.read_job(job_id).await.map_err(transient)?;
        let verified = job.state.verified.unwrap_or_default();
        let open = match job.state.status {
            JobStatus::Revealing => true,
            JobStatus::Committing => ctx.chain_now().await? > verified.draw.commit_end,
            // Decided, expired or gone: nothing left to reveal.
            _ => return Ok(()),
        };
        if open {
            let (job, s) = seat_of(ctx, job_id, seat, Some(job)).await?;
            if s.node_id == ctx.node_id && s.phase == Seat::COMMITTED {
                ctx.chain
                    .reveal_seat(job_id, &job, seat, &s, record.digest, record.salt)
                    .await
                    .map_err(transient)?;
                tracing::info!(digest = %record.digest, "revealed");
            }
            return Ok(());
        }
        tokio::time::sleep(REVEAL_POLL).await;
    }
}

/// The job (read now, unless given) and seat `seat`'s word as its logs fold it (empty when
/// there is no such seat).
async fn seat_of(
    ctx: &Ctx,
    job_id: u64,
    seat: u8,
    job: Option<market::Job>,
) -> Result<(market::Job, Seat), Failure> {
    let job = match job {
        Some(job) => job,
        None => ctx.chain.read_job(job_id).await.map_err(transient)?,
    };
    let seats = ctx
        .chain
        .read_seats(job_id, &job.terms)
        .await
        .map_err(transient)?;
    let s = seats.0.get(usize::from(seat)).copied().unwrap_or_default();
    Ok((job, s))
}

fn transient(error: crate::chain::ChainError) -> Failure {
    Failure::transient(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_seal_record_survives_a_restart_and_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = SealStore::new(dir.path());
        assert_eq!(store.load(7, 1).await.unwrap(), None);
        let mut record = SealRecord {
            job: 7,
            seat: 1,
            digest: B256::repeat_byte(1),
            salt: os_random().unwrap(),
            seal: B256::repeat_byte(3),
            tar: store.tar(7, 1),
            committed: false,
        };
        store.save(&record).await.unwrap();
        // Another store over the same directory: a restarted worker.
        let again = SealStore::new(dir.path());
        assert_eq!(again.load(7, 1).await.unwrap(), Some(record.clone()));
        record.committed = true;
        again.save(&record).await.unwrap();
        assert_eq!(store.load(7, 1).await.unwrap(), Some(record));
        assert_ne!(os_random().unwrap(), os_random().unwrap(), "fresh salts");
    }
}
