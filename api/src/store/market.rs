//! The market's money and rules in SQL: accounts' credits, nodes' slashes with their jobs,
//! the treasury, the policy in force and the pause, as the events left them.

use alloy::primitives::U256;
use gantry_protocol::api::{AccountRow, SlashRow};
use gantry_protocol::events::GantryEvent;

use super::events::{event_columns, stored_event};
use super::rows::{Columns, bigint, bodies, body};
use super::{JobMarket, NodeRegistry, Store, StoreError, event_name};
use crate::model::typed;

/// Slashes a node's detail lists at most.
pub const SLASHES_SHOWN: i64 = 100;

/// What the market's own events say: the treasury's balance less its swept fees and
/// slashes (what it withdrew), the policy version in force, the pause.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct MarketFigures {
    pub treasury_withdrawn: U256,
    pub policy_version: u64,
    pub paused: bool,
}

impl Store {
    /// An account's credits and their flows (`address` lowercase 0x); `None` before its
    /// first event.
    pub async fn account(&self, address: &str) -> Result<Option<AccountRow>, StoreError> {
        let row = sqlx::query("SELECT body FROM accounts WHERE account = $1")
            .bind(address.to_owned())
            .fetch_optional(self.pool())
            .await?;
        body(row)
    }

    /// Every account, by address (for tests and rebuild checks).
    pub async fn all_accounts(&self) -> Result<Vec<AccountRow>, StoreError> {
        let rows = sqlx::query("SELECT body FROM accounts ORDER BY account")
            .fetch_all(self.pool())
            .await?;
        bodies(&rows)
    }

    /// The node's slashes with their jobs, newest first (the last [`SLASHES_SHOWN`]).
    pub async fn slashes(&self, node_id: u64) -> Result<Vec<SlashRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE node_id = $1 AND name = $2 \
             ORDER BY block_number DESC, log_index DESC LIMIT $3"
        ))
        .bind(bigint(node_id)?)
        .bind(event_name::<NodeRegistry::NodeSlashed>())
        .bind(SLASHES_SHOWN)
        .fetch_all(self.pool())
        .await?;
        let mut slashes = Vec::with_capacity(rows.len());
        for row in rows {
            let event = stored_event(&row)?;
            let slash = match typed(&event)? {
                GantryEvent::Registry(NodeRegistry::NodeRegistryEvents::NodeSlashed(e)) => e,
                GantryEvent::Market(JobMarket::JobMarketEvents::NodeSlashed(e)) => {
                    NodeRegistry::NodeSlashed {
                        nodeId: e.nodeId,
                        jobId: e.jobId,
                        amount: e.amount,
                        stake: e.stake,
                    }
                }
                _ => continue,
            };
            slashes.push(SlashRow {
                job_id: slash.jobId,
                amount: slash.amount.to_string(),
                stake: slash.stake.to_string(),
                block: event.block_number,
                at: event.block_timestamp,
                tx: format!("{:#x}", event.tx_hash),
            });
        }
        Ok(slashes)
    }

    /// The treasury's withdrawals, the newest policy version and the pause.
    pub(super) async fn market_figures(&self) -> Result<MarketFigures, StoreError> {
        let mut figures = MarketFigures::default();
        for row in sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE name = $1"
        ))
        .bind(event_name::<JobMarket::TreasuryWithdrawn>())
        .fetch_all(self.pool())
        .await?
        {
            let event = stored_event(&row)?;
            if let GantryEvent::Market(JobMarket::JobMarketEvents::TreasuryWithdrawn(e)) =
                typed(&event)?
            {
                figures.treasury_withdrawn = figures.treasury_withdrawn.saturating_add(e.amount);
            }
        }
        figures.policy_version = sqlx::query("SELECT MAX(version) FROM policies")
            .fetch_one(self.pool())
            .await?
            .unsigned_or_null(0)?
            .unwrap_or(0);
        let paused = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE name = $1 ORDER BY block_number DESC, log_index DESC LIMIT 1"
        ))
        .bind(event_name::<JobMarket::PausedSet>())
        .fetch_optional(self.pool())
        .await?;
        if let Some(row) = paused {
            let event = stored_event(&row)?;
            if let GantryEvent::Market(JobMarket::JobMarketEvents::PausedSet(e)) = typed(&event)? {
                figures.paused = e.paused;
            }
        }
        Ok(figures)
    }
}
