//! What every command shares.

use tokio::sync::OnceCell;

use crate::api::Api;
use crate::chain;
use crate::chain::{Chain, Contracts};
use crate::config::Global;
use crate::error::Result;
use crate::output::Money;

/// What every command shares: the flags, the API client and a chain connection made on
/// first use (reads through the API need no RPC endpoint and no deployment).
#[derive(Debug)]
pub struct Context {
    pub global: Global,
    pub api: Api,
    chain: OnceCell<Chain>,
}

impl Context {
    pub fn new(global: Global) -> Self {
        Self {
            api: Api::new(global.api_url.clone()),
            global,
            chain: OnceCell::new(),
        }
    }

    pub fn json(&self) -> bool {
        self.global.json
    }

    /// The chain, connected on first use.
    pub async fn chain(&self) -> Result<&Chain> {
        self.chain
            .get_or_try_init(|| async {
                let contracts = Contracts::resolve(&self.global)?;
                let signer = chain::signer(&self.global)?;
                Chain::connect(&self.global.rpc_url, contracts, signer).await
            })
            .await
    }

    /// How amounts print: in the token's units when the chain can say what they are, else
    /// in base units (an API read does not fail for want of an RPC endpoint).
    pub async fn money(&self) -> Money {
        if self.json() {
            return Money(None);
        }
        match self.chain().await {
            Ok(chain) => Money(chain.token_info().await.ok().cloned()),
            Err(_) => Money(None),
        }
    }
}
