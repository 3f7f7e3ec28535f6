//! Waiting for a sent transaction, for every sender that is not the matcher's own
//! (the worker, the CLI): its receipt, polled, or the news that it is gone. A
//! reorganisation can un-mine a transaction and leave it in no pool (anvil's `anvil_reorg`
//! does; a real chain usually mines it again): a watcher of new blocks would wait out its
//! whole timeout for a receipt that never comes. A transaction neither mined nor known to
//! the node for `drop_grace` is reported as dropped at once: its nonce is free, and
//! nothing it would have done happened.
//!
//! The same reorganisation can un-mine an *earlier* transaction of the sender, one already
//! reported mined, while this one waits in the pool: its nonce now follows a gap, and the
//! pool holds it until something takes the free nonces — nothing would, as the sender
//! waits for this one before it sends anything else (the chaos suite: a worker's
//! `submitResult` waited out its minute behind a heartbeat a reorg took away, its
//! heartbeats queued behind it, and the keeper slashed the healthy node). A gap below the
//! transaction that lasts `drop_grace` is filled with transfers of nothing to the sender
//! itself, signed by the provider's wallet (a *filler*, as the matcher's sender does); the
//! un-mined call is not sent again: its caller learns what happened from the chain. A
//! sender with several transactions in flight at once (a worker) names their nonces
//! ([`mined_among`]): its own transactions pending below this one are no gap.

use std::time::{Duration, Instant};

use alloy::consensus::Transaction as _;
use alloy::network::{TransactionBuilder, TransactionResponse as _};
use alloy::primitives::{Address, B256, U256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::{TransactionReceipt, TransactionRequest};

/// The gas of a filler: a plain transfer.
const FILLER_GAS: u64 = 21_000;

/// How long to wait, and how often to look.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// The longest wait for a receipt.
    pub timeout: Duration,
    /// How long the node may not know the transaction before it counts as dropped, and
    /// how long a gap of free nonces below it may last before it is filled.
    pub drop_grace: Duration,
    pub poll: Duration,
}

impl Default for Wait {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            drop_grace: Duration::from_secs(10),
            poll: Duration::from_millis(100),
        }
    }
}

/// Why no receipt came.
#[derive(Debug, thiserror::Error)]
pub enum Unmined {
    /// Gone from the chain and the pool: not sent, as far as the chain knows.
    #[error("transaction {0} left the chain and the pool (a reorganisation dropped it)")]
    Dropped(B256),
    #[error("transaction {tx} not mined within {timeout:?}")]
    NotMined { tx: B256, timeout: Duration },
    #[error("reading transaction {tx}")]
    Rpc {
        tx: B256,
        #[source]
        source: alloy::transports::TransportError,
    },
}

/// Transaction `tx`'s receipt once mined (successful or not). A gap of free nonces below
/// it is filled once it has lasted `drop_grace` (see the module's doc).
pub async fn mined(
    provider: &DynProvider,
    tx: B256,
    wait: Wait,
) -> Result<TransactionReceipt, Unmined> {
    mined_among(provider, tx, wait, &|_| false).await
}

/// As [`mined`], for a sender with several transactions in flight at once: `in_flight`
/// says which nonces hold one of its own transactions still waited for, which are no gap
/// (a filler at one's nonce would compete with it, and replace it once fees have risen).
pub async fn mined_among(
    provider: &DynProvider,
    tx: B256,
    wait: Wait,
    in_flight: &(dyn Fn(u64) -> bool + Sync),
) -> Result<TransactionReceipt, Unmined> {
    let started = Instant::now();
    let mut missing_since = None;
    let mut gap_since = None;
    loop {
        // One look; an RPC error ends the wait only at its timeout (one failed read is no
        // news about the transaction, and a caller that gave up would send it again while
        // this one may still be mined).
        let looked: Result<Option<TransactionReceipt>, alloy::transports::TransportError> = async {
            if let Some(receipt) = provider.get_transaction_receipt(tx).await? {
                return Ok(Some(receipt));
            }
            match provider.get_transaction_by_hash(tx).await? {
                Some(pending) => {
                    missing_since = None;
                    let (from, nonce) = (pending.from(), pending.nonce());
                    let next = provider.get_transaction_count(from).await?;
                    let free: Vec<u64> = (next..nonce).filter(|n| !in_flight(*n)).collect();
                    if free.is_empty() {
                        gap_since = None;
                    } else if gap_since.get_or_insert_with(Instant::now).elapsed()
                        >= wait.drop_grace
                    {
                        fill(provider, from, &free, in_flight).await;
                        gap_since = None;
                    }
                }
                None => {
                    missing_since.get_or_insert_with(Instant::now);
                }
            }
            Ok(None)
        }
        .await;
        match looked {
            Ok(Some(receipt)) => return Ok(receipt),
            Ok(None) => {}
            Err(source) if started.elapsed() >= wait.timeout => {
                return Err(Unmined::Rpc { tx, source });
            }
            Err(error) => tracing::debug!(%error, %tx, "reading a waited-for transaction"),
        }
        if missing_since.is_some_and(|since: Instant| since.elapsed() >= wait.drop_grace) {
            return Err(Unmined::Dropped(tx));
        }
        if started.elapsed() >= wait.timeout {
            return Err(Unmined::NotMined {
                tx,
                timeout: wait.timeout,
            });
        }
        tokio::time::sleep(wait.poll).await;
    }
}

/// Sends a filler at each of `nonces`. A refusal is only logged: the nonce may have been
/// taken meanwhile (a real chain mines an un-mined transaction again), and a gap still
/// there is filled again a grace later.
async fn fill(
    provider: &DynProvider,
    from: Address,
    nonces: &[u64],
    in_flight: &(dyn Fn(u64) -> bool + Sync),
) {
    tracing::warn!(
        account = %from,
        ?nonces,
        "nonces emptied by a reorganisation below a transaction waiting in the pool: filling them"
    );
    for &nonce in nonces {
        // Looked at again just before: the sender may have sent there meanwhile.
        if in_flight(nonce) {
            continue;
        }
        let filler = TransactionRequest::default()
            .with_from(from)
            .with_to(from)
            .with_value(U256::ZERO)
            .with_nonce(nonce)
            .with_gas_limit(FILLER_GAS);
        if let Err(error) = provider.send_transaction(filler).await {
            tracing::warn!(%error, nonce, "a filler was refused");
        }
    }
}
