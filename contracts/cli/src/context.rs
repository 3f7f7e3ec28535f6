//! What every command shares.

use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;

use crate::api::Api;
use crate::chain;
use crate::chain::{Chain, Contracts};
use crate::config::Global;
use crate::error::{CliError, Result};
use crate::identity::{self, UserIdentity};
use crate::output::{self, Money};
use crate::revert::TokenInfo;

/// What every command shares: the flags, the API client and a chain connection made on
/// first use (reads through the API need no RPC endpoint and no deployment).
#[derive(Debug)]
pub struct Context {
    pub global: Global,
    pub api: Api,
    chain: OnceCell<Chain>,
    identity: OnceCell<UserIdentity>,
}

impl Context {
    pub fn new(global: Global) -> Self {
        Self {
            api: Api::new(global.api_url.clone()),
            global,
            chain: OnceCell::new(),
            identity: OnceCell::new(),
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

    /// The user's age identity, made on first use: `--identity`'s file, else derived from
    /// the signing key's signature for this chain's market (`crate::identity`).
    pub async fn identity(&self) -> Result<&UserIdentity> {
        self.identity
            .get_or_try_init(|| async {
                if let Some(path) = &self.global.identity {
                    return identity::read_file(path);
                }
                let chain = self.chain().await?;
                let wallet = chain.wallet().map_err(|_| {
                    CliError::usage(
                        "no identity: pass --identity FILE (GANTRY_IDENTITY; `gantry keys new` \
                         makes one), or set GANTRY_PRIVATE_KEY (or --key-file) to derive it \
                         from your wallet",
                    )
                })?;
                identity::from_wallet(wallet, chain.chain_id, *chain.market.address())
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

    /// Prints an answer of the API: its own JSON with `--json`, else `describe`d for people
    /// (amounts as [`Context::money`] shows them).
    pub async fn show<T: DeserializeOwned>(
        &self,
        value: serde_json::Value,
        describe: impl FnOnce(&T, &Money) -> String,
    ) -> Result<()> {
        if self.json() {
            output::json(&value);
            return Ok(());
        }
        let answer: T = Api::typed(&value)?;
        let money = self.money().await;
        print!("{}", describe(&answer, &money));
        Ok(())
    }

    /// Says what a command did: `json` with `--json`, else the line `text` makes.
    pub fn say(&self, json: serde_json::Value, text: impl FnOnce() -> String) {
        if self.json() {
            output::json(&json);
        } else {
            println!("{}", text());
        }
    }

    /// Says what a command did: `json` with `--json`, else the line `text` makes with the
    /// token's decimals and symbol (read from the chain only then).
    pub async fn say_in_tokens(
        &self,
        json: serde_json::Value,
        text: impl FnOnce(&TokenInfo) -> String,
    ) -> Result<()> {
        if self.json() {
            output::json(&json);
            return Ok(());
        }
        let token = self.chain().await?.token_info().await?;
        println!("{}", text(token));
        Ok(())
    }
}
