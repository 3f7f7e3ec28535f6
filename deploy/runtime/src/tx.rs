//! Waiting for a sent transaction, for every sender that is not the matcher's own
//! (the worker, the CLI): its receipt, polled, or the news that it is gone. A
//! reorganisation can un-mine a transaction and leave it in no pool (anvil's `anvil_reorg`
//! does; a real chain usually mines it again): a watcher of new blocks would wait out its
//! whole timeout for a receipt that never comes. A transaction neither mined nor known to
//! the node for `drop_grace` is reported as dropped at once: its nonce is free, and
//! nothing it would have done happened.

use std::time::{Duration, Instant};

use alloy::primitives::B256;
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::TransactionReceipt;

/// How long to wait, and how often to look.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// The longest wait for a receipt.
    pub timeout: Duration,
    /// How long the node may not know the transaction before it counts as dropped.
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

/// Transaction `tx`'s receipt once mined (successful or not).
pub async fn mined(
    provider: &DynProvider,
    tx: B256,
    wait: Wait,
) -> Result<TransactionReceipt, Unmined> {
    let started = Instant::now();
    let mut missing_since = None;
    let rpc = |source| Unmined::Rpc { tx, source };
    loop {
        if let Some(receipt) = provider.get_transaction_receipt(tx).await.map_err(rpc)? {
            return Ok(receipt);
        }
        let known = provider
            .get_transaction_by_hash(tx)
            .await
            .map_err(rpc)?
            .is_some();
        if known {
            missing_since = None;
        } else if missing_since.get_or_insert_with(Instant::now).elapsed() >= wait.drop_grace {
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
