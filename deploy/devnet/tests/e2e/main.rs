//! End to end, through the same library `make dev` runs (`gantry_devnet::network`): every
//! service as its binary, anvil, nats-server, a Docker engine with the demo image, and the
//! API, on free ports. The service binaries must be built (`cargo test --workspace` and
//! `make test` build them).
//!
//! The network has a 5 s challenge window and a 15 s heartbeat timeout.
//!
//! - `cli`: the demo job submitted with `gantry job submit` from a spec file, watched with
//!   `gantry job watch --json` through assignment to completion, its progress (epoch 30,
//!   loss < 0.01) and logs read through the API, its result downloaded with `gantry job
//!   result` and its hash equal to the chain's, the model fitting the data, and the
//!   provider's `gantry node withdraw-earnings` paying out exactly the job's payout.
//! - `failover`: two workers, the one running the job SIGKILLed after its first
//!   checkpoint: the keeper marks its node inactive and reclaims the job (`JobReclaimed`
//!   kind 0, stake slashed), the other worker runs attempt 2 from the checkpoint
//!   ("resuming after epoch N"), its result hash is the chain's and its operator is paid.
//! - `chaos`: the chaos suite's short run: replicas of every service, 16 jobs, a minute of
//!   seeded kills, stops, nats-server restarts and reorgs; everything settles and the
//!   chain, the stream and the API agree (`make chaos` runs ten full seeds).
//! - `web_app`: the web app in headless Chromium with an injected wallet forwarding to
//!   anvil: connect (account, balance; no wallet and one on another chain said so); a
//!   bad image refused before anything is signed;
//!   the WASM demo posted from the form with a permit and one transaction, run by the
//!   worker, paid, its result downloaded through the API and checked in the browser; a job
//!   no node can run cancelled from its page (the bounty back in credits); a node
//!   registered by another account with an agent key made in the page (its worker config
//!   printed, markup in its metadata shown as text), and a job only it can run placed on
//!   it by the matcher; the served result is the chain's `ResultSubmitted` hash, not
//!   compressed; screenshots in `target/tmp/web_app/`.

mod chaos;
mod cli;
mod failover;
mod support;
mod web_app;
