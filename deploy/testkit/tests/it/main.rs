//! The fixtures themselves, against the real programs `deploy/setup.sh` installs.
//!
//! - `docker`: a private dockerd answers on its socket and stops on drop.
//! - `images`: the busybox job image imports once and runs a locked-down job (no network,
//!   an unprivileged user, a read-only root file system with a tmpfs `/tmp`).
//! - `postgres`: two private PostgreSQL clusters answer on their own ports and stop on
//!   drop.
//! - `testnet`: a `TestNet` with the indexer, a matcher and a keeper in this process takes
//!   a job from post to assigned on a registered node, the matcher signing as the account
//!   it granted the role; one with PostgreSQL alone answers SQL and has no NATS.

mod docker;
mod images;
mod postgres;
mod testnet;
