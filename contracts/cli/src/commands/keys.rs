//! `gantry keys show|new|serve`: the user's age identity (`crate::identity`), and the
//! release of its encrypted jobs' keys to the nodes assigned them
//! (`gantry_runtime::keys::Submitter`, which checks each request on chain).

use alloy::providers::DynProvider;
use alloy::signers::SignerSync as _;
use async_nats::jetstream::kv;
use gantry_protocol::encryption::AgeIdentity;
use gantry_runtime::keys::{ReleaseError, Released, Submitter};

use crate::Context;
use crate::chain::Chain;
use crate::config::KeysNewArgs;
use crate::error::{CliError, Result};
use crate::identity;
use crate::output;
use crate::results;

pub async fn show(ctx: &Context) -> Result<()> {
    let identity = ctx.identity().await?;
    ctx.say(identity.to_json(), || {
        let caveat = identity
            .caveat()
            .map_or(String::new(), |caveat| format!("\n  {caveat}"));
        format!(
            "{}\n  {}{caveat}",
            identity.recipient(),
            identity.describe()
        )
    });
    Ok(())
}

pub fn new(ctx: &Context, args: &KeysNewArgs) -> Result<()> {
    let identity = identity::new_file(&args.file)?;
    let recipient = identity.to_public().to_string();
    ctx.say(
        serde_json::json!({ "file": args.file, "recipient": recipient }),
        || {
            format!(
                "wrote a new identity to {file} (mode 0600)\nrecipient: {recipient}\nuse it with \
                 --identity {file} (or GANTRY_IDENTITY); keep a copy: results encrypted to it \
                 cannot be read without it",
                file = args.file.display()
            )
        },
    );
    Ok(())
}

/// Answers the key requests of every job of the signing key until Ctrl-C or SIGTERM.
pub async fn serve(ctx: &Context) -> Result<()> {
    let chain = ctx.chain().await?;
    let account = chain.account()?;
    let identity = ctx.identity().await?;
    let store = keys_store(ctx, chain).await?;
    let submitter = submitter(chain, &identity.identity)?;
    let stop = gantry_runtime::shutdown_on_signal();
    if !ctx.json() {
        eprintln!(
            "releasing the job keys of {account}'s encrypted jobs (identity {}) as their nodes \
             ask; Ctrl-C stops",
            identity.recipient()
        );
    }
    submitter
        .serve(&store, None, stop, |outcome| say(ctx.json(), &outcome))
        .await
        .map_err(|e| CliError::Unavailable(format!("serving key requests: {e}")))
}

/// The signing key as the submitter of its jobs, releasing the keys derived from
/// `identity`.
pub(crate) fn submitter(chain: &Chain, identity: &AgeIdentity) -> Result<Submitter<DynProvider>> {
    let wallet = chain.wallet()?.clone();
    Ok(Submitter {
        provider: chain.provider().clone(),
        chain_id: chain.chain_id,
        market: *chain.market.address(),
        registry: *chain.registry.address(),
        from_block: chain.start_block(),
        account: wallet.address(),
        identity: identity.clone(),
        sign: Box::new(move |digest| wallet.sign_hash_sync(digest).map_err(|e| e.to_string())),
    })
}

/// The chain's keys bucket, through `--nats-url`.
pub(crate) async fn keys_store(ctx: &Context, chain: &Chain) -> Result<kv::Store> {
    let js = results::jetstream(&ctx.global.nats_url).await?;
    gantry_runtime::keys::open(&js, chain.chain_id, 1)
        .await
        .map_err(|e| CliError::Unavailable(format!("the keys bucket: {e}")))
}

/// A request answered, as JSON and as a line; none for another account's request.
pub(crate) fn outcome(
    outcome: &Result<Released, ReleaseError>,
) -> Option<(serde_json::Value, String)> {
    match outcome {
        Ok(Released { job, attempt, node }) => Some((
            serde_json::json!({
                "jobId": job, "attempt": attempt, "nodeId": node, "released": true,
            }),
            format!("job {job}: key released to node {node} (attempt {attempt})"),
        )),
        Err(error) if error.is_not_ours() => None,
        Err(error) => {
            let verb = match error {
                ReleaseError::Chain(_) | ReleaseError::Nats(_) => "not answered",
                _ => "refused",
            };
            Some((
                serde_json::json!({ "released": false, "error": error.to_string() }),
                format!("a key request {verb}: {error}"),
            ))
        }
    }
}

fn say(json: bool, answered: &Result<Released, ReleaseError>) {
    let Some((value, line)) = outcome(answered) else {
        return;
    };
    if json {
        output::json(&value);
    } else {
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypted_key_requests_are_a_line_each_and_other_accounts_are_silent() {
        let released = Ok(Released {
            job: 7,
            attempt: 2,
            node: 3,
        });
        let (json, line) = outcome(&released).unwrap();
        assert_eq!(line, "job 7: key released to node 3 (attempt 2)");
        assert_eq!(json["nodeId"], 3);
        assert!(outcome(&Err(ReleaseError::NotOurs(7))).is_none());
        let (json, line) = outcome(&Err(ReleaseError::NotHolder {
            job: 7,
            attempt: 1,
            node: 4,
        }))
        .unwrap();
        assert_eq!(json["released"], false);
        assert!(line.starts_with("a key request refused: node 4"), "{line}");
        let (_, line) = outcome(&Err(ReleaseError::Chain("timeout".into()))).unwrap();
        assert!(line.starts_with("a key request not answered"), "{line}");
    }
}
