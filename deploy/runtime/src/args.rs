//! The flags every service shares, declared once (clap `Args`, flattened into each
//! service's config): which chain and contracts, which NATS, and this instance's name and
//! metrics address. Parsed into domain types at start-up.

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
