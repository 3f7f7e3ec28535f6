//! Integration tests against real anvil, forge, dockerd and PostgreSQL, installed by
//! `deploy/setup.sh`.

mod artifacts;
mod docker;
mod eligibility;
mod images;
mod lifecycle;
mod nats_config;
mod postgres;
