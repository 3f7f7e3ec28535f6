//! Integration tests against real anvil and forge, installed by `deploy/setup.sh`.

mod artifacts;
mod docker;
mod lifecycle;
