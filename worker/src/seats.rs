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
use gantry_protocol::market::{self, PROVIDER_SEAT, Seat};
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
/// After its reveal, how many polls apart a seat checks that its reveal is still on chain.
const RECHECK: u32 = 15;
/// How often a seat's message is kept alive while its task works.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// How long a seat waits for the seats' slot: half the market's `REJECT_GRACE` (30 s), so
/// that giving it back is still free.
const SLOT_WAIT: Duration = Duration::from_secs(15);
/// How often the seats loop looks for provided refereed jobs no task watches.
const PROVIDED_SCAN: Duration = Duration::from_secs(2);
/// The seal records' directory under the work directory: the one entry a start does not
/// empty (a committed seat's record must survive a restart, or it cannot be revealed).
pub const SEALS_DIR: &str = "seals";

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
    /// Revealed: what is left is the upload after the decision.
    #[serde(default)]
    pub revealed: bool,
    /// A refereed provider's outcome and opening are in its bucket of sealed results.
    #[serde(default)]
    pub put: bool,
}

/// The seal records, one file each under `<work_dir>/seals/`.
#[derive(Debug, Clone)]
pub struct SealStore {
    dir: PathBuf,
}

impl SealStore {
    pub fn new(work_dir: &std::path::Path) -> Self {
        Self {
            dir: work_dir.join(SEALS_DIR),
        }
    }

    fn path(&self, job: u64, seat: u8) -> PathBuf {
        self.dir.join(format!("{job}-s{seat}.json"))
    }

    /// Where seat `seat` of `job` keeps its outcome's tar.
    pub fn tar(&self, job: u64, seat: u8) -> PathBuf {
        self.dir.join(format!("{job}-s{seat}.tar"))
    }

    /// Forgets seat `seat` of `job` (revealed, or no longer this node's): its record and
    /// its outcome's tar.
    pub async fn remove(&self, job: u64, seat: u8) {
        let _ = tokio::fs::remove_file(self.path(job, seat)).await;
        let _ = tokio::fs::remove_file(self.tar(job, seat)).await;
    }

    /// The records of the refereed jobs this node provided (seat [`PROVIDER_SEAT`]): the
    /// ones whose disputes the seats loop watches.
    pub async fn provided(&self) -> Vec<SealRecord> {
        let suffix = format!("-s{PROVIDER_SEAT}.json");
        let Ok(mut entries) = tokio::fs::read_dir(&self.dir).await else {
            return Vec::new();
        };
        let mut records = Vec::new();
        while let Ok(Some(entry)) = entries.next_entry().await {
            let name = entry.file_name();
            let Some(job) = name
                .to_str()
                .and_then(|n| n.strip_suffix(&suffix))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if let Ok(Some(record)) = self.load(job, PROVIDER_SEAT).await {
                records.push(record);
            }
        }
        records
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
pub(crate) fn os_random() -> Result<B256, Failure> {
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
        // The seats whose task runs (a redelivery of one is left to that task).
        let taken = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        // The refereed jobs provided here whose dispute a task watches.
        let watched = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let mut scan = tokio::time::interval(PROVIDED_SCAN);
        loop {
            let message = tokio::select! {
                () = shutdown.cancelled() => break,
                _ = scan.tick() => {
                    self.watch_provided(&watched, &shutdown).await;
                    continue;
                }
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
            let key = (drawn.jobId, drawn.seat, drawn.until.to::<u64>());
            if !taken.lock().expect("the taken set").insert(key) {
                continue;
            }
            let (ctx, store, slots) = (self.ctx.clone(), self.store.clone(), self.slots.clone());
            let (taken, stopping) = (taken.clone(), shutdown.clone());
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
                let done = serve(&ctx, &store, &slots, &drawn, block, &stopping).await;
                alive.abort();
                // Done here: a redelivery is this seat's next try.
                taken.lock().expect("the taken set").remove(&key);
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

impl Seats {
    /// Starts a task for each provided refereed job no task watches yet.
    async fn watch_provided(
        &self,
        watched: &Arc<std::sync::Mutex<std::collections::HashSet<u64>>>,
        shutdown: &CancellationToken,
    ) {
        for record in self.store.provided().await {
            if !watched.lock().expect("the watched set").insert(record.job) {
                continue;
            }
            let (ctx, store, watched) = (self.ctx.clone(), self.store.clone(), watched.clone());
            let stopping = shutdown.clone();
            self.tasks.spawn(async move {
                let job_id = record.job;
                if let Err(failure) = provided(&ctx, &store, record, &stopping).await {
                    tracing::warn!(job_id, error = %failure, "a provided job's watch: will try again");
                }
                watched.lock().expect("the watched set").remove(&job_id);
            });
        }
    }
}

/// A refereed job this node provided, from its submission to its end: nothing to do
/// unless its submitter disputes it; then the provider's seal is opened once the dispute's
/// reveal phase is final (never earlier: even a reverted reveal shows the digest and the
/// salt), and the opening checked to stay on chain. A provider that never opens its seal
/// loses the dispute. `Err`: transient; the next scan takes the record up again.
#[tracing::instrument(skip_all, fields(job_id = record.job))]
async fn provided(
    ctx: &Ctx,
    store: &SealStore,
    record: SealRecord,
    stopping: &CancellationToken,
) -> Result<(), Failure> {
    let job_id = record.job;
    let mut job = ctx.chain.read_job(job_id).await.map_err(transient)?;
    let mut final_open = false;
    loop {
        let ours = job.state.node_id == ctx.node_id;
        // The chain, not the record, says whether this seal was submitted: a submission
        // mined while the worker died (or its receipt was lost) is watched all the same.
        let sealed = ours && job.state.verified.is_some_and(|v| v.result == record.seal);
        let open = match job.state.status {
            // The challenge window: the submitter may still dispute.
            JobStatus::Submitted if sealed => false,
            JobStatus::Committing | JobStatus::Revealing if sealed => {
                reveal_phase(ctx, &job).await?
            }
            // Not submitted yet (the assignment's task is on it), or submitted and taken
            // away by a reorganisation: sent again while the run lasts.
            JobStatus::Assigned if ours => {
                if record.committed && ctx.chain.now().await.map_err(transient)? <= job.state.until
                {
                    tracing::warn!("the submission was reorganised away: submitting again");
                    let uri = names::provider_result_uri(ctx.chain_id, ctx.node_id, job_id);
                    ctx.chain
                        .submit_refereed_result(job_id, &mut job, record.seal, uri)
                        .await
                        .map_err(transient)?;
                }
                false
            }
            // Accepted, finalized, decided, at the arbiter, or not this node's any more:
            // once that is final, the seal has nothing left to do.
            _ => {
                blocks_over(ctx, ctx.settings.finality_depth, stopping).await?;
                let again = ctx.chain.read_job(job_id).await.map_err(transient)?;
                if again.state.hash() != job.state.hash() {
                    job = again;
                    continue;
                }
                tracing::info!(status = ?job.state.status, "the provided job needs its seal no more");
                store.remove(job_id, PROVIDER_SEAT).await;
                return Ok(());
            }
        };
        // A phase a reorganisation took back must hold `finality_depth` blocks again.
        final_open &= open;
        if open && !final_open {
            blocks_over(ctx, ctx.settings.finality_depth, stopping).await?;
            final_open = true;
            job = ctx.chain.read_job(job_id).await.map_err(transient)?;
            continue;
        }
        if open {
            match ctx
                .chain
                .provider_revealed(job_id)
                .await
                .map_err(transient)?
            {
                // Opened (by this node, or by the submitter, who holds the salt too): the
                // opening must stay on chain; looked at again after `finality_depth` blocks.
                Some(_) => {}
                None => {
                    ctx.chain
                        .reveal_refereed(job_id, &job, record.digest, record.salt)
                        .await
                        .map_err(transient)?;
                    tracing::info!(digest = %record.digest, "opened the provider's seal");
                }
            }
            blocks_over(ctx, ctx.settings.finality_depth, stopping).await?;
            if ctx
                .chain
                .provider_revealed(job_id)
                .await
                .map_err(transient)?
                .is_some()
            {
                store.remove(job_id, PROVIDER_SEAT).await;
                return Ok(());
            }
            tracing::warn!("the opening was reorganised away: opening again");
            job = ctx.chain.read_job(job_id).await.map_err(transient)?;
            continue;
        }
        pause(stopping).await?;
        let hash = ctx.chain.job_hash(job_id).await.map_err(transient)?;
        if hash != job.state.hash() {
            job = ctx.chain.read_job(job_id).await.map_err(transient)?;
        }
    }
}

fn parse(payload: &[u8]) -> Option<(JobMarket::SeatDrawn, u64)> {
    let envelope: EventEnvelope = serde_json::from_slice(payload).ok()?;
    let drawn = serde_json::from_value(envelope.event.data).ok()?;
    Some((drawn, envelope.block_number))
}

/// One seat, from its draw to its reveal. `Err`: a transient failure (the chain, the disk)
/// or a stop after the commit: the message comes back and the seat is taken up again
/// where its seal record says.
#[tracing::instrument(skip_all, fields(job_id = drawn.jobId, seat = drawn.seat))]
async fn serve(
    ctx: &Ctx,
    store: &SealStore,
    slots: &Semaphore,
    drawn: &JobMarket::SeatDrawn,
    block: u64,
    stopping: &CancellationToken,
) -> Result<(), Failure> {
    let (job_id, seat) = (drawn.jobId, drawn.seat);
    if drawn.nodeId != ctx.node_id {
        return Ok(());
    }
    while ctx.chain.block_number().await.map_err(transient)? < block {
        pause(stopping).await?;
    }
    let mut record = store.load(job_id, seat).await?;
    if record.is_none() {
        let (job, s) = seat_of(ctx, job_id, seat, None).await?;
        if job.state.status != JobStatus::Committing || s.node_id != ctx.node_id {
            tracing::info!(status = ?job.state.status, "the seat is no longer this node's");
            return Ok(());
        }
        if s.phase != Seat::SEATED {
            // Committed, and its record lost: it cannot be revealed (the seat will be
            // slashed as a non-revealer). Nothing this node can do any more.
            tracing::error!(
                phase = s.phase,
                "a seat of this node is committed but its seal record is gone"
            );
            return Ok(());
        }
        // One seat runs at a time; one that cannot start within the grace is given back,
        // free.
        let slot = tokio::time::timeout(SLOT_WAIT, slots.acquire()).await;
        let Ok(Ok(_slot)) = slot else {
            tracing::warn!("no free slot for the seat within the grace: giving it back");
            ctx.chain
                .reject_seat(job_id, seat, &s)
                .await
                .map_err(transient)?;
            return Ok(());
        };
        let stop_by = s.until.saturating_sub(ctx.settings.answer_margin.as_secs());
        let dir = ctx.work_dir.join(format!("seat-{job_id}-{seat}"));
        let ran = ctx
            .run_seat(
                job_id,
                &job,
                &dir,
                &store.tar(job_id, seat),
                crate::job::SeatTime {
                    seated_at: s.seated_at,
                    stop_by,
                },
                stopping.child_token(),
            )
            .await;
        let _ = tokio::fs::remove_dir_all(&dir).await;
        match ran {
            Ok(run) => {
                let made = ctx.seal(job_id, seat, run)?;
                store.save(&made).await?;
                // The seal, never the digest, before the reveal: logs may be shipped.
                tracing::info!(seal = %made.seal, "sealed the seat's outcome");
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
    // Committed, and the commit final (`finality_depth` blocks over it): one a
    // reorganisation took away is sent again while the seat's run lasts.
    while !record.committed {
        let (_, s) = seat_of(ctx, job_id, seat, None).await?;
        if s.node_id != ctx.node_id || s.phase == 0 {
            store.remove(job_id, seat).await;
            return Ok(());
        }
        if s.phase == Seat::SEATED {
            if ctx.chain.now().await.map_err(transient)? > s.until {
                tracing::error!(
                    until = s.until,
                    "the seat's run ended before its commit: it cannot commit any more"
                );
                store.remove(job_id, seat).await;
                return Ok(());
            }
            ctx.chain
                .commit_seat(job_id, seat, &s, record.seal)
                .await
                .map_err(transient)?;
            tracing::info!(seal = %record.seal, "committed");
        }
        blocks_over(ctx, ctx.settings.finality_depth, stopping).await?;
        let (_, s) = seat_of(ctx, job_id, seat, None).await?;
        if s.node_id == ctx.node_id && s.phase == Seat::SEATED {
            tracing::warn!("the commit was reorganised away: committing again");
            continue;
        }
        record.committed = true;
        store.save(&record).await?;
    }
    // Never earlier than the reveal phase by the chain's own blocks: a reveal sent before
    // it is refused, and even its gas estimate would show the digest and the salt.
    let mut job = ctx.chain.read_job(job_id).await.map_err(transient)?;
    if record.revealed {
        return upload_after_decision(ctx, store, &record, job, stopping).await;
    }
    let mut final_open = false;
    loop {
        let open = match job.state.status {
            JobStatus::Revealing | JobStatus::Committing => reveal_phase(ctx, &job).await?,
            // Decided, expired or gone: nothing left to reveal.
            _ => {
                store.remove(job_id, seat).await;
                return Ok(());
            }
        };
        // A phase a reorganisation took back must hold `finality_depth` blocks again.
        final_open &= open;
        if open && !final_open {
            // The reveal phase final too: `finality_depth` blocks over it, then looked at
            // again (a reorganisation could take the phase back, and a reveal sent in it
            // would show the digest and the salt to everyone).
            blocks_over(ctx, ctx.settings.finality_depth, stopping).await?;
            final_open = true;
            job = ctx.chain.read_job(job_id).await.map_err(transient)?;
            continue;
        }
        if open {
            let (job, s) = seat_of(ctx, job_id, seat, Some(job)).await?;
            if s.node_id == ctx.node_id && s.phase == Seat::SEATED {
                // The commit is gone from the chain (or the logs read lag it): the record
                // says so, and the seat is taken up again from the commit.
                record.committed = false;
                store.save(&record).await?;
                return Err(Failure::transient(
                    "the seat's commit is not on the chain read",
                ));
            }
            if s.node_id == ctx.node_id && s.phase == Seat::COMMITTED {
                ctx.chain
                    .reveal_seat(job_id, &job, seat, &s, record.digest, record.salt)
                    .await
                    .map_err(transient)?;
                tracing::info!(digest = %record.digest, "revealed");
            } else if s.phase != Seat::REVEALED || s.node_id != ctx.node_id {
                store.remove(job_id, seat).await;
                return Ok(());
            }
            record.revealed = true;
            store.save(&record).await?;
            return upload_after_decision(ctx, store, &record, job, stopping).await;
        }
        pause(stopping).await?;
        // The market's word for the job changes with the phase: read the job again only
        // when it did.
        let hash = ctx.chain.job_hash(job_id).await.map_err(transient)?;
        if hash != job.state.hash() {
            job = ctx.chain.read_job(job_id).await.map_err(transient)?;
        }
    }
}

/// After the reveal: waits for the decision and, when the quorum agreed on this seat's
/// digest, uploads the outcome's tar as the job's verified result (every agreeing seat
/// uploads the same bytes under one key), then forgets the seat. Before the decision
/// nothing is uploaded: another seat could copy it.
async fn upload_after_decision(
    ctx: &Ctx,
    store: &SealStore,
    record: &SealRecord,
    mut job: market::Job,
    stopping: &CancellationToken,
) -> Result<(), Failure> {
    let job_id = record.job;
    let mut polls = 0u32;
    while !job.state.status.is_settled() {
        pause(stopping).await?;
        polls += 1;
        let hash = ctx.chain.job_hash(job_id).await.map_err(transient)?;
        if hash != job.state.hash() {
            job = ctx.chain.read_job(job_id).await.map_err(transient)?;
        }
        // A reveal a reorganisation took away is sent again while the phase lasts (looked
        // at every `RECHECK` polls: the seats are read from the logs).
        if job.state.status == JobStatus::Revealing && polls.is_multiple_of(RECHECK) {
            let (_, s) = seat_of(ctx, job_id, record.seat, Some(job)).await?;
            if s.node_id == ctx.node_id && s.phase == Seat::COMMITTED {
                tracing::warn!("the reveal was reorganised away: revealing again");
                ctx.chain
                    .reveal_seat(job_id, &job, record.seat, &s, record.digest, record.salt)
                    .await
                    .map_err(transient)?;
            }
        }
    }
    if ctx.chain.verified_digest(job_id).await.map_err(transient)? == Some(record.digest) {
        let size = tokio::fs::metadata(&record.tar)
            .await
            .map_err(|e| Failure::node(format!("the outcome's tar: {e}")))?
            .len();
        let packed = crate::archive::Packed {
            path: record.tar.clone(),
            sha256: record.digest.0,
            size,
        };
        ctx.put_result(&names::verified_result_key(job_id), &packed)
            .await?;
        tracing::info!("uploaded the verified result");
    }
    store.remove(job_id, record.seat).await;
    Ok(())
}

/// Whether verified `job` (Committing or Revealing) is in its reveal phase by the chain's
/// newest block: Revealing, or Committing past its commit phase's end.
async fn reveal_phase(ctx: &Ctx, job: &market::Job) -> Result<bool, Failure> {
    if job.state.status == JobStatus::Revealing {
        return Ok(true);
    }
    let commit_end = job.state.verified.unwrap_or_default().draw.commit_end;
    Ok(ctx.chain.now().await.map_err(transient)? > commit_end)
}

/// Waits until the chain is `depth` blocks past its newest block now.
async fn blocks_over(ctx: &Ctx, depth: u64, stopping: &CancellationToken) -> Result<(), Failure> {
    let target = ctx.chain.block_number().await.map_err(transient)? + depth;
    while ctx.chain.block_number().await.map_err(transient)? < target {
        pause(stopping).await?;
    }
    Ok(())
}

/// One poll's pause; a stop ends it with an error, so the seat's message comes back to the
/// next run.
async fn pause(stopping: &CancellationToken) -> Result<(), Failure> {
    tokio::select! {
        () = tokio::time::sleep(REVEAL_POLL) => Ok(()),
        () = stopping.cancelled() => Err(Failure::transient("the worker is stopping")),
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
            revealed: false,
            put: false,
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
