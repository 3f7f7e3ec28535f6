//! A job's terms and state read back from the chain. The market stores one hash per job,
//! and every call on a job passes its terms and state; a caller that has not followed the
//! chain's stream (the CLI, a test, a worker that restarted) folds the job's own logs
//! (`eth_getLogs` by its id) with [`gantry_protocol::market`], and checks the fold against
//! the hash the market holds.
//!
//! ```text
//!  logs(MarketParamsUpdated) ──▶ Policies ─┐
//!  logs(topic1 = jobId) ──▶ JobPosted ──▶ Job::posted ──apply(…)──▶ Job ──▶ == market.jobHash(jobId)?
//! ```

use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, Log};
use alloy::sol_types::{SolEvent, SolEventInterface};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::events::market_job_id;
use gantry_protocol::market::{FoldError, Job, Policies, Policy};

/// Why a job could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadJobError {
    #[error("reading the market's logs")]
    Rpc(#[source] alloy::transports::TransportError),
    #[error("calling jobHash({0})")]
    Call(u64, #[source] alloy::contract::Error),
    #[error("job {0} was never posted")]
    NotPosted(u64),
    #[error(
        "job {job}: its events fold into a state the market does not hold (folded {folded}, stored {stored}); a log is missing from the node's answer"
    )]
    Mismatch {
        job: u64,
        folded: B256,
        stored: B256,
    },
    #[error("job {0}")]
    Fold(u64, #[source] FoldError),
}

/// Every policy version the market at `market` announced from `from_block` to `to_block`.
pub async fn read_policies<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    to_block: u64,
) -> Result<Policies, ReadJobError> {
    let filter = Filter::new()
        .address(market)
        .event_signature(JobMarket::MarketParamsUpdated::SIGNATURE_HASH)
        .from_block(from_block)
        .to_block(to_block);
    let mut policies = Policies::default();
    for log in provider
        .get_logs(&filter)
        .await
        .map_err(ReadJobError::Rpc)?
    {
        if let Ok(e) = JobMarket::MarketParamsUpdated::decode_log(&log.inner) {
            policies.insert(e.policyVersion, Policy::from(&e.params));
        }
    }
    Ok(policies)
}

/// Times [`read_job`] reads again when the logs and the hash disagree.
const READ_ATTEMPTS: usize = 3;

/// Job `job_id` as the market holds it now: its terms and its state (settled jobs keep
/// the status they settled with). The fold is checked against `jobHash`: a node that
/// leaves a log out is an error, not a wrong state. A node may name a block before it
/// serves that block's logs (anvil does, now and then, under load): a disagreement is
/// read again, at the newest block, up to [`READ_ATTEMPTS`] times.
pub async fn read_job<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Job, ReadJobError> {
    let mut attempt = 1;
    loop {
        match read_job_once(provider, market, from_block, job_id).await {
            Err(ReadJobError::Mismatch { .. }) if attempt < READ_ATTEMPTS => attempt += 1,
            read => return read,
        }
    }
}

async fn read_job_once<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Job, ReadJobError> {
    // Logs and hash as of one block, so a block landing in between cannot split them.
    let at = provider
        .get_block_number()
        .await
        .map_err(ReadJobError::Rpc)?;
    let policies = read_policies(provider, market, from_block, at).await?;
    let filter = Filter::new()
        .address(market)
        .topic1(B256::from(U256::from(job_id)))
        .from_block(from_block)
        .to_block(at);
    let logs = provider
        .get_logs(&filter)
        .await
        .map_err(ReadJobError::Rpc)?;
    let job = fold(job_id, &logs, &policies)?;
    let stored = JobMarket::new(market, provider)
        .jobHash(job_id)
        .block(at.into())
        .call()
        .await
        .map_err(|e| ReadJobError::Call(job_id, e))?;
    let folded = if job.state.status.is_settled() {
        B256::ZERO
    } else {
        job.state.hash()
    };
    if folded != stored {
        return Err(ReadJobError::Mismatch {
            job: job_id,
            folded,
            stored,
        });
    }
    Ok(job)
}

/// The result the node of job `job_id` committed to: the hash and URI of its latest
/// `ResultSubmitted` (the market keeps them only in that event), or `None` before one.
pub async fn read_result<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Option<(B256, String)>, ReadJobError> {
    let last =
        last_of_job::<JobMarket::ResultSubmitted, _>(provider, market, from_block, job_id, |e| {
            e.jobId
        })
        .await?;
    Ok(last.map(|e| (e.resultHash, e.resultURI)))
}

/// The digest a replicated job's quorum agreed on (its `JobVerified`), or `None` before
/// one (or when the job failed without a quorum).
pub async fn read_verified<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Option<B256>, ReadJobError> {
    let last =
        last_of_job::<JobMarket::JobVerified, _>(provider, market, from_block, job_id, |e| e.jobId)
            .await?;
    Ok(last.map(|e| e.digest))
}

/// The digest refereed job `job_id`'s provider revealed in its dispute
/// (`ProviderRevealed`), or `None` before.
pub async fn read_provider_revealed<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Option<B256>, ReadJobError> {
    let last =
        last_of_job::<JobMarket::ProviderRevealed, _>(provider, market, from_block, job_id, |e| {
            e.jobId
        })
        .await?;
    Ok(last.map(|e| e.digest))
}

/// The node job `job_id` was last assigned to (its latest `JobAssigned`), if any.
pub async fn read_last_assigned<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Option<u64>, ReadJobError> {
    let last =
        last_of_job::<JobMarket::JobAssigned, _>(provider, market, from_block, job_id, |e| e.jobId)
            .await?;
    Ok(last.map(|e| e.nodeId))
}

/// The node of each of job `job_id`'s attempts so far, in order: attempt `i + 1` was
/// assigned to `nodes[i]` (every attempt begins with a `JobAssigned`).
pub async fn read_assignments<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Vec<u64>, ReadJobError> {
    let assigned =
        of_job::<JobMarket::JobAssigned, _>(provider, market, from_block, job_id, |e| e.jobId)
            .await?;
    Ok(assigned.into_iter().map(|e| e.nodeId).collect())
}

/// The nodes paid for verified job `job_id`'s seats (`ReplicaPaid`), in the order paid:
/// the seats that upload the job's result.
pub async fn read_paid_replicas<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
) -> Result<Vec<u64>, ReadJobError> {
    use gantry_protocol::bindings::Verification;
    let paid =
        of_job::<Verification::ReplicaPaid, _>(provider, market, from_block, job_id, |e| e.jobId)
            .await?;
    Ok(paid.into_iter().map(|e| e.nodeId).collect())
}

/// Job `job_id`'s latest event `E` (`job_of` reads its job id), if any.
async fn last_of_job<E: SolEvent, P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
    job_of: fn(&E) -> u64,
) -> Result<Option<E>, ReadJobError> {
    Ok(of_job(provider, market, from_block, job_id, job_of)
        .await?
        .pop())
}

/// Job `job_id`'s events `E` (`job_of` reads its job id), oldest first.
pub async fn of_job<E: SolEvent, P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
    job_of: fn(&E) -> u64,
) -> Result<Vec<E>, ReadJobError> {
    let filter = Filter::new()
        .address(market)
        .event_signature(E::SIGNATURE_HASH)
        .topic1(B256::from(U256::from(job_id)))
        .from_block(from_block);
    let logs = provider
        .get_logs(&filter)
        .await
        .map_err(ReadJobError::Rpc)?;
    Ok(logs
        .iter()
        .filter_map(|log| E::decode_log(&log.inner).ok())
        .map(|log| log.data)
        .filter(|e| job_of(e) == job_id)
        .collect())
}

/// Verified job `job_id`'s seats (terms `terms`), folded from its logs as the market
/// writes their words ([`Seats::apply`](gantry_protocol::market::Seats::apply)). The
/// market keeps only their hashes, so this fold is checked by the call that takes it.
pub async fn read_seats<P: Provider>(
    provider: &P,
    market: Address,
    from_block: u64,
    job_id: u64,
    terms: &gantry_protocol::market::Terms,
) -> Result<gantry_protocol::market::Seats, ReadJobError> {
    let filter = Filter::new()
        .address(market)
        .topic1(B256::from(U256::from(job_id)))
        .from_block(from_block);
    let logs = provider
        .get_logs(&filter)
        .await
        .map_err(ReadJobError::Rpc)?;
    let mut seats = gantry_protocol::market::Seats::default();
    for log in &logs {
        if let Ok(event) = JobMarket::JobMarketEvents::decode_log(&log.inner)
            && market_job_id(&event.data) == Some(job_id)
        {
            seats.apply(terms, &event.data);
        }
    }
    Ok(seats)
}

/// Folds the market's logs whose first topic is `job_id` (other events share that topic
/// position with a node id: they are skipped).
fn fold(job_id: u64, logs: &[Log], policies: &Policies) -> Result<Job, ReadJobError> {
    let mut job: Option<Job> = None;
    for log in logs {
        let Ok(event) = JobMarket::JobMarketEvents::decode_log(&log.inner) else {
            continue;
        };
        match (&event.data, job.as_mut()) {
            (JobMarket::JobMarketEvents::JobPosted(e), _) if e.jobId == job_id => {
                job = Some(
                    Job::posted(&e.terms, policies).map_err(|e| ReadJobError::Fold(job_id, e))?,
                );
            }
            (_, Some(job)) if market_job_id(&event.data) == Some(job_id) => {
                job.state.apply(&event.data)
            }
            _ => {}
        }
    }
    job.ok_or(ReadJobError::NotPosted(job_id))
}
