//! `gantry-auth`'s flags, each with an environment variable.

use std::path::PathBuf;
use std::time::Duration;

use gantry_runtime::args::{ChainArgs, InstanceArgs, NatsArgs, Secret};
use nkeys::KeyPair;

/// `gantry-auth`: answers nats-server's auth callout for the workers of one chain.
#[derive(Debug, Clone, clap::Parser)]
#[command(version, about)]
pub struct Config {
    /// The chain and the contracts whose registry admits workers.
    #[command(flatten)]
    pub chain: ChainArgs,
    /// NATS as this service's user of account GANTRY (`auth`): the handshakes and
    /// manifests buckets, the nodes' buckets of sealed results.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// NATS as the callout's user of account AUTH (`nats://callout:…@host:4222`).
    #[arg(long, env = "GANTRY_CALLOUT_URL", hide_env_values = true)]
    pub callout_url: String,
    /// The issuer's seed (`SA…`), whose public key the servers' `auth_callout.issuer`
    /// names (prefer the environment variable or --issuer-seed-file).
    #[arg(long, env = "GANTRY_AUTH_ISSUER_SEED", hide_env_values = true)]
    pub issuer_seed: Option<Secret>,
    /// A file holding the issuer's seed.
    #[arg(
        long,
        env = "GANTRY_AUTH_ISSUER_SEED_FILE",
        conflicts_with = "issuer_seed"
    )]
    pub issuer_seed_file: Option<PathBuf>,
    /// How long a worker's credentials last, seconds: at the end the server disconnects
    /// it, it signs a new token, and its node's standing is read again.
    #[arg(long = "ttl-secs", env = "GANTRY_AUTH_TTL_SECS", default_value_t = 300)]
    pub ttl_secs: u64,
    /// Requests answered at once at most (each reads the chain).
    #[arg(long, env = "GANTRY_AUTH_CONCURRENCY", default_value_t = 64)]
    pub concurrency: usize,
    #[command(flatten)]
    pub instance: InstanceArgs,
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("the issuer's seed is required: --issuer-seed-file or GANTRY_AUTH_ISSUER_SEED")]
    NoIssuer,
    #[error("reading --issuer-seed-file {0}")]
    Read(PathBuf, #[source] std::io::Error),
    #[error("the issuer's seed is not an account seed (SA…)")]
    NotAccountSeed,
    #[error("--ttl-secs must be at least 1, --concurrency at least 1")]
    Zero,
}

impl Config {
    /// The issuer's key pair (an account key: `SA…`).
    pub fn issuer(&self) -> Result<KeyPair, ConfigError> {
        let seed = match (&self.issuer_seed, &self.issuer_seed_file) {
            (Some(seed), _) => seed.expose().to_owned(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| ConfigError::Read(path.clone(), e))?
                .trim()
                .to_owned(),
            (None, None) => return Err(ConfigError::NoIssuer),
        };
        let issuer = KeyPair::from_seed(&seed).map_err(|_| ConfigError::NotAccountSeed)?;
        if !issuer.public_key().starts_with('A') {
            return Err(ConfigError::NotAccountSeed);
        }
        Ok(issuer)
    }

    pub fn ttl(&self) -> Result<Duration, ConfigError> {
        if self.ttl_secs == 0 || self.concurrency == 0 {
            return Err(ConfigError::Zero);
        }
        Ok(Duration::from_secs(self.ttl_secs))
    }
}
