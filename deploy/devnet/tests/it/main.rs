//! Integration tests against real anvil, forge and dockerd, installed by `deploy/setup.sh`.

mod artifacts;
mod docker;
mod images;
mod lifecycle;
