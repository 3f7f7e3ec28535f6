//! The `gantry` binary as a process against a real chain (anvil, the market deployed), and
//! where it reads, nats-server, the indexer and the API in-process.
//!
//! - `submit`: a submit from flags posts exactly the requirements, bounty, deadline and
//!   spec asked for (with a permit, nothing left approved); a spec file is posted in
//!   canonical form with an existing allowance left alone, after an over-balance bounty
//!   (exit 4), a deadline with no room for the runtime (exit 4) and bad flags (exit 2)
//!   sent nothing; the job id is printed once the posting has its confirmations (1 by
//!   default on anvil, 3 asked: only after two more blocks), read from the receipt's
//!   JobPosted, and a posting a reorganisation drops is refused with no id (exit 4).
//! - `money`: a cancel's refund shows in `balance` and `withdraw` pays it out, reverts
//!   read as sentences (exit 3 and 4); a dispute approves exactly the bond (the policy's
//!   floor or a tenth of the bounty) and `accept` pays the provider; a deposit becomes
//!   credits that jobs are posted from first, the wallet paying only the rest; the arbiter
//!   (and no one else) resolves disputes for the submitter (bounty and bond credited back,
//!   the node's held stake slashed) and for the provider (paid, bond won), a lapsed one is
//!   settled by a stranger and no longer resolvable, and the operator (not the agent)
//!   withdraws the node's earnings.
//! - `node`: registering a node served by another key needs that agent's consent
//!   (`node consent`; none, or one given to another operator, is refused with nothing
//!   sent, and the market refuses it to an operator who goes around the CLI), an operator
//!   registers two nodes, `--gpu A100` resolves by VRAM or is refused as ambiguous, `node
//!   status` through the API, exit, a withdrawal refused while unbonding and paid after
//!   it; the agent's key file signs its consent locally, a consent serves one
//!   registration (a replay is refused, by the CLI and the market), and `set-agent` needs
//!   the new agent's consent and the operator; `node topup` approves exactly what it adds
//!   and is refused for nothing, more than the wallet and a node of someone else.
//! - `reads`: one job followed through the API: `watch --json` from open to completed
//!   (exit 0) and another, given back by one node for the job's fault and reclaimed from
//!   a second for the node's, to cancelled (exit 5; `status` shows each attempt with its
//!   node, whose fault, why and the slash to the treasury, and the refund), status and list
//!   JSON, the bond a dispute would post while the result is challengeable, the log tail
//!   and a follower that ends with the job, and a result uploaded to the object store and
//!   submitted by the node's agent, unpacked when it matches and refused (exit 6, nothing
//!   written) once its bytes are tampered with.
//! - `encrypted`: an encrypted job without a worker (the test is the node): `--secret-input`
//!   uploads only ciphertext, the spec names the wallet-derived recipient and job key;
//!   `job watch` releases the key to the node's agent only, `job result` checks the
//!   ciphertext's and the plaintext's hashes and decrypts, refusing a tampered ciphertext
//!   and another identity; `keys serve` answers until SIGTERM; `keys new`/`show`.

mod encrypted;
mod harness;
mod money;
mod node;
mod reads;
mod submit;
