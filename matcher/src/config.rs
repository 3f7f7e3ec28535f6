//! Configuration of both services: flags, each with an environment variable.

use std::time::Duration;

use alloy::signers::local::PrivateKeySigner;
pub use gantry_runtime::args::Secret;
use gantry_runtime::args::{ChainArgs, InstanceArgs, KeyArgs, KeyError, NatsArgs, parse_millis};

use crate::decide::{Strategy, Weights};

/// What both services need: the chain, the contracts, NATS, the signing key, metrics.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    #[command(flatten)]
    pub chain: ChainArgs,
    #[command(flatten)]
    pub nats: NatsArgs,
    /// The sending account's key.
    #[command(flatten)]
    pub key: KeyArgs,
    /// Transactions awaiting their receipt at most.
    #[arg(long, env = "GANTRY_MAX_PENDING_TXS", default_value_t = 256)]
    pub max_pending_txs: usize,
    /// A transaction not mined after this long is sent again with higher fees, milliseconds.
    #[arg(long = "replace-after-ms", env = "GANTRY_REPLACE_AFTER_MS", default_value = "15000", value_parser = parse_millis)]
    pub replace_after: Duration,
    /// How often to look for receipts of pending transactions, milliseconds.
    #[arg(long = "receipt-poll-ms", env = "GANTRY_RECEIPT_POLL_MS", default_value = "100", value_parser = parse_millis)]
    pub receipt_poll: Duration,
    /// A transaction not mined after this long marks the sender stuck: the service gives
    /// up its lease (keeper) or its claims (matcher) until its transactions are mined
    /// again, milliseconds.
    #[arg(long = "stuck-after-ms", env = "GANTRY_STUCK_AFTER_MS", default_value = "60000", value_parser = parse_millis)]
    pub stuck_after: Duration,
    #[command(flatten)]
    pub instance: InstanceArgs,
    /// Write a snapshot of the view every this many stream messages (0: never, and start
    /// by replaying the stream); a restart reads it back and replays only what follows.
    #[arg(long, env = "GANTRY_SNAPSHOT_EVERY", default_value_t = 100_000)]
    pub snapshot_every: u64,
}

/// `gantry-matcher`: assigns open jobs to eligible nodes.
#[derive(Debug, Clone, clap::Parser)]
#[command(version, about)]
pub struct MatcherConfig {
    #[command(flatten)]
    pub common: Common,
    /// How to choose among eligible nodes.
    #[arg(long, env = "GANTRY_STRATEGY", value_enum, default_value_t = StrategyArg::Score)]
    pub strategy: StrategyArg,
    /// Weight of price in the `score` strategy.
    #[arg(long, env = "GANTRY_WEIGHT_PRICE", default_value_t = Weights::default().price)]
    pub weight_price: f64,
    /// Weight of reputation (completed vs failed jobs) in the `score` strategy.
    #[arg(long, env = "GANTRY_WEIGHT_REPUTATION", default_value_t = Weights::default().reputation)]
    pub weight_reputation: f64,
    /// Weight of hardware fit (best-fit) in the `score` strategy.
    #[arg(long, env = "GANTRY_WEIGHT_FIT", default_value_t = Weights::default().fit)]
    pub weight_fit: f64,
    /// Weight of free slots in the `score` strategy.
    #[arg(long, env = "GANTRY_WEIGHT_LOAD", default_value_t = Weights::default().load)]
    pub weight_load: f64,
    /// A replica's claim on a job lapses this long after the replica stops renewing it
    /// (it died); the job then goes to another replica. Milliseconds.
    #[arg(long = "claim-ttl-ms", env = "GANTRY_CLAIM_TTL_MS", default_value = "30000", value_parser = parse_millis)]
    pub claim_ttl: Duration,
    /// Jobs one replica holds at most.
    #[arg(long, env = "GANTRY_MAX_CLAIMS", default_value_t = 200_000)]
    pub max_claims: i64,
    /// A (job, node) pair whose assignment reverted is not tried again for this long,
    /// milliseconds.
    #[arg(long = "revert-backoff-ms", env = "GANTRY_REVERT_BACKOFF_MS", default_value = "30000", value_parser = parse_millis)]
    pub revert_backoff: Duration,
}

/// `gantry-liveness`: the keeper — markInactive, reclaim, expire, finalize.
#[derive(Debug, Clone, clap::Parser)]
#[command(version, about)]
pub struct LivenessConfig {
    #[command(flatten)]
    pub common: Common,
    /// Time to live of the keeper lease, milliseconds: one replica acts at a time; a
    /// standby takes over within two of these after the leader dies.
    #[arg(long = "lease-ttl-ms", env = "GANTRY_LEASE_TTL_MS", default_value = "3000", value_parser = parse_millis)]
    pub lease_ttl: Duration,
}

/// [`Strategy`] as a flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    Score,
    RoundRobin,
    BestFit,
    Cheapest,
}

impl From<StrategyArg> for Strategy {
    fn from(arg: StrategyArg) -> Self {
        match arg {
            StrategyArg::Score => Self::Score,
            StrategyArg::RoundRobin => Self::RoundRobin,
            StrategyArg::BestFit => Self::BestFit,
            StrategyArg::Cheapest => Self::Cheapest,
        }
    }
}

impl Common {
    /// The signing key, from `--private-key` or `--key-file`.
    pub fn signer(&self) -> Result<PrivateKeySigner, KeyError> {
        self.key.required_signer()
    }

    pub fn instance_id(&self) -> String {
        self.instance.instance_id()
    }

    fn validate(&self) -> Result<(), String> {
        if self.max_pending_txs == 0 {
            return Err("--max-pending-txs must be at least 1".into());
        }
        if self.receipt_poll.is_zero() {
            return Err("--receipt-poll-ms must be at least 1".into());
        }
        if self.replace_after < self.receipt_poll {
            return Err("--replace-after-ms must be at least --receipt-poll-ms".into());
        }
        if self.stuck_after <= self.replace_after {
            return Err("--stuck-after-ms must be more than --replace-after-ms".into());
        }
        Ok(())
    }
}

impl MatcherConfig {
    pub fn weights(&self) -> Weights {
        Weights {
            price: self.weight_price,
            reputation: self.weight_reputation,
            fit: self.weight_fit,
            load: self.weight_load,
        }
    }

    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        self.common.validate()?;
        let weights = [
            ("--weight-price", self.weight_price),
            ("--weight-reputation", self.weight_reputation),
            ("--weight-fit", self.weight_fit),
            ("--weight-load", self.weight_load),
        ];
        for (flag, weight) in weights {
            if !(weight.is_finite() && weight >= 0.0) {
                return Err(format!("{flag} must be a finite number ≥ 0"));
            }
        }
        if weights.iter().all(|(_, w)| *w == 0.0) {
            return Err("at least one --weight-* must be above 0".into());
        }
        if self.claim_ttl < Duration::from_secs(1) {
            return Err("--claim-ttl-ms must be at least 1000".into());
        }
        if self.max_claims < 1 {
            return Err("--max-claims must be at least 1".into());
        }
        Ok(())
    }
}

impl LivenessConfig {
    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        self.common.validate()?;
        if self.lease_ttl < Duration::from_millis(300) {
            return Err("--lease-ttl-ms must be at least 300".into());
        }
        Ok(())
    }
}

impl Common {
    /// For tests and benches: the chain at `rpc_url` with its contracts, NATS at
    /// `nats_url`, signing with `private_key`; every other setting as its flag's default.
    pub fn local(chain: ChainArgs, nats_url: String, private_key: Secret) -> Self {
        Self {
            chain,
            nats: NatsArgs::local(nats_url),
            key: KeyArgs::with(private_key),
            max_pending_txs: 256,
            replace_after: Duration::from_secs(15),
            receipt_poll: Duration::from_millis(100),
            stuck_after: Duration::from_secs(60),
            instance: InstanceArgs::default(),
            snapshot_every: 100_000,
        }
    }
}

impl MatcherConfig {
    /// For tests and benches: `common`, and every matcher setting as its flag's default.
    pub fn local(common: Common) -> Self {
        let weights = Weights::default();
        Self {
            common,
            strategy: StrategyArg::Score,
            weight_price: weights.price,
            weight_reputation: weights.reputation,
            weight_fit: weights.fit,
            weight_load: weights.load,
            claim_ttl: Duration::from_secs(30),
            max_claims: 200_000,
            revert_backoff: Duration::from_secs(30),
        }
    }
}

impl LivenessConfig {
    /// For tests and benches: `common`, and the lease as its flag's default.
    pub fn local(common: Common) -> Self {
        Self {
            common,
            lease_ttl: Duration::from_secs(3),
        }
    }
}

#[cfg(test)]
mod local_tests {
    use alloy::primitives::Address;
    use clap::Parser;

    use super::*;

    /// `local` configs equal what the binaries parse from the same required flags.
    #[test]
    fn local_configs_are_the_flags_defaults() {
        let (market, registry) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let (market_flag, registry_flag) = (market.to_string(), registry.to_string());
        let args = [
            "service",
            "--rpc-url",
            "http://127.0.0.1:8545/",
            "--chain-id",
            "31337",
            "--market",
            &market_flag,
            "--registry",
            &registry_flag,
            "--nats-url",
            "nats://127.0.0.1:4222",
            "--private-key",
            "0x01",
        ];
        let chain = ChainArgs {
            rpc_url: "http://127.0.0.1:8545/".parse().unwrap(),
            chain_id: 31_337,
            market,
            registry,
        };
        let common = Common::local(chain, "nats://127.0.0.1:4222".into(), Secret::new("0x01"));
        assert_eq!(
            format!("{:?}", MatcherConfig::local(common.clone())),
            format!("{:?}", MatcherConfig::try_parse_from(args).unwrap())
        );
        assert_eq!(
            format!("{:?}", LivenessConfig::local(common)),
            format!("{:?}", LivenessConfig::try_parse_from(args).unwrap())
        );
    }
}
