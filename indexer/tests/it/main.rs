//! Integration tests against real anvil and nats-server 2.15, started per test.

mod crash;
mod credentials;
mod failover;
mod handoff;
mod harness;
mod lifecycle;
mod reorg;
