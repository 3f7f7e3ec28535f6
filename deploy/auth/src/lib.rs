//! `gantry-auth`: the service that answers nats-server's auth callout, so that a provider's
//! worker joins with nothing but its node's agent key (design 19, §1).
//!
//! ```text
//!  nats-server ── $SYS.REQ.USER.AUTH (account AUTH, queue group) ──▶ handle
//!     jwt::read_request (the server's signature)
//!     handshake::Token::decode, verify (pure: version, window, manifest, EIP-712 signer)
//!     chain: NodeRegistry.getNode, JobMarket.params (cached) ──▶ handshake::admit (pure)
//!     KV gantry_<chain>_handshakes  create(token digest)  ── once, whichever replica
//!  (at start: the jobs stream, the node-scoped results, checkpoints and sealed-results buckets, with
//!   the network's settings: workers may write them and not make them)
//!     KV gantry_<chain>_nodes ← manifest
//!  ◀── jwt::response(jwt::user(worker-<N>, nats_auth::worker_permissions, exp = now + ttl))
//! ```
//!
//! Stateless: every replica answers any request from the chain and NATS alone; several
//! run side by side in one queue group. A request it cannot check (the chain or NATS does
//! not answer within [`ANSWER_WITHIN`]) is refused, never admitted unchecked; one the
//! server no longer waits for is not worked on; past `--concurrency` requests at once,
//! the rest are refused as busy at once (the worker connects again) rather than queued
//! behind a slow chain. The server is told only the refusal's reason. The credentials expire after
//! `--ttl-secs`: the server then disconnects the worker, which signs a new token, so a node
//! that exits or is slashed below the minimum stake is out at the next renewal.
//!
//! **Invariant:** a user JWT is issued only for a node whose registered agent signed a
//! fresh, unused token for this chain and market, while the node is accountable
//! ([`gantry_protocol::handshake::admit`]), and carries only that node's permissions.

pub mod config;
pub mod jwt;
pub mod metrics;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::U256;
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use anyhow::Context as _;
use async_nats::jetstream::{self, kv};
use futures::StreamExt as _;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::handshake::{self, Refusal, Registered, Token, Verified};
use gantry_protocol::nats_auth::{CALLOUT_SUBJECT, worker_permissions};
use gantry_protocol::status::NodeStatus;
use gantry_protocol::{names, storage};
use nkeys::KeyPair;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Config;

/// The queue group every replica answers in: each request reaches one.
pub const QUEUE_GROUP: &str = "gantry-auth";
/// A request is answered within this, or refused (the server waits 2 s).
pub const ANSWER_WITHIN: Duration = Duration::from_millis(1_500);
/// The market's minimum stake is read again after this long.
const MIN_STAKE_KEPT: Duration = Duration::from_secs(30);

/// Why a request is refused: the handshake's own reasons, or the service's.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error(transparent)]
    Handshake(#[from] Refusal),
    #[error("no handshake token")]
    NoToken,
    #[error("cannot check it now: {0}")]
    Unavailable(String),
    #[error("busy")]
    Busy,
}

impl Refused {
    fn reason(&self) -> &'static str {
        match self {
            Self::Handshake(refusal) => refusal.reason(),
            Self::NoToken => "no_token",
            Self::Unavailable(_) => "unavailable",
            Self::Busy => "busy",
        }
    }
}

/// Runs the service until `shutdown`: the requests being answered finish first.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    bind(config).await?.serve(shutdown).await
}

/// The service, subscribed to the callout and not yet answering: requests wait in the
/// subscription until [`Bound::serve`].
pub struct Bound {
    service: Arc<Service>,
    requests: async_nats::Subscriber,
    concurrency: usize,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("chain_id", &self.service.chain_id)
            .finish_non_exhaustive()
    }
}

/// Checks the config and the chain, opens the buckets and subscribes to the callout.
pub async fn bind(config: Config) -> anyhow::Result<Bound> {
    let issuer = config.issuer()?;
    let ttl = config.ttl()?;
    let chain_id = config.chain.chain_id;
    let provider = ProviderBuilder::new()
        .connect_http(config.chain.rpc_url.clone())
        .erased();
    let reported = provider
        .get_chain_id()
        .await
        .context("asking the chain for its id")?;
    anyhow::ensure!(
        reported == chain_id,
        "the RPC endpoint serves chain {reported}, not {chain_id}"
    );
    let gantry = gantry_runtime::nats::connect(&config.nats.nats_url, true).await?;
    let js = jetstream::new(gantry);
    let keep = Duration::from_secs(3 * handshake::CLOCK_WINDOW_SECS);
    let replicas = config.nats.nats_replicas;
    let handshakes = js
        .create_key_value(storage::handshakes_bucket(chain_id, keep, replicas))
        .await
        .context("the handshakes bucket")?;
    let nodes = js
        .create_key_value(storage::nodes_bucket(chain_id, replicas))
        .await
        .context("the nodes bucket")?;
    // What every worker writes, with the network's settings (a worker may not make them).
    js.get_or_create_stream(storage::jobs_stream(chain_id, replicas))
        .await
        .context("the jobs stream")?;
    gantry_runtime::keys::open(&js, chain_id, replicas)
        .await
        .map_err(|e| anyhow::anyhow!("the keys bucket: {e}"))?;
    for bucket in [
        names::results_bucket(chain_id),
        names::checkpoints_bucket(chain_id),
        names::sealed_bucket(chain_id),
    ] {
        gantry_runtime::objects::open(&js, &bucket, replicas)
            .await
            .with_context(|| format!("the bucket {bucket}"))?;
    }
    let callout = gantry_runtime::nats::connect(&config.callout_url, true).await?;
    let requests = callout
        .queue_subscribe(CALLOUT_SUBJECT, QUEUE_GROUP.into())
        .await
        .context("subscribing to the auth callout")?;
    callout
        .flush()
        .await
        .context("subscribing to the auth callout")?;
    tracing::info!(
        issuer = %issuer.public_key(),
        chain_id,
        ttl_secs = ttl.as_secs(),
        "answering the auth callout"
    );
    let service = Arc::new(Service {
        issuer,
        ttl,
        chain_id,
        market_address: config.chain.market,
        registry: NodeRegistry::new(config.chain.registry, provider.clone()),
        market: JobMarket::new(config.chain.market, provider),
        handshakes,
        nodes,
        callout: callout.clone(),
        min_stake: Mutex::default(),
    });
    Ok(Bound {
        service,
        requests,
        concurrency: config.concurrency,
    })
}

impl Bound {
    /// Answers requests until `shutdown`, at most `--concurrency` at once; the ones being
    /// answered then finish.
    pub async fn serve(mut self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let tasks = TaskTracker::new();
        let ended = loop {
            let message = tokio::select! {
                () = shutdown.cancelled() => break Ok(()),
                message = self.requests.next() => message,
            };
            let Some(message) = message else {
                break Err(anyhow::anyhow!("the callout subscription ended"));
            };
            let service = self.service.clone();
            match slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    tasks.spawn(async move {
                        service.answer(message).await;
                        drop(slot);
                    });
                }
                Err(_) => service.refuse_busy(message).await,
            }
        };
        tasks.close();
        tasks.wait().await;
        let _ = self.service.callout.flush().await;
        ended
    }
}

struct Service {
    issuer: KeyPair,
    ttl: Duration,
    chain_id: u64,
    market_address: alloy::primitives::Address,
    registry: NodeRegistry::NodeRegistryInstance<DynProvider>,
    market: JobMarket::JobMarketInstance<DynProvider>,
    handshakes: kv::Store,
    nodes: kv::Store,
    callout: async_nats::Client,
    /// The market's minimum stake and when it was read.
    min_stake: Mutex<Option<(U256, Instant)>>,
}

impl Service {
    /// Answers one request of the server. One that cannot be read (not the server's) gets
    /// no answer: the server refuses the client at its timeout.
    async fn answer(&self, message: async_nats::Message) {
        let started = Instant::now();
        let Some(reply) = message.reply.clone() else {
            return;
        };
        let request = match jwt::read_request(&message.payload) {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(%error, "an authorization request that is not the server's");
                metrics::refused("bad_request");
                return;
            }
        };
        let now = unix_now();
        if request.expires.is_some_and(|expires| expires < now) {
            // The server gave up on it: the client has been refused already.
            metrics::refused("late");
            return;
        }
        let decided = tokio::time::timeout(ANSWER_WITHIN, self.decide(&request, now))
            .await
            .unwrap_or_else(|_| Err(Refused::Unavailable("no answer in time".into())));
        let answer = match decided {
            Ok((node, user)) => {
                tracing::info!(node, host = request.host.as_deref(), "worker admitted");
                metrics::admitted();
                Ok(user)
            }
            Err(refused) => {
                tracing::info!(
                    reason = refused.reason(),
                    error = %refused,
                    host = request.host.as_deref(),
                    "worker refused"
                );
                metrics::refused(refused.reason());
                Err(refused.reason().to_owned())
            }
        };
        let response = jwt::response(&self.issuer, &request, now, answer);
        if let Err(error) = self.callout.publish(reply, response.into()).await {
            tracing::warn!(%error, "answering the server");
        }
        metrics::answered(started.elapsed());
    }

    /// Refuses `message`'s request at once, without reading the chain: every slot is
    /// taken.
    async fn refuse_busy(&self, message: async_nats::Message) {
        let (Some(reply), Ok(request)) = (message.reply, jwt::read_request(&message.payload))
        else {
            return;
        };
        metrics::refused(Refused::Busy.reason());
        let response = jwt::response(
            &self.issuer,
            &request,
            unix_now(),
            Err(Refused::Busy.reason().to_owned()),
        );
        let _ = self.callout.publish(reply, response.into()).await;
    }

    /// The user JWT for `request`'s worker, or why there is none. The registry is asked
    /// before the token is recorded: a stranger's token costs one chain read, no write.
    async fn decide(&self, request: &jwt::Request, now: u64) -> Result<(u64, String), Refused> {
        let text = request.auth_token.as_deref().ok_or(Refused::NoToken)?;
        let verified = Token::decode(text)?.verify(self.chain_id, self.market_address, now)?;
        let registered = self.registered(verified.node).await?;
        handshake::admit(&verified, &registered)?;
        self.use_once(&verified).await?;
        self.keep_manifest(&verified, now).await;
        let node = verified.node;
        let user = jwt::user(
            &self.issuer,
            request,
            &names::worker_user(node),
            &worker_permissions(self.chain_id, node),
            now,
            now + lifetime(self.ttl.as_secs(), verified.once),
        );
        Ok((node, user))
    }

    /// Records the token's digest; refused if some replica recorded it before.
    async fn use_once(&self, verified: &Verified) -> Result<(), Refused> {
        let key = alloy::hex::encode(verified.once);
        match self.handshakes.create(&key, bytes::Bytes::new()).await {
            Ok(_) => Ok(()),
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {
                Err(Refusal::Replayed.into())
            }
            Err(error) => Err(Refused::Unavailable(format!(
                "recording the token: {error}"
            ))),
        }
    }

    /// The registry's word on `node`, read now.
    async fn registered(&self, node: u64) -> Result<Registered, Refused> {
        let unavailable = |what: &str, error: alloy::contract::Error| {
            Refused::Unavailable(format!("reading {what}: {error}"))
        };
        let (info, min_stake) = tokio::try_join!(
            async {
                self.registry
                    .getNode(node)
                    .call()
                    .await
                    .map_err(|e| unavailable("the node", e))
            },
            async {
                let kept = *self.min_stake.lock().expect("not poisoned");
                if let Some((min_stake, at)) = kept
                    && at.elapsed() < MIN_STAKE_KEPT
                {
                    return Ok(min_stake);
                }
                let params = self
                    .market
                    .params()
                    .call()
                    .await
                    .map_err(|e| unavailable("the market's parameters", e))?;
                let min_stake = U256::from(params.minStake);
                *self.min_stake.lock().expect("not poisoned") = Some((min_stake, Instant::now()));
                Ok(min_stake)
            },
        )?;
        let status = NodeStatus::try_from(info.status)
            .map_err(|e| Refused::Unavailable(format!("the node's status: {e}")))?;
        Ok(Registered {
            agent: info.agent,
            status,
            stake: U256::from(info.stake),
            min_stake,
        })
    }

    /// Puts the worker's manifest where the matcher reads it. A failure is logged, not a
    /// refusal: the manifest informs placement, the chain decides eligibility.
    async fn keep_manifest(&self, verified: &Verified, now: u64) {
        let record = serde_json::json!({
            "node": verified.node,
            "agent": verified.agent,
            "at": now,
            "manifest": verified.manifest,
        });
        if let Err(error) = self
            .nodes
            .put(verified.node.to_string(), record.to_string().into())
            .await
        {
            tracing::warn!(node = verified.node, %error, "keeping the manifest");
        }
    }
}

/// How long a user lasts: `ttl` seconds less up to a tenth, by the token (so that workers
/// admitted together do not all renew together).
fn lifetime(ttl: u64, token: alloy::primitives::B256) -> u64 {
    let spread = ttl / 10;
    let jitter = u64::from_be_bytes(token.0[..8].try_into().expect("8 bytes"));
    ttl - jitter.checked_rem(spread + 1).unwrap_or(0)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_lifetime_is_the_ttl_less_up_to_a_tenth() {
        for byte in 0..=255u8 {
            let life = lifetime(300, alloy::primitives::B256::repeat_byte(byte));
            assert!((270..=300).contains(&life), "{life}");
        }
        assert_eq!(lifetime(2, alloy::primitives::B256::repeat_byte(7)), 2);
    }
}
