//! Everything that crosses a Gantry process boundary, and nothing that does IO.
//!
//! ```text
//!  contracts (chain) ──logs──▶ indexer ──EventEnvelope on names::event()──▶ NATS JetStream
//!        ▲                                                                      │
//!        └──── bindings (matcher, worker txs) ◀──── matcher / worker / api ◀────┘
//!                                                                      └──api::* JSON──▶ CLI
//! ```
//!
//! - [`bindings`]: alloy `sol!` bindings of JobMarket, NodeRegistry and the dev token,
//!   generated from the committed artifacts.
//! - [`market`]: a job's terms and state, packed as the market takes them, folded from its
//!   events; [`consent`]: the agent's EIP-712 consent to serve an operator's node.
//! - [`spec`]: the versioned job spec submitters post on-chain (`JobPosted.spec`).
//! - [`events`]: decoding a contract log into a named, JSON-ready event with its subject
//!   key, and reading it back as a typed [`events::GantryEvent`].
//! - [`chain_stream`]: reading the chain stream: the one decoder of its messages and the
//!   block assembler every consumer folds through.
//! - [`envelope`]: the messages published on the stream.
//! - [`names`]: every stream, subject, bucket and consumer name, message-id rules.
//! - [`deployment`]: the deployment file (where the contracts live).
//! - [`eligibility`]: the one mirror of the contract's eligibility check, and the
//!   [`eligibility::Constraint`]s a node can fail.
//! - [`encryption`]: end-to-end encrypted payloads (age): identities, the job key's
//!   exchange between a submitter and the node of an attempt, result URIs with the
//!   ciphertext's hash.
//! - [`pending`]: the matcher's explanation of why a job is still waiting.
//! - [`nats_auth`]: every service's and worker's NATS permissions (`auth.conf`), from
//!   [`names`].
//! - [`nats`]: NATS addresses with credentials, split for the client's connect options.
//! - [`storage`] (feature `nats`): the settings of every stream, KV bucket and object
//!   store the services create.
//! - [`revert`]: the contracts' errors as sentences (the CLI's messages, the worker's logs);
//!   [`units`]: amounts and times as they read.
//! - [`reputation`]: a node's smoothed success rate (matcher score, API).
//! - [`status`]: the typed job and node statuses ([`status::JobStatus`], [`status::NodeStatus`]).
//! - [`jobs`]: what workers publish about running jobs (progress line format, progress,
//!   logs, completion reports) and their subjects.
//! - [`api`]: the read API's JSON answers (job and node rows, pages, details, statistics,
//!   the error body), served by gantry-api and read by the CLI.

pub mod api;
pub mod bindings;
pub mod chain_stream;
pub mod checkpoint;
pub mod consent;
pub mod deployment;
pub mod eligibility;
pub mod encryption;
pub mod envelope;
pub mod events;
pub mod handshake;
pub mod jobs;
pub mod market;
pub mod names;
pub mod nats;
pub mod nats_auth;
pub mod pending;
pub mod reputation;
pub mod revert;
pub mod spec;
pub mod status;
#[cfg(feature = "nats")]
pub mod storage;
pub mod units;
