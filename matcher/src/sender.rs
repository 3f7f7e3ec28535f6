//! Sends the services' transactions from one account and reports their outcomes. The
//! only module that talks to the chain.
//!
//! ```text
//!  Call ──▶ sign with the next nonce ──▶ eth_sendRawTransaction ──▶ in flight
//!  every poll: nonce(latest) ──▶ mined ones: receipt ──▶ Report { Confirmed | Reverted | Dropped }
//!              still pending after `replace_after` ──▶ same nonce, fees +25 %, sent again
//! ```
//!
//! The nonce starts from the chain's pending count, so a restart continues after whatever
//! the previous process left in the mempool. Several transactions are in flight at once;
//! one that fails to broadcast keeps its nonce and is broadcast again on the next poll, so
//! no gap stalls the ones after it.
//!
//! A reorganisation can un-mine a transaction already reported: its nonce is free again,
//! and nothing after it can be mined until something takes it. A gap below the sender's
//! own transactions that lasts [`RECEIPT_GRACE`] is filled with a transfer of nothing to
//! itself (a *filler*); the call that was un-mined is not sent again — the service sees
//! the reorganised chain through its stream and decides anew whether it is still due.
//!
//! A sender whose oldest transaction has waited longer than `stuck_after` (the chain
//! unreachable, the account out of funds, a nonce the pool will not take) says so
//! ([`Sender::stuck`]): its service gives up its lease or claims, so that a replica whose
//! transactions land acts instead, and takes them again once it is unstuck.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use alloy::eips::eip2718::Encodable2718;
use alloy::network::{EthereumWallet, NetworkTransactionBuilder, TransactionBuilder};
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionRequest;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolCall;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::market;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::error::ChainError;
use crate::liveness::Action;
use crate::metrics;

/// One assignment of a batch: the job, its terms and state as the view holds them, and
/// the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Assign {
    pub job: u64,
    pub node: u64,
    pub with: market::Job,
}

/// Most calls one batched transaction carries (`assignBatch`, `finalizeBatch`).
pub const MAX_BATCH: usize = 10;

/// A contract call the services make, with the jobs' terms and state as the market takes
/// them. A batch that reverts reverts whole: its callers send its items one by one next.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Call {
    /// `assign`, or `assignBatch` for more than one.
    Assign(Vec<Assign>),
    /// `finalize`, or `finalizeBatch` for more than one (job and state).
    Finalize(Vec<(u64, market::State)>),
    /// Any other keeper action, with its job's terms and state (`None` only for
    /// `markInactive`, which names a node).
    Keep(Action, Option<Box<market::Job>>),
    /// A verified job's keeper action (`Verification`, `Referees`, at the market's address).
    Verified(Action, Box<VerifiedCall>),
}

/// What a verified job's call takes: its terms, its five words and its seats.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerifiedCall {
    pub job: market::Job,
    pub seats: market::Seats,
}

impl Call {
    fn kind(&self) -> &'static str {
        match self {
            Self::Assign(batch) if batch.len() > 1 => "assign_batch",
            Self::Assign(_) => "assign",
            Self::Finalize(batch) if batch.len() > 1 => "finalize_batch",
            Self::Finalize(_) => "finalize",
            Self::Keep(action, _) | Self::Verified(action, _) => action.kind(),
        }
    }

    /// Gas limit: the call's cold cost with a wide margin (unused gas is not paid).
    fn gas_limit(&self) -> u64 {
        match self {
            // A refereed placement goes through the `Referees` extension (a delegatecall,
            // so the market keeps 1/64 back): it needs ~180k of limit for ~90k of use.
            Self::Assign(batch)
                if batch
                    .iter()
                    .any(|a| a.with.terms.verification.is_verified()) =>
            {
                400_000
            }
            Self::Assign(batch) => 60_000 + 100_000 * batch.len() as u64,
            Self::Finalize(batch) => 60_000 + 60_000 * batch.len() as u64,
            Self::Keep(Action::MarkInactive { .. }, _) => 200_000,
            Self::Keep(..) => 300_000,
            // A round samples the pool until its seats fill or its samples run out
            // (`draw3of5`: 167k); a decision settles up to five seats.
            Self::Verified(Action::Draw { .. }, _) => 1_000_000,
            Self::Verified(Action::Decide { .. }, _) => 600_000,
            Self::Verified(..) => 400_000,
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Confirmed {
        block: u64,
    },
    /// Mined but reverted: the chain refused it (the node filled up, the job was taken).
    Reverted {
        block: u64,
    },
    /// Its nonce was used by another transaction of this account; the call did not land.
    Dropped,
}

impl Outcome {
    /// Its name in metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Confirmed { .. } => "confirmed",
            Outcome::Reverted { .. } => "reverted",
            Outcome::Dropped => "dropped",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub call: Call,
    pub outcome: Outcome,
    pub tx_hash: B256,
}

/// Where and as whom to send.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub rpc_url: Url,
    pub chain_id: u64,
    pub market: Address,
    pub registry: Address,
    pub signer: PrivateKeySigner,
    pub max_pending: usize,
    pub replace_after: Duration,
    pub poll: Duration,
    /// A sender whose oldest transaction waits longer than this is stuck.
    pub stuck_after: Duration,
}

/// The handle services use: calls in, reports out.
#[derive(Debug)]
pub struct Sender {
    calls: mpsc::Sender<Call>,
    pub reports: mpsc::Receiver<Report>,
    stuck: watch::Receiver<bool>,
}

impl Sender {
    /// Whether the sender is stuck: its oldest transaction has waited past `stuck_after`.
    /// Changes are seen through [`Sender::stuck_changes`].
    pub fn is_stuck(&self) -> bool {
        *self.stuck.borrow()
    }

    /// A receiver of the stuck flag, to wait on its changes.
    pub fn stuck_changes(&self) -> watch::Receiver<bool> {
        self.stuck.clone()
    }

    /// Queues a call; `false` when the sender is full (retry later).
    pub fn try_send(&self, call: Call) -> bool {
        self.calls.try_send(call).is_ok()
    }
}

/// The sending loop, for the service to run beside its own (see [`Sending::run`]).
pub struct Sending {
    worker: Worker,
    calls: mpsc::Receiver<Call>,
}

impl std::fmt::Debug for Sending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sending")
            .field("from", &self.worker.from)
            .finish_non_exhaustive()
    }
}

impl Sending {
    /// Sends, replaces and watches transactions until `cancel` fires.
    pub async fn run(self, cancel: CancellationToken) {
        self.worker.run(self.calls, cancel).await;
    }
}

/// Connects and checks the chain; the handle, and the loop to run.
pub async fn start(config: SenderConfig) -> Result<(Sender, Sending), ChainError> {
    let provider = ProviderBuilder::new()
        .disable_recommended_fillers()
        .connect_http(config.rpc_url.clone())
        .erased();
    let chain_id = provider.get_chain_id().await.map_err(ChainError::rpc)?;
    if chain_id != config.chain_id {
        return Err(ChainError::WrongChain {
            expected: config.chain_id,
            actual: chain_id,
        });
    }
    let from = config.signer.address();
    let next_nonce = provider
        .get_transaction_count(from)
        .pending()
        .await
        .map_err(ChainError::rpc)?;
    tracing::info!(account = %from, next_nonce, "sender ready");
    let (calls_tx, calls_rx) = mpsc::channel(config.max_pending);
    let (reports_tx, reports_rx) = mpsc::channel(config.max_pending * 2);
    let (stuck_tx, stuck_rx) = watch::channel(false);
    let worker = Worker {
        provider,
        wallet: EthereumWallet::from(config.signer.clone()),
        from,
        config,
        next_nonce,
        in_flight: BTreeMap::new(),
        fees: None,
        reports: reports_tx,
        gap_since: None,
        stuck: stuck_tx,
    };
    Ok((
        Sender {
            calls: calls_tx,
            reports: reports_rx,
            stuck: stuck_rx,
        },
        Sending {
            worker,
            calls: calls_rx,
        },
    ))
}

struct InFlight {
    /// The call, or none for a filler.
    call: Option<Call>,
    /// Every hash sent for this nonce; any of them may be the one mined.
    hashes: Vec<B256>,
    raw: Bytes,
    fees: Fees,
    /// When it was first signed (replacements keep it).
    first_sent: Instant,
    sent_at: Instant,
    broadcast: bool,
    /// Since when the nonce counts as mined but no receipt of ours was found.
    missing_since: Option<Instant>,
}

/// A node may count a block's nonces before its receipts are served: a mined nonce with
/// no receipt of ours is reported Dropped only after this long.
const RECEIPT_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy)]
struct Fees {
    max_fee: u128,
    priority: u128,
    fetched_at: Instant,
}

struct Worker {
    provider: DynProvider,
    wallet: EthereumWallet,
    from: Address,
    config: SenderConfig,
    next_nonce: u64,
    in_flight: BTreeMap<u64, InFlight>,
    fees: Option<Fees>,
    reports: mpsc::Sender<Report>,
    /// Since when the nonces from the first one mined on are free below the first of ours.
    gap_since: Option<(u64, Instant)>,
    stuck: watch::Sender<bool>,
}

/// Gas of a filler (a plain transfer).
const FILLER_GAS: u64 = 21_000;

/// Fee estimates are refreshed this often.
const FEES_MAX_AGE: Duration = Duration::from_secs(5);

impl Worker {
    async fn run(mut self, mut calls: mpsc::Receiver<Call>, cancel: CancellationToken) {
        let mut poll = tokio::time::interval(self.config.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let room = self.in_flight.len() < self.config.max_pending;
            tokio::select! {
                () = cancel.cancelled() => break,
                Some(call) = calls.recv(), if room => self.send_new(call).await,
                _ = poll.tick() => {
                    if let Err(e) = self.poll().await {
                        metrics::rpc_error();
                        tracing::warn!(error = %e, "checking pending transactions");
                    }
                    self.check_stuck();
                }
            }
        }
        if !self.in_flight.is_empty() {
            tracing::info!(
                pending = self.in_flight.len(),
                "stopping with transactions pending; the next start continues after them"
            );
        }
    }

    async fn send_new(&mut self, call: Call) {
        if let Some(why) = self.refused_in_simulation(&call).await {
            tracing::info!(call = ?call, reason = %why, "refused when simulated; not sent");
            self.report(call, Outcome::Reverted { block: 0 }, B256::ZERO)
                .await;
            return;
        }
        let fees = match self.current_fees().await {
            Ok(fees) => fees,
            Err(e) => {
                metrics::rpc_error();
                tracing::warn!(error = %e, call = ?call, "no fee estimate; call dropped");
                self.report(call, Outcome::Dropped, B256::ZERO).await;
                return;
            }
        };
        let nonce = self.next_nonce;
        let (hash, raw) = match self.sign(Some(&call), nonce, fees).await {
            Ok(signed) => signed,
            Err(e) => {
                tracing::error!(error = %e, call = ?call, "signing failed; call dropped");
                self.report(call, Outcome::Dropped, B256::ZERO).await;
                return;
            }
        };
        self.next_nonce += 1;
        let mut entry = InFlight {
            call: Some(call),
            hashes: vec![hash],
            raw,
            fees,
            first_sent: Instant::now(),
            sent_at: Instant::now(),
            broadcast: false,
            missing_since: None,
        };
        match self.broadcast(&entry.raw).await {
            Ok(()) => entry.broadcast = true,
            Err(BroadcastError::NonceTooLow) => {
                // Someone else used this account: take the chain's count and sign again.
                if let Ok(pending) = self
                    .provider
                    .get_transaction_count(self.from)
                    .pending()
                    .await
                {
                    tracing::warn!(nonce, pending, "nonce already used; resynchronising");
                    self.next_nonce = pending.max(nonce + 1);
                }
                // The old nonce entry stays, reported Dropped once the chain passes it.
            }
            Err(BroadcastError::Other(e)) => {
                metrics::rpc_error();
                tracing::warn!(error = %e, nonce, "broadcast failed; retrying on the next poll");
            }
        }
        metrics::tx_sent(kind(entry.call.as_ref()));
        tracing::debug!(call = ?entry.call, nonce, tx = %hash, "transaction sent");
        self.in_flight.insert(nonce, entry);
    }

    /// Why the chain would refuse `call` now, for the calls simulated before they are
    /// sent: a refereed job's placement, whose provider must hold free stake the view does
    /// not follow (the hold; a pool member keeps the pool's floor free), so that a node
    /// short of it costs an `eth_call`, not a mined revert. `None` to send (also when the
    /// simulation could not be made: the chain decides).
    async fn refused_in_simulation(&self, call: &Call) -> Option<String> {
        let Call::Assign(batch) = call else {
            return None;
        };
        if !batch
            .iter()
            .any(|a| a.with.terms.verification.is_verified())
        {
            return None;
        }
        let (to, input) = match self.target(call) {
            Ok(target) => target,
            Err(why) => return Some(why),
        };
        let request = TransactionRequest::default()
            .with_from(self.from)
            .with_to(to)
            .with_input(input);
        match self.provider.call(request).await {
            Ok(_) => None,
            Err(e) if e.as_error_resp().is_some() => Some(e.to_string()),
            Err(e) => {
                tracing::debug!(error = %e, "could not simulate; sending");
                None
            }
        }
    }

    /// Whether the oldest transaction has waited past `stuck_after`; says so on a change.
    fn check_stuck(&self) {
        let oldest = self.in_flight.values().map(|e| e.first_sent).min();
        let stuck = oldest.is_some_and(|t| t.elapsed() > self.config.stuck_after);
        let changed = self
            .stuck
            .send_if_modified(|was| std::mem::replace(was, stuck) != stuck);
        if changed {
            metrics::sender_stuck(stuck);
            if stuck {
                tracing::error!(
                    pending = self.in_flight.len(),
                    after = ?self.config.stuck_after,
                    "transactions are not being mined: the sender is stuck, and the service gives up its role until they are"
                );
            } else {
                tracing::info!("transactions are mined again: the sender is unstuck");
            }
        }
    }

    async fn poll(&mut self) -> Result<(), ChainError> {
        if self.in_flight.is_empty() {
            return Ok(());
        }
        let mined_below = self
            .provider
            .get_transaction_count(self.from)
            .latest()
            .await
            .map_err(ChainError::rpc)?;
        self.fill_gap(mined_below).await?;
        let done: Vec<u64> = self
            .in_flight
            .range(..mined_below)
            .map(|(n, _)| *n)
            .collect();
        for nonce in done {
            let entry = &self.in_flight[&nonce];
            let mut found = None;
            for hash in entry.hashes.iter().rev() {
                if let Some(receipt) = self
                    .provider
                    .get_transaction_receipt(*hash)
                    .await
                    .map_err(ChainError::rpc)?
                {
                    found = Some((*hash, receipt));
                    break;
                }
            }
            if found.is_none() {
                let entry = self.in_flight.get_mut(&nonce).expect("present");
                let since = *entry.missing_since.get_or_insert_with(Instant::now);
                if since.elapsed() < RECEIPT_GRACE {
                    continue;
                }
            }
            let entry = self.in_flight.remove(&nonce).expect("present");
            let Some(call) = entry.call else {
                tracing::info!(nonce, mined = found.is_some(), "a filler's nonce is taken");
                continue;
            };
            let (outcome, hash) = match found {
                Some((hash, receipt)) => {
                    let block = receipt.block_number.unwrap_or_default();
                    if receipt.status() {
                        (Outcome::Confirmed { block }, hash)
                    } else {
                        (Outcome::Reverted { block }, hash)
                    }
                }
                None => (Outcome::Dropped, B256::ZERO),
            };
            self.report(call, outcome, hash).await;
        }

        // Still pending: broadcast what never went out, replace what is stuck.
        let waiting: Vec<u64> = self
            .in_flight
            .range(mined_below..)
            .map(|(n, _)| *n)
            .collect();
        for nonce in waiting {
            let (call, broadcast, stuck, fees) = {
                let entry = &self.in_flight[&nonce];
                (
                    entry.call.clone(),
                    entry.broadcast,
                    entry.sent_at.elapsed() >= self.config.replace_after,
                    entry.fees,
                )
            };
            if broadcast && !stuck {
                continue;
            }
            if stuck {
                // Replacement needs at least +10 % on both fees; take +25 %, and at least
                // today's estimate.
                let current = self.current_fees().await?;
                let bumped = Fees {
                    max_fee: (fees.max_fee * 5 / 4 + 1).max(current.max_fee),
                    priority: (fees.priority * 5 / 4 + 1).max(current.priority),
                    fetched_at: current.fetched_at,
                };
                let (hash, raw) = self
                    .sign(call.as_ref(), nonce, bumped)
                    .await
                    .map_err(|e| ChainError::Signing(e.into()))?;
                metrics::tx_replaced(kind(call.as_ref()));
                tracing::info!(call = ?call, nonce, tx = %hash, max_fee = bumped.max_fee, "replacing a stuck transaction");
                let entry = self.in_flight.get_mut(&nonce).expect("present");
                entry.hashes.push(hash);
                entry.raw = raw;
                entry.fees = bumped;
                entry.sent_at = Instant::now();
            }
            let raw = self.in_flight[&nonce].raw.clone();
            match self.broadcast(&raw).await {
                Ok(()) | Err(BroadcastError::NonceTooLow) => {
                    // NonceTooLow: mined meanwhile; the next poll finds the receipt.
                    self.in_flight.get_mut(&nonce).expect("present").broadcast = true;
                }
                Err(BroadcastError::Other(e)) => {
                    metrics::rpc_error();
                    tracing::warn!(error = %e, nonce, "broadcast failed; retrying on the next poll");
                }
            }
        }
        Ok(())
    }

    /// Fills the nonces a reorganisation emptied below the first of this sender's
    /// transactions in flight, once the gap has lasted [`RECEIPT_GRACE`] (a transaction of
    /// this account sent by someone else may be on its way meanwhile).
    async fn fill_gap(&mut self, mined_below: u64) -> Result<(), ChainError> {
        let first_ours = self
            .in_flight
            .keys()
            .next()
            .copied()
            .unwrap_or(self.next_nonce);
        if mined_below >= first_ours {
            self.gap_since = None;
            return Ok(());
        }
        match self.gap_since {
            Some((from, since)) if from == mined_below => {
                if since.elapsed() < RECEIPT_GRACE {
                    return Ok(());
                }
            }
            _ => {
                self.gap_since = Some((mined_below, Instant::now()));
                return Ok(());
            }
        }
        self.gap_since = None;
        let fees = self.current_fees().await?;
        tracing::warn!(
            from = mined_below,
            to = first_ours,
            "nonces emptied by a reorganisation: filling them so that the transactions after them are mined"
        );
        for nonce in mined_below..first_ours {
            let (hash, raw) = self
                .sign(None, nonce, fees)
                .await
                .map_err(|e| ChainError::Signing(e.into()))?;
            metrics::tx_sent("fill");
            let broadcast = self.broadcast(&raw).await.is_ok();
            self.in_flight.insert(
                nonce,
                InFlight {
                    call: None,
                    hashes: vec![hash],
                    raw,
                    fees,
                    first_sent: Instant::now(),
                    sent_at: Instant::now(),
                    broadcast,
                    missing_since: None,
                },
            );
        }
        Ok(())
    }

    /// Signs `call` (none: a filler, a transfer of nothing to itself) at `nonce`.
    async fn sign(
        &self,
        call: Option<&Call>,
        nonce: u64,
        fees: Fees,
    ) -> Result<(B256, Bytes), String> {
        let (to, input, gas) = match call {
            None => (self.from, Vec::new(), FILLER_GAS),
            Some(call) => {
                let (to, input) = self.target(call)?;
                (to, input, call.gas_limit())
            }
        };
        let request = TransactionRequest::default()
            .with_from(self.from)
            .with_to(to)
            .with_input(input)
            .with_nonce(nonce)
            .with_chain_id(self.config.chain_id)
            .with_gas_limit(gas)
            .with_max_fee_per_gas(fees.max_fee)
            .with_max_priority_fee_per_gas(fees.priority);
        let envelope = request
            .build(&self.wallet)
            .await
            .map_err(|e| e.to_string())?;
        Ok((*envelope.tx_hash(), envelope.encoded_2718().into()))
    }

    /// The contract `call` goes to, and its calldata.
    fn target(&self, call: &Call) -> Result<(Address, Vec<u8>), String> {
        let market = self.config.market;
        let (to, input) = match call {
            Call::Assign(batch) => match batch.as_slice() {
                [] => return Err("an empty assignment batch".into()),
                [one] if one.with.terms.verification.is_verified() => {
                    (market, assign_refereed(one)?)
                }
                many if many.iter().any(|a| a.with.terms.verification.is_verified()) => {
                    return Err("a refereed job's provider is placed alone".into());
                }
                [one] => (
                    market,
                    JobMarket::assignCall {
                        jobId: one.job,
                        nodeId: one.node,
                        terms: one.with.terms.pack(),
                        state: one.with.state.pack(),
                    }
                    .abi_encode(),
                ),
                many => (
                    market,
                    JobMarket::assignBatchCall {
                        assignments: many
                            .iter()
                            .map(|a| JobMarket::Assignment {
                                jobId: a.job,
                                nodeId: a.node,
                                terms: a.with.terms.pack(),
                                state: a.with.state.pack(),
                            })
                            .collect(),
                    }
                    .abi_encode(),
                ),
            },
            Call::Finalize(batch) => match batch.as_slice() {
                [] => return Err("an empty finalize batch".into()),
                [(job, state)] => (
                    market,
                    JobMarket::finalizeCall {
                        jobId: *job,
                        state: state.pack(),
                    }
                    .abi_encode(),
                ),
                many => (
                    market,
                    JobMarket::finalizeBatchCall {
                        jobIds: many.iter().map(|(job, _)| *job).collect(),
                        states: many.iter().map(|(_, state)| state.pack()).collect(),
                    }
                    .abi_encode(),
                ),
            },
            Call::Keep(Action::MarkInactive { node }, _) => (
                self.config.registry,
                NodeRegistry::markInactiveCall { nodeId: *node }.abi_encode(),
            ),
            Call::Keep(action, None) => {
                return Err(format!("{action:?} needs the job's terms and state"));
            }
            Call::Keep(Action::Reclaim { job, .. }, Some(with)) => (
                market,
                JobMarket::reclaimCall {
                    jobId: *job,
                    terms: with.terms.pack(),
                    state: with.state.pack(),
                }
                .abi_encode(),
            ),
            Call::Keep(Action::Expire { job }, Some(with)) => (
                market,
                JobMarket::expireCall {
                    jobId: *job,
                    terms: with.terms.pack(),
                    state: with.state.pack(),
                }
                .abi_encode(),
            ),
            Call::Keep(Action::Finalize { job }, Some(with)) => (
                market,
                JobMarket::finalizeCall {
                    jobId: *job,
                    state: with.state.pack(),
                }
                .abi_encode(),
            ),
            Call::Keep(Action::SettleDispute { job }, Some(with)) => (
                market,
                JobMarket::settleDisputeCall {
                    jobId: *job,
                    terms: with.terms.pack(),
                    state: with.state.pack(),
                }
                .abi_encode(),
            ),
            Call::Keep(action, Some(_)) => {
                return Err(format!(
                    "{action:?} is a verified job's: it goes as Call::Verified"
                ));
            }
            Call::Verified(action, with) => (market, verified_input(action, with)?),
        };
        Ok((to, input))
    }

    async fn broadcast(&self, raw: &Bytes) -> Result<(), BroadcastError> {
        match self.provider.send_raw_transaction(raw).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let message = e.to_string().to_lowercase();
                if message.contains("already known") || message.contains("already imported") {
                    Ok(())
                } else if message.contains("nonce too low") {
                    Err(BroadcastError::NonceTooLow)
                } else {
                    Err(BroadcastError::Other(e.to_string()))
                }
            }
        }
    }

    async fn current_fees(&mut self) -> Result<Fees, ChainError> {
        if let Some(fees) = self.fees
            && fees.fetched_at.elapsed() < FEES_MAX_AGE
        {
            return Ok(fees);
        }
        let estimate = self
            .provider
            .estimate_eip1559_fees()
            .await
            .map_err(ChainError::rpc)?;
        let fees = Fees {
            max_fee: estimate.max_fee_per_gas,
            priority: estimate.max_priority_fee_per_gas,
            fetched_at: Instant::now(),
        };
        self.fees = Some(fees);
        Ok(fees)
    }

    async fn report(&self, call: Call, outcome: Outcome, tx_hash: B256) {
        metrics::tx_outcome(call.kind(), outcome.label());
        // The receiver is gone only at shutdown.
        let _ = self
            .reports
            .send(Report {
                call,
                outcome,
                tx_hash,
            })
            .await;
    }
}

/// A call's name in metrics; a filler's is `fill`.
fn kind(call: Option<&Call>) -> &'static str {
    call.map_or("fill", Call::kind)
}

enum BroadcastError {
    NonceTooLow,
    Other(String),
}

/// The calldata of a verified job's keeper action: the extensions take the job's terms,
/// its five words and, to open or decide, every seat's word in order.
fn verified_input(action: &Action, with: &VerifiedCall) -> Result<Vec<u8>, String> {
    use gantry_protocol::bindings::{Referees, Verification};
    let job = &with.job;
    let terms: Verification::JobTerms = job.terms.pack().into();
    let refereed_terms: Referees::JobTerms = job.terms.pack().into();
    let state = job
        .state
        .pack_verified()
        .ok_or_else(|| format!("{action:?}: the job's state has no verified words"))?;
    let refereed_state = Referees::VerifiedState::from(state.clone());
    let seats = with.seats.list(usize::from(job.terms.verification.size));
    Ok(match *action {
        Action::Draw { job } => Verification::drawCall {
            jobId: job,
            terms,
            state,
        }
        .abi_encode(),
        Action::ReclaimSeat { job, seat } => Verification::reclaimSeatCall {
            jobId: job,
            terms,
            state,
            seat,
            s: seats
                .get(usize::from(seat))
                .cloned()
                .ok_or_else(|| format!("{action:?}: no such seat"))?,
        }
        .abi_encode(),
        Action::OpenReveals { job } => Verification::openRevealsCall {
            jobId: job,
            terms,
            state,
            seats,
        }
        .abi_encode(),
        Action::Decide { job } if job_is_refereed(with) => Referees::decideRefereesCall {
            jobId: job,
            terms: refereed_terms,
            state: refereed_state,
            seats: seats.into_iter().map(Referees::Seat::from).collect(),
        }
        .abi_encode(),
        Action::Decide { job } => Verification::decideCall {
            jobId: job,
            terms,
            state,
            seats,
        }
        .abi_encode(),
        Action::ExpireVerified { job } => Verification::expireVerifiedCall {
            jobId: job,
            terms,
            state,
        }
        .abi_encode(),
        Action::ReclaimRefereed { job, .. } => Referees::reclaimRefereedCall {
            jobId: job,
            terms: refereed_terms,
            state: refereed_state,
        }
        .abi_encode(),
        Action::FinalizeVerified { job } => Referees::finalizeVerifiedCall {
            jobId: job,
            terms: refereed_terms,
            state: refereed_state,
        }
        .abi_encode(),
        Action::SettleVerified { job } => Referees::settleVerifiedCall {
            jobId: job,
            terms: refereed_terms,
            state: refereed_state,
        }
        .abi_encode(),
        other => return Err(format!("{other:?} is not a verified job's action")),
    })
}

/// `assignRefereed`: a refereed job's provider, with the job's five words.
fn assign_refereed(one: &Assign) -> Result<Vec<u8>, String> {
    use gantry_protocol::bindings::Referees;
    let state = one.with.state.pack_verified().ok_or_else(|| {
        format!(
            "job {}: a refereed job's state has no verified words",
            one.job
        )
    })?;
    Ok(Referees::assignRefereedCall {
        jobId: one.job,
        nodeId: one.node,
        terms: one.with.terms.pack().into(),
        state: state.into(),
    }
    .abi_encode())
}

fn job_is_refereed(with: &VerifiedCall) -> bool {
    with.job.terms.verification.tier == market::Verification::REFEREED
}
