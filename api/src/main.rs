//! `gantry-api`: projects the chain stream into SQL and serves the read-only HTTP API
//! (see the library docs).
//!
//! ```text
//! gantry-api --chain-id 31337 --nats-url nats://127.0.0.1:4222 \
//!            --database-url sqlite://gantry-api.db --listen 127.0.0.1:8080
//! ```

use clap::Parser;

/// The projection allocates and frees a row's JSON per event: with glibc's malloc, its
/// bookkeeping was the largest part of a catching-up projection (deploy/BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut config = gantry_api::Config::parse();
    config.metrics = Some(gantry_runtime::install_with_recorder()?);
    let shutdown = gantry_runtime::shutdown_on_signal();
    gantry_api::run(config, shutdown).await
}
