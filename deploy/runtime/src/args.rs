//! The flags every service shares, declared once (clap `Args`, flattened into each
//! service's config): which chain and contracts, which NATS, the signing key, and this
//! instance's name and metrics address. Parsed into domain types at start-up.

use std::net::SocketAddr;

use alloy::primitives::Address;
use url::Url;

/// The chain and the Gantry contracts on it.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ChainArgs {
    /// JSON-RPC endpoint of the chain.
    #[arg(long, env = "GANTRY_RPC_URL")]
    pub rpc_url: Url,
    /// Chain id the RPC endpoint must report; the service refuses another chain.
    #[arg(long, env = "GANTRY_CHAIN_ID")]
    pub chain_id: u64,
    /// Address of the JobMarket contract.
    #[arg(long, env = "GANTRY_MARKET")]
    pub market: Address,
    /// Address of the NodeRegistry contract.
    #[arg(long, env = "GANTRY_REGISTRY")]
    pub registry: Address,
}

/// The NATS servers, and the replicas of what this service creates there.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct NatsArgs {
    /// NATS servers, optionally with this service's user and password
    /// (`nats://user:pass@host:4222,nats://host2:4222`; logs show only the servers).
    #[arg(long, env = "GANTRY_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// Replicas of the streams and buckets this service creates: 1 on a single server, 3
    /// on a three-node cluster.
    #[arg(long, env = "GANTRY_NATS_REPLICAS", default_value = "1", value_parser = gantry_protocol::storage::parse_replicas)]
    pub nats_replicas: usize,
}

impl NatsArgs {
    /// One server at `nats_url`, replicas 1.
    pub fn local(nats_url: impl Into<String>) -> Self {
        Self {
            nats_url: nats_url.into(),
            nats_replicas: 1,
        }
    }
}

/// This instance: its name in logs and leases, and where it serves metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct InstanceArgs {
    /// Name of this instance in logs and leases (default: host name and process id).
    #[arg(long, env = "GANTRY_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// Address to serve Prometheus metrics on (`/metrics`); none when unset.
    #[arg(long, env = "GANTRY_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

impl InstanceArgs {
    /// The configured name, else the host name and the process id.
    pub fn instance_id(&self) -> String {
        crate::instance_id(self.instance_id.as_deref())
    }
}

/// A secret as given (a private key): its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.trim().to_owned()))
    }
}

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into().trim().to_owned())
    }

    /// The secret itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The signing key of an account that sends transactions: a flag (or its environment
/// variable) or a file, at most one; never logged.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct KeyArgs {
    /// The signing key, hex (prefer the environment variable or --key-file: a flag's value
    /// shows in the process list).
    #[arg(
        long,
        env = "GANTRY_PRIVATE_KEY",
        hide_env_values = true,
        global = true,
        value_name = "HEX"
    )]
    pub private_key: Option<Secret>,
    /// A file holding the signing key (hex).
    #[arg(
        long,
        env = "GANTRY_KEY_FILE",
        global = true,
        conflicts_with = "private_key"
    )]
    pub key_file: Option<std::path::PathBuf>,
}

/// What a binary calls the two places a signing key may come from, for its messages: the
/// value itself (a flag or an environment variable) and a file holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySources {
    pub value: &'static str,
    pub file: &'static str,
}

impl KeySources {
    /// [`KeyArgs`]' flags.
    pub const FLAGS: Self = Self {
        value: "--private-key/GANTRY_PRIVATE_KEY",
        file: "--key-file",
    };
}

/// Why the signing key could not be had. The messages name where it came from, never the
/// value.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("a signing key is required: {} or {}", .0.file, .0.value)]
    Missing(KeySources),
    #[error("both {} and {} are set; keep one", .0.value, .0.file)]
    Both(KeySources),
    #[error("{given} {}", path.display())]
    Read {
        given: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{given}: not a 32-byte hex private key")]
    Malformed { given: &'static str },
}

/// The signer from a key given as a value or in a file (at most one of them), if any;
/// `sources` names them in the errors.
pub fn load_signer(
    value: Option<&Secret>,
    file: Option<&std::path::Path>,
    sources: KeySources,
) -> Result<Option<alloy::signers::local::PrivateKeySigner>, KeyError> {
    let (hex, given) = match (value, file) {
        (Some(_), Some(_)) => return Err(KeyError::Both(sources)),
        (Some(secret), None) => (secret.0.clone(), sources.value),
        (None, Some(path)) => (
            std::fs::read_to_string(path)
                .map_err(|source| KeyError::Read {
                    given: sources.file,
                    path: path.to_owned(),
                    source,
                })?
                .trim()
                .to_owned(),
            sources.file,
        ),
        (None, None) => return Ok(None),
    };
    hex.parse()
        .map(Some)
        .map_err(|_| KeyError::Malformed { given })
}

impl KeyArgs {
    /// Signing with `key`.
    pub fn with(key: Secret) -> Self {
        Self {
            private_key: Some(key),
            key_file: None,
        }
    }

    /// The signer, if a key was given.
    pub fn signer(&self) -> Result<Option<alloy::signers::local::PrivateKeySigner>, KeyError> {
        load_signer(
            self.private_key.as_ref(),
            self.key_file.as_deref(),
            KeySources::FLAGS,
        )
    }

    /// The signer, which the caller needs.
    pub fn required_signer(&self) -> Result<alloy::signers::local::PrivateKeySigner, KeyError> {
        self.signer()?.ok_or(KeyError::Missing(KeySources::FLAGS))
    }
}

/// A duration flag given in milliseconds (`--poll-ms 500`), kept as a [`Duration`].
pub fn parse_millis(text: &str) -> Result<std::time::Duration, String> {
    text.trim()
        .parse::<u64>()
        .map(std::time::Duration::from_millis)
        .map_err(|_| format!("`{text}` is not a whole number of milliseconds"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct WithKey {
        #[command(flatten)]
        key: KeyArgs,
    }

    #[test]
    fn a_key_comes_from_one_place_and_is_never_echoed() {
        let hex = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
        let parsed = WithKey::try_parse_from(["t", "--private-key", hex]).unwrap();
        let signer = parsed.key.required_signer().unwrap();
        assert!(
            !format!("{parsed:?}").contains("59c6995e"),
            "Debug hides the key"
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), format!("{hex}\n")).unwrap();
        let from_file = WithKey::try_parse_from(["t", "--key-file", file.path().to_str().unwrap()])
            .unwrap()
            .key
            .required_signer()
            .unwrap();
        assert_eq!(from_file.address(), signer.address());
        assert!(
            WithKey::try_parse_from(["t", "--private-key", hex, "--key-file", "k"]).is_err(),
            "one place only"
        );
        let none = WithKey::try_parse_from(["t"]).unwrap().key;
        assert!(matches!(none.required_signer(), Err(KeyError::Missing(_))));
        let bad = WithKey::try_parse_from(["t", "--private-key", "0xnot-a-key"])
            .unwrap()
            .key;
        let message = bad.required_signer().unwrap_err().to_string();
        assert!(message.contains("not a 32-byte") && !message.contains("not-a-key"));
    }

    #[test]
    fn a_binary_names_its_own_key_sources() {
        let agent = KeySources {
            value: "GANTRY_AGENT_KEY",
            file: "agent_key_file",
        };
        let hex = Secret::new("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
        let missing = std::path::Path::new("/nonexistent/agent.key");
        let both = load_signer(Some(&hex), Some(missing), agent).unwrap_err();
        assert_eq!(
            both.to_string(),
            "both GANTRY_AGENT_KEY and agent_key_file are set; keep one"
        );
        let unreadable = load_signer(None, Some(missing), agent).unwrap_err();
        assert_eq!(
            unreadable.to_string(),
            "agent_key_file /nonexistent/agent.key"
        );
        let io = std::error::Error::source(&unreadable)
            .and_then(|source| source.downcast_ref::<std::io::Error>())
            .expect("the io error is the source");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(load_signer(None, None, agent).unwrap().is_none());
        assert!(load_signer(Some(&hex), None, agent).unwrap().is_some());
    }

    #[derive(Debug, Parser)]
    struct Service {
        #[command(flatten)]
        chain: ChainArgs,
        #[command(flatten)]
        nats: NatsArgs,
        #[command(flatten)]
        instance: InstanceArgs,
    }

    #[test]
    fn the_shared_flags_parse_into_domain_types() {
        let service = Service::try_parse_from([
            "service",
            "--rpc-url",
            "http://127.0.0.1:8545",
            "--chain-id",
            "31337",
            "--market",
            "0x0000000000000000000000000000000000000001",
            "--registry",
            "0x0000000000000000000000000000000000000002",
            "--nats-replicas",
            "3",
        ])
        .unwrap();
        assert_eq!(service.chain.chain_id, 31337);
        assert_eq!(service.chain.market, Address::with_last_byte(1));
        assert_eq!(service.nats.nats_replicas, 3);
        assert_eq!(service.nats.nats_url, "nats://127.0.0.1:4222");
        assert!(service.instance.instance_id().contains('-'));
        let refused = Service::try_parse_from(["service", "--rpc-url", "not a url"]);
        assert!(refused.is_err());
        assert_eq!(
            parse_millis("250"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert!(parse_millis("1s").is_err());
    }
}
