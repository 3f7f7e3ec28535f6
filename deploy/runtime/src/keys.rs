//! The job key's exchange over the keys bucket (design 19, §3;
//! `gantry_protocol::encryption`), both sides of it:
//!
//! ```text
//!  node (worker)                         keys bucket                  submitter (CLI: job watch,
//!  obtain(): a fresh identity E,  ──put──▶ request.<node>.<job>.<n>  ──▶ keys serve): serve()
//!   its recipient signed by the agent        (only node <node> may      checks on chain: its job,
//!                                             write it)                  attempt n is <node>'s,
//!  opens the first release the    ◀─watch── release.<node>.<job>.<n> ◀── signed by its agent;
//!   job's submitter signed; others                                       wraps J to E, signs
//!   are skipped; none by `until`:
//!   NotReleased (the job's fault)
//! ```
//!
//! The bucket is not secret: a request holds a public key, a release the job key sealed
//! to one attempt's identity, which never leaves that worker's memory. Anyone who may
//! write releases (every submitter's reader) can only add ones the node skips.

use std::time::Duration;

use alloy::primitives::{Address, B256, Signature};
use alloy::providers::Provider;
use async_nats::jetstream::{self, kv, stream};
use futures::StreamExt as _;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::encryption::{self, AgeIdentity, CryptoError, Release, Request};
use gantry_protocol::names;
use gantry_protocol::spec::JobSpec;
use gantry_protocol::storage;

use gantry_protocol::status::JobStatus;

use crate::market::{ReadJobError, of_job, read_job};

/// The keys bucket of chain `chain_id`, made when missing (the auth service makes it
/// where workers may not), with rollups off and the oldest entries dropped when it is
/// full. A KV bucket allows rollups: any writer's `Nats-Rollup: all` would wipe every
/// request and release; and a full bucket that refused new entries would stop every
/// exchange. Only who may update the stream (the auth service; anyone where NATS has no
/// users) changes an older bucket; the others use it as it is, with a warning.
pub async fn open(
    js: &jetstream::Context,
    chain_id: u64,
    replicas: usize,
) -> Result<kv::Store, async_nats::Error> {
    let bucket = names::keys_bucket(chain_id);
    let store = match js.get_key_value(&bucket).await {
        Ok(store) => store,
        Err(_) => {
            js.create_key_value(storage::keys_bucket(chain_id, replicas))
                .await?
        }
    };
    let mut stream = js.get_stream(format!("KV_{bucket}")).await?;
    let config = stream.info().await?.config.clone();
    if config.allow_rollup || config.discard != stream::DiscardPolicy::Old {
        let safe = stream::Config {
            allow_rollup: false,
            discard: stream::DiscardPolicy::Old,
            ..config
        };
        if let Err(error) = js.update_stream(safe).await {
            tracing::warn!(%error, bucket, "the keys bucket allows rollups: any writer can empty it");
        }
    }
    Ok(store)
}

/// Why a node did not get its job key.
#[derive(Debug, thiserror::Error)]
pub enum ObtainError {
    #[error("the submitter did not release the job key within {0:?} of asking")]
    NotReleased(Duration),
    #[error("the keys bucket: {0}")]
    Nats(String),
    #[error("signing the key request: {0}")]
    Sign(String),
}

/// Which attempt asks, and whose job it is (the chain's).
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub chain_id: u64,
    pub market: Address,
    pub job: u64,
    pub attempt: u8,
    pub node: u64,
    pub submitter: Address,
}

impl Attempt {
    fn at(&self) -> (u64, u8, u64) {
        (self.job, self.attempt, self.node)
    }
}

/// The job key of `at`, asked for with a fresh identity whose recipient the node's agent
/// signs (`sign`), all of it (the asking too) within `wait`. Releases that are not the
/// submitter's, not this attempt's, or not sealed to this identity are skipped (with a
/// warning); each one skipped is counted in `gantry_keys_refused_total{reason}`.
pub async fn obtain<E: std::fmt::Display>(
    store: &kv::Store,
    at: &Attempt,
    sign: impl Fn(&B256) -> Result<Signature, E>,
    wait: Duration,
) -> Result<AgeIdentity, ObtainError> {
    tokio::time::timeout(wait, obtain_within(store, at, sign))
        .await
        .unwrap_or(Err(ObtainError::NotReleased(wait)))
}

async fn obtain_within<E: std::fmt::Display>(
    store: &kv::Store,
    at: &Attempt,
    sign: impl Fn(&B256) -> Result<Signature, E>,
) -> Result<AgeIdentity, ObtainError> {
    let identity = AgeIdentity::generate();
    let request = Request::unsigned(at.job, at.attempt, at.node, &identity.to_public());
    let signature = sign(&request.digest(at.chain_id, at.market))
        .map_err(|e| ObtainError::Sign(e.to_string()))?;
    let request = request.signed(&signature);
    let nats = |e: &dyn std::fmt::Display| ObtainError::Nats(e.to_string());
    // Watching before asking: a release cannot come before it is seen.
    let mut releases = store
        .watch_with_history(names::key_release(at.node, at.job, at.attempt))
        .await
        .map_err(|e| nats(&e))?;
    store
        .put(
            names::key_request(at.node, at.job, at.attempt),
            request.encode().into(),
        )
        .await
        .map_err(|e| nats(&e))?;
    loop {
        let entry = match releases.next().await {
            None => return Err(ObtainError::Nats("the watch ended".into())),
            Some(Err(e)) => return Err(nats(&e)),
            Some(Ok(entry)) => entry,
        };
        if entry.operation != kv::Operation::Put {
            continue;
        }
        let opened = Release::decode(&entry.value).and_then(|release| {
            release.open(at.chain_id, at.market, at.at(), at.submitter, &identity)
        });
        match opened {
            Ok(job_key) => return Ok(job_key),
            Err(error) => {
                metrics::counter!("gantry_keys_refused_total", "reason" => refusal(&error))
                    .increment(1);
                tracing::warn!(job_id = at.job, %error, "a key release skipped");
            }
        }
    }
}

fn refusal(error: &CryptoError) -> &'static str {
    match error {
        CryptoError::NotSigned { .. } => "not_signed",
        CryptoError::Elsewhere { .. } => "elsewhere",
        CryptoError::Decrypt(_) | CryptoError::BadIdentity => "not_sealed_to_us",
        _ => "malformed",
    }
}

/// A wallet's signature of an EIP-712 digest.
pub type SignFn = Box<dyn Fn(&B256) -> Result<Signature, String> + Send + Sync>;

/// A submitter answering its jobs' key requests: its account, its identity (the job keys
/// are derived from it and each spec's `keySalt`), and its wallet's signature.
pub struct Submitter<P> {
    pub provider: P,
    pub chain_id: u64,
    pub market: Address,
    pub registry: Address,
    /// The first block the market's logs are read from.
    pub from_block: u64,
    pub account: Address,
    pub identity: AgeIdentity,
    pub sign: SignFn,
}

impl<P> std::fmt::Debug for Submitter<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submitter")
            .field("chain_id", &self.chain_id)
            .field("market", &self.market)
            .field("account", &self.account)
            .field("recipient", &self.identity.to_public().to_string())
            .finish_non_exhaustive()
    }
}

/// Why a request was not answered.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error("job {0} is not this account's")]
    NotOurs(u64),
    /// No `JobPosted` for it (yet, for this endpoint): silent, and not remembered.
    #[error("job {0} was not posted")]
    NotPosted(u64),
    #[error("job {0} has no job key derived from this identity (spec: {1})")]
    NoJobKey(u64, String),
    #[error("node {node} does not hold attempt {attempt} of job {job} now")]
    NotHolder { job: u64, attempt: u8, node: u64 },
    /// The chain as read here has not reached attempt `attempt` of `job` (this endpoint a
    /// block behind the node's): tried again, not remembered.
    #[error("attempt {attempt} of job {job} is not on this endpoint's chain yet")]
    Behind { job: u64, attempt: u8 },
    #[error("{0}")]
    Refused(#[from] CryptoError),
    #[error("reading the chain: {0}")]
    Chain(String),
    #[error("the keys bucket: {0}")]
    Nats(String),
}

impl ReleaseError {
    /// Whether the request is simply another account's (not worth a warning).
    pub fn is_not_ours(&self) -> bool {
        matches!(self, Self::NotOurs(_) | Self::NotPosted(_))
    }
}

/// The job, attempt and node of a key released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub job: u64,
    pub attempt: u8,
    pub node: u64,
}

/// What a key server learned of the jobs it was asked about, and what it answered: a
/// job's key (or why there is none) is read from the chain once, and a request it saw
/// before (the same bytes, replayed at a restart or written again) is not answered again.
#[derive(Default)]
pub struct Known {
    keys: std::collections::HashMap<u64, Result<AgeIdentity, String>>,
    answered: std::collections::HashSet<B256>,
}

impl std::fmt::Debug for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Known")
            .field("jobs", &self.keys.len())
            .field("answered", &self.answered.len())
            .finish()
    }
}

impl<P: Provider> Submitter<P> {
    /// Answers one key request (`bytes`, as read from the bucket): releases the job key to
    /// the node that asked if the job is this account's, its spec's job key is this
    /// identity's, the job is assigned to that node now, in the attempt it names, and the
    /// node's agent signed the request.
    pub async fn release(&self, store: &kv::Store, bytes: &[u8]) -> Result<Released, ReleaseError> {
        self.answer(store, bytes, &mut Known::default()).await
    }

    async fn answer(
        &self,
        store: &kv::Store,
        bytes: &[u8],
        known: &mut Known,
    ) -> Result<Released, ReleaseError> {
        let request = Request::decode(bytes)?;
        let chain = |e: &dyn std::fmt::Display| ReleaseError::Chain(e.to_string());
        let job_key = match known.keys.get(&request.job) {
            Some(Ok(key)) => key.clone(),
            Some(Err(not_ours)) if not_ours.is_empty() => {
                return Err(ReleaseError::NotOurs(request.job));
            }
            Some(Err(why)) => return Err(ReleaseError::NoJobKey(request.job, why.clone())),
            None => {
                let read = self.read_job_key(request.job).await;
                match &read {
                    Ok(key) => known.keys.insert(request.job, Ok(key.clone())),
                    Err(ReleaseError::NotOurs(_)) => {
                        known.keys.insert(request.job, Err(String::new()))
                    }
                    Err(ReleaseError::NoJobKey(_, why)) => {
                        known.keys.insert(request.job, Err(why.clone()))
                    }
                    Err(_) => None,
                };
                read?
            }
        };
        let job = read_job(&self.provider, self.market, self.from_block, request.job)
            .await
            .map_err(|e| chain(&e))?;
        let attempt = job.state.barred.saturating_add(1);
        let assigned = job.state.status == JobStatus::Assigned;
        // Open in the attempt asked for: its assignment not read here yet.
        let open = job.state.status == JobStatus::Open;
        if request.attempt > attempt || (request.attempt == attempt && open) {
            return Err(ReleaseError::Behind {
                job: request.job,
                attempt: request.attempt,
            });
        }
        if !assigned || job.state.node_id != request.node || attempt != request.attempt {
            return Err(ReleaseError::NotHolder {
                job: request.job,
                attempt: request.attempt,
                node: request.node,
            });
        }
        let agent = NodeRegistry::new(self.registry, &self.provider)
            .getNode(request.node)
            .call()
            .await
            .map_err(|e| chain(&e))?
            .agent;
        let at = (request.job, request.attempt, request.node);
        let to = request.verify(self.chain_id, self.market, at, agent)?;
        let release = Release::wrap(&request, &to, &job_key)?;
        let signature = (self.sign)(&release.digest(self.chain_id, self.market))
            .map_err(ReleaseError::Chain)?;
        store
            .put(
                names::key_release(request.node, request.job, request.attempt),
                release.signed(&signature).encode().into(),
            )
            .await
            .map_err(|e| ReleaseError::Nats(e.to_string()))?;
        Ok(Released {
            job: request.job,
            attempt: request.attempt,
            node: request.node,
        })
    }

    /// Job `job`'s key, if the job is this account's and its spec names a key derived
    /// from this identity.
    async fn read_job_key(&self, job: u64) -> Result<AgeIdentity, ReleaseError> {
        let posted = of_job::<JobMarket::JobPosted, _>(
            &self.provider,
            self.market,
            self.from_block,
            job,
            |e| e.jobId,
        )
        .await
        .map_err(|e: ReadJobError| ReleaseError::Chain(e.to_string()))?;
        match posted.into_iter().next() {
            Some(posted) if posted.submitter == self.account => self.job_key(job, &posted.spec),
            Some(_) => Err(ReleaseError::NotOurs(job)),
            None => Err(ReleaseError::NotPosted(job)),
        }
    }

    /// [`Self::answer`], tried again after an unreachable chain or NATS (the watch
    /// brings a request once; its node waits [`encryption::KEY_WAIT_SECS`] for it).
    async fn release_retried(
        &self,
        store: &kv::Store,
        bytes: &[u8],
        known: &mut Known,
    ) -> Result<Released, ReleaseError> {
        use backon::Retryable as _;
        let known = tokio::sync::Mutex::new(known);
        (|| async { self.answer(store, bytes, *known.lock().await).await })
            .retry(crate::backoff::attempts(
                4,
                Duration::from_millis(250),
                Duration::from_secs(2),
            ))
            // The submitter's endpoint may be a block behind the node's.
            .when(|e| {
                matches!(
                    e,
                    ReleaseError::Chain(_) | ReleaseError::Nats(_) | ReleaseError::Behind { .. }
                )
            })
            .await
    }

    /// Job `job`'s key, derived from this identity and the spec's salt, if the spec names
    /// that key.
    pub fn job_key(&self, job: u64, spec: &[u8]) -> Result<AgeIdentity, ReleaseError> {
        let no_key = |why: &str| ReleaseError::NoJobKey(job, why.to_owned());
        let spec = JobSpec::from_slice(spec).map_err(|e| no_key(&e.to_string()))?;
        let encryption = spec.encryption.ok_or_else(|| no_key("not encrypted"))?;
        let (Some(recipient), Some(salt)) = (encryption.job_key, encryption.key_salt) else {
            return Err(no_key("no jobKey and keySalt"));
        };
        let salt = alloy::hex::decode(&salt).map_err(|_| no_key("keySalt is not hex"))?;
        let key = encryption::job_identity(&self.identity, &salt);
        if key.to_public().to_string() != recipient {
            return Err(no_key("its jobKey is another identity's"));
        }
        Ok(key)
    }

    /// Answers the key requests of `job` (or of every job, when `None`) as they come,
    /// those made before it began included, until `stop`; each one answered or refused
    /// is handed to `seen`.
    pub async fn serve(
        &self,
        store: &kv::Store,
        job: Option<u64>,
        stop: tokio_util::sync::CancellationToken,
        mut seen: impl FnMut(Result<Released, ReleaseError>),
    ) -> Result<(), ReleaseError> {
        let filter = match job {
            Some(job) => format!("request.*.{job}.*"),
            None => "request.>".to_owned(),
        };
        let mut known = Known::default();
        let mut requests = store
            .watch_with_history(filter)
            .await
            .map_err(|e| ReleaseError::Nats(e.to_string()))?;
        loop {
            let entry = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                entry = requests.next() => match entry {
                    None => return Err(ReleaseError::Nats("the watch ended".into())),
                    Some(Err(e)) => return Err(ReleaseError::Nats(e.to_string())),
                    Some(Ok(entry)) => entry,
                },
            };
            if entry.operation != kv::Operation::Put {
                continue;
            }
            let request = encryption::sha256(&entry.value);
            if known.answered.contains(&request) {
                continue;
            }
            let answered = self.release_retried(store, &entry.value, &mut known).await;
            // Only a final answer is remembered: a request refused for what may change
            // (the chain here a block behind, unreachable) is answered if it comes again.
            if !matches!(
                answered,
                Err(ReleaseError::Behind { .. }
                    | ReleaseError::NotPosted(_)
                    | ReleaseError::Chain(_)
                    | ReleaseError::Nats(_))
            ) {
                known.answered.insert(request);
            }
            seen(answered);
        }
    }
}
