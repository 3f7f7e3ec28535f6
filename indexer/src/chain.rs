//! The chain side: the only module that talks JSON-RPC.

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::{Filter, Log};
use alloy::transports::{RpcError, TransportErrorKind};
use url::Url;

use crate::error::ChainError;
use crate::metrics;

/// A block header, as much of it as the stream needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub number: u64,
    pub hash: B256,
    pub parent_hash: B256,
    pub timestamp: u64,
}

/// JSON-RPC access to one chain, for the logs of the Gantry contracts.
#[derive(Debug, Clone)]
pub struct Chain {
    provider: DynProvider,
    contracts: Vec<Address>,
}

impl Chain {
    pub fn connect(rpc_url: Url, contracts: Vec<Address>) -> Self {
        Self {
            provider: ProviderBuilder::new().connect_http(rpc_url).erased(),
            contracts,
        }
    }

    pub async fn chain_id(&self) -> Result<u64, ChainError> {
        self.provider.get_chain_id().await.map_err(classify)
    }

    pub async fn header_by_number(&self, number: u64) -> Result<Option<Header>, ChainError> {
        self.header_at(BlockNumberOrTag::Number(number)).await
    }

    pub async fn header_by_hash(&self, hash: B256) -> Result<Option<Header>, ChainError> {
        let block = self
            .provider
            .get_block_by_hash(hash)
            .await
            .map_err(classify)?;
        Ok(block.map(|b| to_header(&b.header)))
    }

    /// The contracts' logs in blocks `from..=to`, in chain order.
    pub async fn logs(&self, from: u64, to: u64) -> Result<Vec<Log>, ChainError> {
        let filter = Filter::new()
            .address(self.contracts.clone())
            .from_block(from)
            .to_block(to);
        self.get_logs(&filter).await
    }

    /// The contracts' logs in exactly the block with `hash` (no race with a reorg).
    pub async fn logs_at(&self, hash: B256) -> Result<Vec<Log>, ChainError> {
        let filter = Filter::new()
            .address(self.contracts.clone())
            .at_block_hash(hash);
        self.get_logs(&filter).await
    }

    async fn get_logs(&self, filter: &Filter) -> Result<Vec<Log>, ChainError> {
        let mut logs = self.provider.get_logs(filter).await.map_err(classify)?;
        logs.sort_by_key(|log| (log.block_number, log.log_index));
        Ok(logs)
    }

    /// The header of the block at `tag` (`latest`, `safe`, `finalized`, a number); `None`
    /// when there is no such block or the node does not know the tag.
    pub async fn header_at(&self, tag: BlockNumberOrTag) -> Result<Option<Header>, ChainError> {
        match self.provider.get_block_by_number(tag).await {
            Ok(block) => Ok(block.map(|b| to_header(&b.header))),
            // Nodes without a `safe`/`finalized` tag answer with an error, not null.
            Err(RpcError::ErrorResp(e)) if !matches!(tag, BlockNumberOrTag::Number(_)) => {
                tracing::debug!(%tag, error = %e.message, "block tag not supported");
                Ok(None)
            }
            Err(e) => Err(classify(e)),
        }
    }
}

fn to_header(header: &alloy::rpc::types::Header) -> Header {
    Header {
        number: header.number,
        hash: header.hash,
        parent_hash: header.parent_hash,
        timestamp: header.timestamp,
    }
}

/// Sorts an RPC failure into what the caller does about it.
fn classify(error: RpcError<TransportErrorKind>) -> ChainError {
    let kind = match &error {
        RpcError::ErrorResp(payload) => {
            let message = payload.message.to_lowercase();
            let too_large = [
                "too many",
                "limit",
                "exceed",
                "range",
                "too large",
                "response size",
            ];
            if too_large.iter().any(|needle| message.contains(needle)) {
                "too_large"
            } else {
                "rpc"
            }
        }
        RpcError::Transport(kind) if kind.to_string().to_lowercase().contains("timed out") => {
            "timeout"
        }
        RpcError::Transport(_) => "transport",
        _ => "other",
    };
    metrics::rpc_error(kind);
    match kind {
        "too_large" => ChainError::RangeTooLarge(error.to_string()),
        "timeout" => ChainError::Timeout(error.to_string()),
        _ => ChainError::Rpc(error.to_string()),
    }
}
