//! `gantry`, the contracts' command line: what a submitter or a node operator types.
//! Reads go through gantry-api, writes are transactions to the contracts, results come
//! from the NATS object store (or HTTP) and are checked against the chain.
//!
//! ```text
//!   gantry job submit ──permit + postJob──────────────▶ JobMarket ──┐  (chain.rs: sends, reverts decoded)
//!   gantry job cancel|accept|dispute|resolve|settle ──▶   with the job's terms and state (read_job)
//!   gantry node register|topup|set-agent ──agent's consent──▶   node calls, at the market's address
//!                                                                   │ events
//!                                           indexer ─▶ NATS ─▶ gantry-api
//!   gantry job status|list|logs|watch ◀──JSON, SSE─────────────────┘  (api.rs)
//!   gantry job result ◀──nats://bucket/key──  NATS object store     (results.rs: sha256 == resultHash)
//!   gantry keys serve, job watch ◀──requests── keys bucket ──releases──▶ nodes  (the job keys of
//!        encrypted jobs, derived from the user's identity: identity.rs)
//! ```
//!
//! An encrypted job (`job submit --encrypt`) has its result encrypted to the user's age
//! identity (`--identity`, or derived from the wallet's signature) and its secret inputs
//! to a job key that `job watch` or `keys serve` releases to the node assigned it;
//! `job result` checks the ciphertext's hash (the URI's), decrypts, then checks the
//! plaintext's (the chain's).
//!
//! `units` (amounts, sizes, durations, GPU model ids), `revert` (custom errors as
//! sentences) and `output` (text and JSON) are pure; `commands` ties them to the IO.

pub mod api;
pub mod chain;
pub mod commands;
pub mod config;
mod context;
pub mod error;
pub mod identity;
pub mod output;
pub mod results;
pub mod revert;
pub mod units;

pub use context::Context;

use crate::config::{Cli, Command, JobCommand, KeysCommand, NodeCommand};
use crate::error::Result;

/// Runs the command line's command.
pub async fn run(cli: Cli) -> Result<()> {
    let ctx = Context::new(cli.global);
    use commands::{account, job, keys, node, submit, watch};
    match cli.command {
        Command::Job(command) => match command {
            JobCommand::Submit(args) => submit::submit(&ctx, &args).await,
            JobCommand::Status(args) => job::status(&ctx, args.id).await,
            JobCommand::Watch(args) => watch::watch(&ctx, &args).await,
            JobCommand::Logs(args) => job::logs(&ctx, &args).await,
            JobCommand::Result(args) => job::result(&ctx, &args).await,
            JobCommand::Cancel(args) => job::cancel(&ctx, args.id).await,
            JobCommand::Accept(args) => job::accept(&ctx, args.id).await,
            JobCommand::Dispute(args) => job::dispute(&ctx, args.id).await,
            JobCommand::Resolve(args) => job::resolve(&ctx, &args).await,
            JobCommand::Settle(args) => job::settle(&ctx, args.id).await,
            JobCommand::List(args) => job::list(&ctx, &args).await,
        },
        Command::Node(command) => match command {
            NodeCommand::Register(args) => node::register(&ctx, &args).await,
            NodeCommand::Status(args) => node::status(&ctx, args.id).await,
            NodeCommand::Topup(args) => node::topup(&ctx, &args).await,
            NodeCommand::Exit(args) => node::exit(&ctx, args.id).await,
            NodeCommand::Withdraw(args) => node::withdraw(&ctx, args.id).await,
            NodeCommand::Earnings(args) => node::earnings(&ctx, args.id).await,
            NodeCommand::Consent(args) => node::consent(&ctx, &args).await,
            NodeCommand::SetAgent(args) => node::set_agent(&ctx, &args).await,
        },
        Command::Balance(args) => account::balance(&ctx, &args).await,
        Command::Deposit(args) => account::deposit(&ctx, &args).await,
        Command::Withdraw => account::withdraw(&ctx).await,
        Command::Keys(command) => match command {
            KeysCommand::Show => keys::show(&ctx).await,
            KeysCommand::New(args) => keys::new(&ctx, &args),
            KeysCommand::Serve => keys::serve(&ctx).await,
        },
    }
}
