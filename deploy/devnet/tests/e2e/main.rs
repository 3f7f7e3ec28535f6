//! End to end, through the same library `make dev` runs (`gantry_devnet::network`): every
//! service as its binary, anvil, nats-server, a Docker engine with the demo image, and the
//! API, on free ports. The service binaries must be built (`cargo test --workspace` and
//! `make test` build them).

mod cli;
mod failover;
mod support;
