//! `gantry job status|list|logs|result|cancel|accept|dispute|resolve|settle`.

use alloy::primitives::U256;
use alloy::primitives::aliases::U96;
use gantry_protocol::api::LiveEventName;
use gantry_protocol::api::{
    AttemptFault, AttemptOutcome, AttemptRow, ChargeCause, Completion, DisputeRow, JobDetail,
    JobRow, JobSummary, Page,
};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::encryption::{self, AgeIdentity};
use gantry_protocol::jobs::LogLine;
use gantry_protocol::spec::{Encryption, JobSpec};
use gantry_protocol::status::JobStatus;

use crate::Context;
use crate::api::{MAX_RECONNECTS, wait_to_reconnect};
use crate::chain::{self, Chain};
use crate::config::{ListArgs, LogsArgs, ResolveArgs, ResultArgs};
use crate::error::{CliError, Result};
use crate::output::{self, Money};
use crate::results::{self, Source};
use crate::units;

pub async fn status(ctx: &Context, job_id: u64) -> Result<()> {
    ctx.show(ctx.api.job(job_id).await?, describe).await
}

/// A job for people, one fact a line.
pub fn describe(detail: &JobDetail, money: &Money) -> String {
    let job = &detail.job;
    let mut lines = vec![format!(
        "job {}: {}{}",
        job.job_id,
        job.status,
        if job.attempts > 0 {
            format!(" (attempt {})", job.attempts)
        } else {
            String::new()
        }
    )];
    let mut fact = |name: &str, value: String| lines.push(format!("  {name:<10} {value}"));
    fact("submitter", job.submitter.clone());
    let from_credits = job.from_credits.parse::<U256>().unwrap_or_default();
    if from_credits.is_zero() {
        fact("bounty", money.show_str(&job.bounty));
    } else {
        fact(
            "bounty",
            format!(
                "{} ({} of it from credits)",
                money.show_str(&job.bounty),
                money.show(from_credits)
            ),
        );
    }
    fact("deadline", units::format_time(job.deadline));
    if let Some(r) = job.requirements.to_sol() {
        fact("needs", output::requirements(&r, money));
    }
    if let Ok(spec) = gantry_protocol::spec::JobSpec::from_slice(job.spec_text().as_bytes()) {
        let command = if spec.command.is_empty() {
            String::new()
        } else {
            format!(" {}", spec.command.join(" "))
        };
        fact("runs", format!("{}{command}", spec.image));
    }
    if let Some(node) = job.node_id {
        fact("node", node.to_string());
    }
    if let Some(progress) = &detail.progress {
        fact("progress", output::progress(progress));
    }
    if let Some(hash) = &job.result_hash {
        fact(
            "result",
            format!(
                "sha256 {hash} at {}",
                job.result_uri.as_deref().unwrap_or("?")
            ),
        );
    }
    if let (Some(ends), JobStatus::Submitted) = (job.until, job.status) {
        // What a dispute would cost: the job's policy floor or a tenth of its bounty.
        let bond = job
            .policy
            .as_ref()
            .zip(job.bounty.parse::<u128>().ok())
            .and_then(|(policy, bounty)| {
                let floor = policy.dispute_bond.parse::<u128>().ok()?;
                Some((bounty / 10).max(floor))
            });
        let bond = bond.map_or(String::new(), |bond| {
            format!(
                "; a dispute posts a bond of {} (`gantry job dispute {}`)",
                money.show(bond),
                job.job_id
            )
        });
        fact(
            "challenge",
            format!("open until {}{bond}", units::format_time(ends)),
        );
    }
    if let Some(dispute) = &job.dispute {
        fact("dispute", dispute_line(dispute, money));
    }
    if job.faults > 0 || !job.barred_nodes.is_empty() {
        let nodes: Vec<String> = job.barred_nodes.iter().map(ToString::to_string).collect();
        fact(
            "attempts",
            format!(
                "{} ended in the node's fault; barred: node {}",
                job.faults,
                nodes.join(", ")
            ),
        );
    }
    for attempt in &job.attempt_rows {
        fact(
            &format!("attempt {}", attempt.attempt),
            attempt_line(attempt, money),
        );
    }
    // An API from before attempts were kept: the charges alone.
    let charges = if job.attempt_rows.is_empty() {
        &job.charges[..]
    } else {
        &[]
    };
    for charge in charges {
        let cause = match charge.cause {
            ChargeCause::Reject => "gave the job back",
            ChargeCause::NodeInactive => "reclaimed: went inactive during the attempt",
            ChargeCause::RuntimeExceeded => "reclaimed: ran past its runtime",
            ChargeCause::DisputeLost => "lost the dispute",
        };
        fact(
            "charged",
            format!(
                "node {} {} to the treasury ({cause})",
                charge.node_id,
                money.show_str(&charge.amount)
            ),
        );
    }
    if let Some(payout) = &job.payout {
        let fee = job
            .fee
            .as_deref()
            .map(|f| money.show_str(f))
            .unwrap_or_default();
        let how = match job.completion {
            Some(Completion::Accepted) => ", accepted",
            Some(Completion::Finalized) => ", after the challenge window",
            Some(Completion::DisputeWon) => ", the dispute decided for it",
            Some(Completion::DisputeLapsed) => ", the dispute lapsed",
            Some(Completion::Verified) => ", verified by a quorum of replicas",
            Some(Completion::RefereesUpheld) => ", upheld by the referees",
            None => "",
        };
        fact(
            "paid",
            format!(
                "{} to the provider's earnings (fee {fee}{how})",
                money.show_str(payout)
            ),
        );
    }
    if let Some(refund) = &job.refund {
        fact(
            "refunded",
            format!(
                "{} to the submitter's credits (`gantry balance`, `gantry withdraw`): {}",
                money.show_str(refund),
                refund_sentence(detail, refund, money)
            ),
        );
    }
    if let Some(reason) = &job.reason {
        fact("reason", reason.clone());
    }
    if let Some(pending) = &detail.pending {
        fact("waiting", pending.summary.clone());
    }
    // An API from before attempts were kept: the workers' reasons alone.
    if job.attempt_rows.is_empty() {
        for completion in &detail.completions {
            if let Some(error) = &completion.error {
                fact("attempt", format!("{}: {error}", completion.attempt));
            }
        }
    }
    if !detail.timeline.is_empty() {
        let events: Vec<String> = detail
            .timeline
            .iter()
            .map(|e| format!("{} (block {})", e.name, e.block))
            .collect();
        fact("events", events.join(", "));
    }
    lines.push(String::new());
    lines.join("\n")
}

/// An attempt in one line: its node, how it ended, whose fault and why, and what its
/// node's stake lost to whom.
fn attempt_line(attempt: &AttemptRow, money: &Money) -> String {
    let node = format!(
        "node {}{}",
        attempt.node_id,
        if attempt.claimed { " (claimed)" } else { "" }
    );
    let outcome = match attempt.outcome {
        AttemptOutcome::Running => "running",
        AttemptOutcome::Submitted => "submitted a result",
        AttemptOutcome::FailedByItself => {
            "the job failed by itself (its failure report is the result)"
        }
        AttemptOutcome::Rejected => "gave the job back",
        AttemptOutcome::ReclaimedNodeInactive => "reclaimed: the node went inactive",
        AttemptOutcome::ReclaimedRuntimeExceeded => "reclaimed: ran past its runtime",
        AttemptOutcome::DisputeLost => "lost the dispute of its result",
    };
    let fault = match attempt.fault {
        AttemptFault::None => String::new(),
        AttemptFault::Job => ", the job's fault".into(),
        AttemptFault::Node => ", the node's fault".into(),
    };
    let reason = attempt
        .reason
        .as_deref()
        .map_or(String::new(), |reason| format!(": {reason}"));
    let slashed = if attempt
        .slashed
        .parse::<U256>()
        .unwrap_or_default()
        .is_zero()
    {
        String::new()
    } else {
        format!(
            "; slashed {} to the treasury {}",
            money.show_str(&attempt.slashed),
            attempt.slashed_to.as_deref().unwrap_or("(unknown)")
        )
    };
    format!("{node}: {outcome}{fault}{reason}{slashed}")
}

/// What the refund is and what it is not, as the dashboard says it (`refundSentence` in
/// api/assets/views/job.js): what the submitter got back (the bounty, all of it or the
/// unpaid seats'; a lost dispute's bond; the referees' bond and prepay not paid out; a
/// provider's repayment of the referees) and what each node lost of its stake on the job (a
/// reject's or a reclaim's charge, a lost dispute's exposure, a seat's stake), which went to
/// the treasury, not to the submitter.
fn refund_sentence(detail: &JobDetail, refund: &str, money: &Money) -> String {
    let job = &detail.job;
    let back = returned(detail, refund, money);
    let losses = node_losses(job);
    if losses.is_empty() {
        return format!("{back}; no node was slashed on it");
    }
    let total = losses
        .iter()
        .fold(U256::ZERO, |sum, loss| sum.saturating_add(loss.amount));
    let last = losses.len() - 1;
    let each: String = losses
        .iter()
        .enumerate()
        .map(|(i, loss)| {
            let joint = match i {
                0 => "",
                i if i == last => " and ",
                _ => ", ",
            };
            // One node's loss is the total; each of several says its own.
            let amount = if last == 0 {
                String::new()
            } else {
                format!("{} ", money.show(loss.amount))
            };
            format!("{joint}node {}'s {amount}{}", loss.node_id, loss.what)
        })
        .collect();
    let mut treasuries: Vec<&str> = Vec::new();
    for treasury in job
        .attempt_rows
        .iter()
        .filter_map(|a| a.slashed_to.as_deref())
    {
        if !treasuries.contains(&treasury) {
            treasuries.push(treasury);
        }
    }
    let to = if treasuries.is_empty() {
        String::new()
    } else {
        format!(" {}", treasuries.join(" and "))
    };
    // A replicated job's nodes lose only their seats' stakes.
    let slashes = match &job.verification {
        Some(v) if v.tier == "replicated" => "the slashed seats' stakes",
        _ => "the nodes' slashes",
    };
    format!(
        "{back}; {slashes} ({}: {each}) went to the treasury{to}, not to the submitter",
        money.show(total)
    )
}

/// What the submitter got back of the job's money: the refund, and what came with it.
fn returned(detail: &JobDetail, refund: &str, money: &Money) -> String {
    let job = &detail.job;
    let refunded = amount(refund);
    let what = match &job.verification {
        Some(v) if v.tier == "replicated" => {
            let bounty = amount(&job.bounty);
            let unpaid = if bounty.is_zero() {
                refunded
            } else {
                refunded / bounty
            };
            let parted = v.seat_rows.iter().filter(|s| s.outcome == "parted").count();
            let mut what = format!(
                "the bounty of the {unpaid} seat{} not paid, of {} escrowed",
                if unpaid == U256::from(1) { "" } else { "s" },
                money.show_str(&v.escrow)
            );
            if parted > 0 {
                what += &format!(
                    " (the bounty of the {parted} seat{} that revealed another result went to \
                     the treasury)",
                    if parted == 1 { "" } else { "s" }
                );
            }
            what
        }
        _ if refunded == amount(&job.bounty) => "the whole bounty".to_owned(),
        _ => format!("of the bounty of {}", money.show_str(&job.bounty)),
    };
    let mut extras: Vec<(U256, String)> = Vec::new();
    let bond = job
        .dispute
        .as_ref()
        .and_then(|d| d.outcome.as_ref())
        .map_or(U256::ZERO, |o| amount(&o.bond_to_submitter));
    if !bond.is_zero() {
        extras.push((bond, format!("the dispute bond ({})", money.show(bond))));
    }
    let referees = job
        .verification
        .as_ref()
        .and_then(|v| v.referees.as_ref())
        .and_then(|r| r.to_submitter.as_deref())
        .map_or(U256::ZERO, amount);
    if !referees.is_zero() {
        extras.push((
            referees,
            format!("{} of the referees' bond and prepay", money.show(referees)),
        ));
    }
    for event in detail.timeline.iter().filter(|e| e.name == "HoldForfeited") {
        // Alloy's serde of the event: a uint96 as 0x hex, a uint64 as a number.
        let forfeited = event.data["amount"].as_str().map_or(U256::ZERO, amount);
        let node = match &event.data["nodeId"] {
            serde_json::Value::String(text) => amount(text),
            value => U256::from(value.as_u64().unwrap_or_default()),
        };
        if !forfeited.is_zero() {
            extras.push((
                forfeited,
                format!(
                    "{} of node {node}'s stake, repaying the referees",
                    money.show(forfeited)
                ),
            ));
        }
    }
    if extras.is_empty() {
        return what;
    }
    let all = extras
        .iter()
        .fold(refunded, |sum, (amount, _)| sum.saturating_add(*amount));
    let mut items = vec![what];
    items.extend(extras.into_iter().map(|(_, words)| words));
    let last = items.pop().unwrap_or_default();
    format!(
        "{} and {last}: {} in all",
        items.join(", "),
        money.show(all)
    )
}

/// A node's loss of stake on a job, to the treasury: what it was ("charge for giving the
/// job back").
struct Loss {
    node_id: u64,
    amount: U256,
    what: String,
}

/// What each node lost of its stake on the job: its charges (a reject, a reclaim, a lost
/// dispute's exposure: every slash not at a verified job's decision, a freed seat's too)
/// and the seats slashed at the decision. Nothing twice: a slash is a charge or a decided
/// seat's, not both.
fn node_losses(job: &JobRow) -> Vec<Loss> {
    let mut losses: Vec<Loss> = job
        .charges
        .iter()
        .filter(|c| !amount(&c.amount).is_zero())
        .map(|c| Loss {
            node_id: c.node_id,
            amount: amount(&c.amount),
            what: match c.cause {
                ChargeCause::Reject => "charge for giving the job back",
                ChargeCause::NodeInactive => "charge for going inactive with the job",
                ChargeCause::RuntimeExceeded => "charge for running past its runtime",
                ChargeCause::DisputeLost => "dispute exposure, for losing the dispute",
            }
            .to_owned(),
        })
        .collect();
    let seats = job.verification.iter().flat_map(|v| &v.seat_rows);
    for seat in seats.filter(|s| s.outcome == "slashed") {
        let charged = seat.charged.as_deref().map_or(U256::ZERO, amount);
        if !charged.is_zero() {
            losses.push(Loss {
                node_id: seat.node_id,
                amount: charged,
                what: format!("{} seat stake", seat.role),
            });
        }
    }
    losses
}

/// An amount as the API gives it (base units, decimal; an event's, `0x` hex); zero when
/// unreadable.
fn amount(text: &str) -> U256 {
    text.parse::<U256>().unwrap_or_default()
}

/// A dispute in one line: its bond and the node's held stake, then how it ended or by
/// when the arbiter decides.
fn dispute_line(dispute: &DisputeRow, money: &Money) -> String {
    let posted = format!(
        "bond {} posted, {} of the node's stake held",
        money.show_str(&dispute.bond),
        money.show_str(&dispute.exposure)
    );
    match &dispute.outcome {
        None => format!(
            "{posted}; the arbiter decides by {}",
            units::format_time(dispute.deadline)
        ),
        Some(outcome) if outcome.lapsed => format!(
            "{posted}; lapsed: the result stands, the bond ({}) went back to the submitter",
            money.show_str(&outcome.bond_to_submitter)
        ),
        Some(outcome) if outcome.provider_won => format!(
            "{posted}; decided for the provider, who won the bond ({})",
            money.show_str(&outcome.bond_to_provider)
        ),
        Some(outcome) => format!(
            "{posted}; decided for the submitter: the bond ({}) and the bounty went back, the \
             held stake was slashed",
            money.show_str(&outcome.bond_to_submitter)
        ),
    }
}

pub async fn list(ctx: &Context, args: &ListArgs) -> Result<()> {
    let mut query = vec![("limit", args.limit.to_string())];
    if let Some(status) = &args.status {
        query.push(("status", status.clone()));
    }
    let submitter = match (args.submitter, args.mine) {
        (Some(address), _) => Some(address),
        (None, true) => Some(
            crate::chain::signer(&ctx.global)?
                .ok_or_else(|| CliError::usage("--mine: set GANTRY_PRIVATE_KEY or --key-file"))?
                .address(),
        ),
        (None, false) => None,
    };
    if let Some(submitter) = submitter {
        query.push(("submitter", submitter.to_string()));
    }
    if let Some(node) = args.node {
        query.push(("node", node.to_string()));
    }
    if let Some(cursor) = &args.cursor {
        query.push(("cursor", cursor.clone()));
    }
    let value = ctx.api.get("v1/jobs", &query).await?;
    ctx.show(value, table).await
}

/// A page of jobs for people: a table, then the next page's cursor.
fn table(page: &Page<JobSummary>, money: &Money) -> String {
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|j| {
            vec![
                j.job.job_id.to_string(),
                j.job.status.to_string(),
                money.short(&j.job.bounty),
                j.job.node_id.map(|n| n.to_string()).unwrap_or_default(),
                j.progress
                    .as_ref()
                    .map(output::progress)
                    .unwrap_or_default(),
                units::format_time(j.job.posted_at),
            ]
        })
        .collect();
    let symbol = money
        .0
        .as_ref()
        .map_or("BOUNTY".to_string(), |t| format!("BOUNTY ({})", t.symbol));
    let mut text = output::table(
        &["ID", "STATUS", &symbol, "NODE", "PROGRESS", "POSTED"],
        &rows,
    );
    text.push('\n');
    if let Some(cursor) = &page.next_cursor {
        text.push_str(&format!("more: --cursor {cursor}\n"));
    }
    text
}

pub async fn logs(ctx: &Context, args: &LogsArgs) -> Result<()> {
    let print = |line: &LogLine| {
        if ctx.json() {
            println!(
                "{}",
                serde_json::to_string(line).expect("log lines serialize")
            );
        } else {
            println!("{}", output::printable(&line.line));
        }
    };
    if !args.follow {
        for line in ctx.api.logs(args.id, args.tail).await? {
            print(&line);
        }
        return Ok(());
    }
    // The stream sends the stored tail, then each new line with its sequence as the
    // event id, then `end` once the job settles. A reconnect names the last line seen.
    let path = format!("v1/jobs/{}/logs", args.id);
    let query = [("tail", args.tail.to_string()), ("follow", "true".into())];
    let mut last_id: Option<String> = None;
    let mut connected = false;
    let mut failures = 0;
    loop {
        let mut stream = match ctx.api.events(&path, &query, last_id.as_deref()).await {
            Ok(stream) => stream,
            Err(CliError::Unavailable(_)) if connected && failures < MAX_RECONNECTS => {
                failures += 1;
                wait_to_reconnect(failures).await;
                continue;
            }
            Err(other) => return Err(other),
        };
        connected = true;
        failures = 0;
        while let Some(event) = stream.next().await {
            match LiveEventName::parse(&event.event) {
                Some(LiveEventName::Log) => {
                    let line: LogLine = serde_json::from_str(&event.data).map_err(|e| {
                        CliError::Unavailable(format!("the API sent an unreadable log line: {e}"))
                    })?;
                    print(&line);
                    if event.id.is_some() {
                        last_id = event.id;
                    }
                }
                Some(LiveEventName::End) => return Ok(()),
                // Lines were missed: reconnecting after the last one seen fills them in.
                Some(LiveEventName::Lagged) => break,
                _ => {}
            }
        }
        failures += 1;
        if failures > MAX_RECONNECTS {
            return Err(CliError::Unavailable(
                "the API keeps closing the log stream".into(),
            ));
        }
        wait_to_reconnect(failures).await;
    }
}

pub async fn result(ctx: &Context, args: &ResultArgs) -> Result<()> {
    let limit = units::parse_size_mib(&args.max_size)
        .map_err(|e| CliError::usage(format!("--max-size: {e}")))?;
    // The hash and URI from the chain (its ResultSubmitted event): what the provider
    // committed to.
    let chain = ctx.chain().await?;
    // A replicated job has no provider's answer: its result is the outcome its quorum
    // agreed on, uploaded by the paid seats after the decision.
    let answered = match chain.result(args.id).await? {
        Some((hash, uri)) => Some((hash, vec![uri])),
        None => chain.verified_result(args.id).await?,
    };
    let Some((result_hash, committed_uris)) = answered else {
        let status = chain.job(args.id).await?.state.status;
        return Err(CliError::NotFound(format!(
            "job {} has no result (it is {})",
            args.id,
            status.as_str()
        )));
    };
    // A refereed job's answer is a seal (design 18, §2.6): the outcome and what opens the
    // seal lie in the provider's own bucket of sealed results, whatever URI it gave; the
    // outcome must be the digest the seal opens to.
    let (expected, uris) = if is_refereed(chain, args.id).await? {
        let provider = chain.provider_of(args.id).await?.ok_or_else(|| {
            CliError::NotFound(format!("job {} was never placed on a provider", args.id))
        })?;
        let digest = open_provider_seal(ctx, chain, args.id, provider, result_hash).await?;
        let own = gantry_protocol::names::provider_result_uri(chain.chain_id, provider, args.id);
        (digest, vec![own])
    } else {
        (result_hash, committed_uris)
    };
    // An encrypted result (design 19, §3): its URI carries the ciphertext's hash, which the
    // node committed to with it; it is decrypted with the identity the spec names.
    let committed_ciphertext = uris.iter().find_map(|uri| {
        encryption::split_ciphertext(uri)
            .ok()
            .and_then(|(_, hash)| hash)
    });
    // A spec the worker could not read ran nothing: its result is a plain failure report.
    let spec_encryption = JobSpec::from_slice(&chain.posted_spec(args.id).await?)
        .ok()
        .and_then(|spec| spec.encryption);
    // `--uri` alone if given; else each place the result was put, until one holds it.
    let uris = args.uri.clone().map_or(uris, |uri| vec![uri]);
    let encrypted = spec_encryption.is_some()
        || committed_ciphertext.is_some()
        || uris
            .iter()
            .any(|uri| uri.contains(encryption::CIPHERTEXT_FRAGMENT));
    let identity = if encrypted {
        Some(result_identity(ctx, args.id, spec_encryption.as_ref()).await?)
    } else {
        None
    };
    std::fs::create_dir_all(&args.output).map_err(|e| CliError::io(args.output.display(), e))?;
    let mut failed = None;
    let mut found = None;
    for uri in uris {
        let (location, fragment) = encryption::split_ciphertext(&uri)
            .map_err(|e| CliError::Unverified(format!("the result URI {uri}: {e}")))?;
        let source = Source::parse(location)?;
        let fetched = results::download(
            &source,
            &ctx.global.nats_url,
            &args.output,
            u64::from(limit) << 20,
        )
        .await;
        let fetched = match &identity {
            None => fetched.and_then(|downloaded| {
                results::verify(&downloaded, expected).map(|()| (downloaded, None))
            }),
            Some(identity) => match fetched {
                Ok(sealed) => {
                    open_sealed(
                        sealed,
                        fragment.or(committed_ciphertext),
                        identity,
                        &args.output,
                        expected,
                    )
                    .await
                }
                Err(error) => Err(error),
            },
        };
        match fetched {
            Ok((downloaded, sealed)) => {
                found = Some((uri, downloaded, sealed));
                break;
            }
            Err(error) => failed = Some(error),
        }
    }
    let Some((uri, downloaded, sealed)) = found else {
        return Err(failed.unwrap_or_else(|| {
            CliError::NotFound(format!("job {} has no result uploaded yet", args.id))
        }));
    };
    let (bytes, sha256) = (downloaded.bytes, downloaded.sha256);
    let dir = args.output.clone();
    let unpacked = tokio::task::spawn_blocking(move || {
        let unpacked = results::unpack(downloaded.file.path(), &dir);
        drop(downloaded.file);
        unpacked
    })
    .await
    .map_err(|e| CliError::Other(format!("unpacking: {e}")))??;
    if ctx.json() {
        let mut json = serde_json::json!({
            "jobId": args.id,
            "uri": uri,
            "bytes": bytes,
            "sha256": sha256,
            "dir": args.output,
            "files": unpacked.files,
            "dirs": unpacked.dirs,
            "encrypted": sealed.is_some(),
        });
        if let Some(sealed) = &sealed {
            json["ciphertextBytes"] = sealed.bytes.into();
            json["ciphertextSha256"] = serde_json::json!(sealed.sha256);
            json["ciphertextChecked"] = sealed.checked.into();
        }
        output::json(&json);
    } else {
        if let Some(sealed) = &sealed {
            let checked = if sealed.checked {
                "matches the result URI"
            } else {
                "the URI names no ciphertext hash: not checked"
            };
            println!(
                "job {} result: {} bytes encrypted, ciphertext sha256 {} ({checked}), decrypted \
                 with your identity",
                args.id, sealed.bytes, sealed.sha256
            );
        }
        println!(
            "job {} result: {bytes} bytes, sha256 {sha256} (matches the chain), {} files unpacked into {}",
            args.id,
            unpacked.files,
            args.output.display()
        );
    }
    Ok(())
}

/// An encrypted result's ciphertext, as checked.
#[derive(Debug, Clone, Copy)]
struct SealedResult {
    bytes: u64,
    sha256: alloy::primitives::B256,
    /// Whether it was checked against a hash its URI carried.
    checked: bool,
}

/// The identity job `id`'s encrypted result is read with: the job's result key derived
/// from the user's identity and the spec's salt (what `job submit --encrypt` encrypts
/// results to), or the user's own; refused up front when the spec names a recipient that
/// is neither.
async fn result_identity(
    ctx: &Context,
    id: u64,
    encryption: Option<&Encryption>,
) -> Result<AgeIdentity> {
    let user = ctx.identity().await?;
    let Some(encryption) = encryption else {
        return Ok(user.identity.clone());
    };
    if encryption.recipient == user.recipient().to_string() {
        return Ok(user.identity.clone());
    }
    if let Some(salt) = encryption
        .key_salt
        .as_deref()
        .and_then(|salt| alloy::hex::decode(salt).ok())
    {
        let derived = gantry_protocol::encryption::result_identity(&user.identity, &salt);
        if derived.to_public().to_string() == encryption.recipient {
            return Ok(derived);
        }
    }
    Err(CliError::usage(format!(
        "job {id}'s result is encrypted to {}, neither your identity ({}, {}) nor the job's \
         result key derived from it: pass the identity it was posted with (--identity)",
        encryption.recipient,
        user.describe(),
        user.recipient()
    )))
}

/// The plaintext of the downloaded ciphertext `sealed`: its hash checked against
/// `ciphertext` (its URI's) when there is one, decrypted with `identity` into `dir`, and
/// the plaintext's hash checked against `expected` (the chain's).
async fn open_sealed(
    sealed: results::Downloaded,
    ciphertext: Option<alloy::primitives::B256>,
    identity: &AgeIdentity,
    dir: &std::path::Path,
    expected: alloy::primitives::B256,
) -> Result<(results::Downloaded, Option<SealedResult>)> {
    if let Some(hash) = ciphertext {
        results::verify_ciphertext(&sealed, hash)?;
    }
    let seen = SealedResult {
        bytes: sealed.bytes,
        sha256: sealed.sha256,
        checked: ciphertext.is_some(),
    };
    let (identity, dir) = (identity.clone(), dir.to_owned());
    let decrypted = tokio::task::spawn_blocking(move || results::decrypt(&sealed, &identity, &dir))
        .await
        .map_err(|e| CliError::Other(format!("decrypting: {e}")))??;
    results::verify_plaintext(&decrypted, expected)?;
    Ok((decrypted, Some(seen)))
}

async fn is_refereed(chain: &Chain, id: u64) -> Result<bool> {
    Ok(chain.job(id).await?.terms.verification.tier
        == gantry_protocol::market::Verification::REFEREED)
}

/// The digest refereed job `id`'s provider (node `provider`, as the chain placed it)
/// sealed as `seal`, from what it put beside its outcome in its own bucket of sealed
/// results, checked against the seal on chain for that node. A provider whose opening does
/// not open its seal cannot open it in a dispute either, and loses it.
async fn open_provider_seal(
    ctx: &Context,
    chain: &Chain,
    id: u64,
    provider: u64,
    seal: alloy::primitives::B256,
) -> Result<alloy::primitives::B256> {
    use gantry_protocol::names::{ProviderSeal, provider_seal_key, sealed_bucket};
    let scratch = tempfile::tempdir().map_err(|e| CliError::io("a temporary directory", e))?;
    let source = Source::Scoped {
        bucket: sealed_bucket(chain.chain_id),
        node: provider,
        key: provider_seal_key(id),
    };
    let downloaded = results::download(&source, &ctx.global.nats_url, scratch.path(), 4096).await?;
    let bytes = std::fs::read(downloaded.file.path())
        .map_err(|e| CliError::io(downloaded.file.path().display(), e))?;
    let opening: ProviderSeal = serde_json::from_slice(&bytes)
        .map_err(|e| CliError::Unverified(format!("job {id}'s seal opening is not one: {e}")))?;
    let sealed = gantry_protocol::market::seal(
        chain.chain_id,
        *chain.market.address(),
        id,
        gantry_protocol::market::PROVIDER_SEAT,
        provider,
        opening.digest,
        opening.salt,
    );
    if sealed != seal {
        return Err(CliError::Unverified(format!(
            "job {id}: what its provider put beside the result does not open the seal it \
             submitted: dispute it (`gantry job dispute {id}`) — the provider cannot open its \
             seal either, and loses"
        )));
    }
    Ok(opening.digest)
}

pub async fn cancel(ctx: &Context, job_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let only = "only an open job can be cancelled";
    let job = chain.job_in(job_id, JobStatus::Open, only).await?;
    let receipt = chain
        .send_on("cancel", &job, |terms, state| {
            chain.market.cancel(job_id, terms, state)
        })
        .await?;
    let refund = receipt
        .decoded_log::<JobMarket::JobCancelled>()
        .map(|log| U256::from(log.refund))
        .unwrap_or_default();
    let json = serde_json::json!({
        "jobId": job_id, "tx": receipt.transaction_hash, "refund": refund.to_string(),
    });
    ctx.say_in_tokens(json, |token| {
        format!(
            "job {job_id} cancelled: {} credited to you (`gantry withdraw` pays it out)",
            token.show(refund)
        )
    })
    .await
}

pub async fn accept(ctx: &Context, job_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let only = "only a submitted job can be accepted";
    let job = chain.job_in(job_id, JobStatus::Submitted, only).await?;
    let receipt = chain
        .send_on("accept", &job, |terms, state| {
            chain.market.accept(job_id, terms, state)
        })
        .await?;
    let completed: JobMarket::JobCompleted = chain::logged(&receipt)?;
    let json = serde_json::json!({
        "jobId": job_id,
        "tx": receipt.transaction_hash,
        "payout": completed.payout.to_string(),
        "fee": completed.fee.to_string(),
    });
    ctx.say_in_tokens(json, |token| {
        format!(
            "job {job_id} accepted: {} paid to node {}'s operator (fee {})",
            token.show(completed.payout),
            completed.nodeId,
            token.show(completed.fee)
        )
    })
    .await
}

/// Refuses, before anything is sent, a call on a job whose window (challenge or dispute)
/// has closed: `closed` says so with the time it closed at.
async fn within_window(
    chain: &Chain,
    ends: u64,
    closed: impl FnOnce(String) -> String,
) -> Result<()> {
    if chain.now().await? >= ends {
        return Err(CliError::Refused(closed(units::format_time(ends))));
    }
    Ok(())
}

/// Disputes posting the bond (the larger of the job's policy floor and a tenth of its
/// bounty): checks first what the contract would (status, submitter, window, balance), so
/// no approval is sent for a dispute that cannot happen.
pub async fn dispute(ctx: &Context, job_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let account = chain.account()?;
    let only = "only a submitted job can be disputed, inside its challenge window";
    let job = chain.job_in(job_id, JobStatus::Submitted, only).await?;
    if job.terms.submitter != account {
        return Err(CliError::Refused(format!(
            "job {job_id} was not posted by {account}: only its submitter may dispute it"
        )));
    }
    within_window(chain, job.state.until, |ends| {
        format!(
            "the challenge window of job {job_id} closed at {ends}: it can no longer be disputed"
        )
    })
    .await?;
    let policy = chain.policy(job.terms.policy).await?;
    let bond = U256::from(policy.bond(job.terms.bounty));
    if job.terms.verification.tier == gantry_protocol::market::Verification::REFEREED {
        return dispute_refereed(ctx, chain, job_id, &job, bond).await;
    }
    chain
        .ensure_balance(account, bond, "the dispute bond")
        .await?;
    chain
        .approve_if_short(*chain.market.address(), bond)
        .await?;
    let receipt = chain
        .send_on("dispute", &job, |terms, state| {
            chain.market.dispute(job_id, terms, state)
        })
        .await?;
    let json = serde_json::json!({
        "jobId": job_id, "tx": receipt.transaction_hash, "bond": bond.to_string(),
    });
    ctx.say_in_tokens(json, |token| {
        format!(
            "job {job_id} disputed with a bond of {}: the arbiter decides; the winner gets the bond",
            token.show(bond)
        )
    })
    .await
}

/// Disputes a refereed job: the bond and the referees' pay (r bounties) are escrowed, from
/// the submitter's credits first; r referees re-run the job and decide by majority (the
/// keeper draws them). The arbiter decides only when they do not.
async fn dispute_refereed(
    ctx: &Context,
    chain: &crate::chain::Chain,
    id: u64,
    job: &gantry_protocol::market::Job,
    bond: U256,
) -> Result<()> {
    use gantry_protocol::bindings::Referees;
    let account = chain.account()?;
    let r = job.terms.verification.size;
    let prepay = U256::from(job.terms.bounty) * U256::from(r);
    let escrow = bond + prepay;
    let pulled = escrow.saturating_sub(chain.credit(account).await?);
    if !pulled.is_zero() {
        chain
            .ensure_balance(account, pulled, "the dispute bond and the referees' pay")
            .await?;
        chain
            .approve_if_short(*chain.market.address(), pulled)
            .await?;
    }
    let referees = Referees::new(
        *chain.market.address(),
        chain.verification.provider().clone(),
    );
    let state = job
        .state
        .pack_verified()
        .ok_or_else(|| CliError::Refused(format!("job {id} has no verified state")))?;
    let receipt = chain
        .send(
            "requestReferees",
            referees.requestReferees(id, job.terms.pack().into(), state.into()),
        )
        .await?;
    let json = serde_json::json!({
        "jobId": id, "tx": receipt.transaction_hash, "bond": bond.to_string(),
        "prepay": prepay.to_string(), "referees": r,
    });
    ctx.say_in_tokens(json, |token| {
        format!(
            "job {id} disputed: bond {} and {} for {r} referees escrowed; they re-run it and a \
             majority decides (the loser pays them and the bond; without a majority the arbiter)",
            token.show(bond),
            token.show(prepay)
        )
    })
    .await
}

/// Decides a dispute as the arbiter: checks first what the market would (status, role,
/// the arbiter's deadline), then says where the bounty and the bond went.
pub async fn resolve(ctx: &Context, args: &ResolveArgs) -> Result<()> {
    let job_id = args.id;
    let chain = ctx.chain().await?;
    let account = chain.account()?;
    let only = "only a disputed job can be resolved";
    let job = chain.job_in(job_id, JobStatus::Disputed, only).await?;
    if !chain.is_arbiter(account).await? {
        return Err(CliError::Refused(format!(
            "{account} is not the market's arbiter: only the arbiter decides disputes"
        )));
    }
    within_window(chain, job.state.until, |ends| {
        format!(
            "the dispute of job {job_id} lapsed at {ends}: the result stands (`gantry job settle \
             {job_id}` pays it out and returns the bond)"
        )
    })
    .await?;
    let receipt = chain
        .send_on("resolve", &job, |terms, state| {
            chain
                .market
                .resolve(job_id, terms, state, args.provider_wins)
        })
        .await?;
    Settled::of(&receipt, job_id)?
        .say(ctx, job_id, &receipt)
        .await
}

/// Settles a dispute the arbiter let lapse (anyone may): the result stands and is paid,
/// the bond goes back to the submitter.
pub async fn settle(ctx: &Context, job_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let only = "only a disputed job can be settled";
    let job = chain.job_in(job_id, JobStatus::Disputed, only).await?;
    let ends = job.state.until;
    if chain.now().await? < ends {
        return Err(CliError::Refused(format!(
            "the arbiter has until {} to decide the dispute of job {job_id}",
            units::format_time(ends)
        )));
    }
    let receipt = chain
        .send_on("settleDispute", &job, |terms, state| {
            chain.market.settleDispute(job_id, terms, state)
        })
        .await?;
    Settled::of(&receipt, job_id)?
        .say(ctx, job_id, &receipt)
        .await
}

/// How a dispute ended, from the receipt of `resolve` or `settleDispute`.
#[derive(Debug)]
struct Settled {
    resolved: JobMarket::DisputeResolved,
    /// The provider won, or the dispute lapsed: the job was paid.
    completed: Option<JobMarket::JobCompleted>,
    /// The submitter won: the bounty was refunded.
    failed: Option<JobMarket::JobFailed>,
    /// The submitter won: the node's held stake was slashed.
    slashed: Option<JobMarket::NodeSlashed>,
}

impl Settled {
    fn of(receipt: &alloy::rpc::types::TransactionReceipt, job_id: u64) -> Result<Self> {
        let resolved = receipt
            .decoded_log::<JobMarket::DisputeResolved>()
            .filter(|log| log.jobId == job_id)
            .ok_or_else(|| CliError::Other("the receipt has no DisputeResolved log".into()))?;
        Ok(Self {
            resolved: resolved.data,
            completed: receipt
                .decoded_log::<JobMarket::JobCompleted>()
                .map(|log| log.data),
            failed: receipt
                .decoded_log::<JobMarket::JobFailed>()
                .map(|log| log.data),
            slashed: receipt
                .decoded_log::<JobMarket::NodeSlashed>()
                .map(|log| log.data),
        })
    }

    /// Says how the dispute ended: JSON with `--json`, else a sentence.
    async fn say(
        &self,
        ctx: &Context,
        job_id: u64,
        receipt: &alloy::rpc::types::TransactionReceipt,
    ) -> Result<()> {
        let json = self.json(job_id, receipt.transaction_hash);
        ctx.say_in_tokens(json, |token| self.describe(job_id, token))
            .await
    }

    fn json(&self, job_id: u64, tx: alloy::primitives::B256) -> serde_json::Value {
        let r = &self.resolved;
        serde_json::json!({
            "jobId": job_id,
            "tx": tx,
            "nodeId": r.nodeId,
            "providerWon": r.providerWon,
            "lapsed": r.lapsed,
            "bondToSubmitter": r.bondToSubmitter.to_string(),
            "bondToProvider": r.bondToProvider.to_string(),
            "payout": self.completed.as_ref().map(|c| c.payout.to_string()),
            "fee": self.completed.as_ref().map(|c| c.fee.to_string()),
            "refund": self.failed.as_ref().map(|f| f.refund.to_string()),
            "slashed": self.slashed.as_ref().map(|s| s.amount.to_string()),
        })
    }

    fn describe(&self, job_id: u64, token: &crate::revert::TokenInfo) -> String {
        let r = &self.resolved;
        let node = r.nodeId;
        let paid = self.completed.as_ref().map(|c| {
            format!(
                "node {node} is paid {} (fee {})",
                token.show(c.payout),
                token.show(c.fee)
            )
        });
        match (r.providerWon, r.lapsed, paid) {
            (_, true, paid) => format!(
                "the dispute of job {job_id} lapsed: the result stands, {}; the bond of {} \
                 is credited back to the submitter",
                paid.unwrap_or_default(),
                token.show(r.bondToSubmitter)
            ),
            (true, false, paid) => format!(
                "job {job_id}: the dispute is decided for the provider: {} and wins the bond \
                 of {}",
                paid.unwrap_or_default(),
                token.show(r.bondToProvider)
            ),
            (false, false, _) => format!(
                "job {job_id}: the dispute is decided for the submitter: the bounty of {} and \
                 the bond of {} are credited to the submitter (`gantry withdraw`); node \
                 {node}'s held stake of {} is slashed",
                token.show(self.failed.as_ref().map_or(U96::ZERO, |f| f.refund)),
                token.show(r.bondToSubmitter),
                token.show(self.slashed.as_ref().map_or(U96::ZERO, |s| s.amount))
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use gantry_protocol::api::{DisputeOutcome, JobPolicy, JobRow, TokenInfo};

    use super::*;

    fn gusd() -> Money {
        Money(Some(TokenInfo {
            symbol: "gUSD".into(),
            decimals: 6,
        }))
    }

    /// A job of `bounty` gUSD under the dev policy (a 10 gUSD floor), as `change` leaves it.
    fn described(bounty: u64, change: impl FnOnce(&mut JobRow)) -> String {
        let mut job = JobRow {
            job_id: 4,
            bounty: (bounty * 1_000_000).to_string(),
            from_credits: "0".into(),
            policy: Some(JobPolicy {
                version: 1,
                dispute_bond: "10000000".into(),
                ..JobPolicy::default()
            }),
            ..JobRow::default()
        };
        change(&mut job);
        describe(
            &JobDetail {
                job,
                ..JobDetail::default()
            },
            &gusd(),
        )
    }

    #[test]
    fn each_attempt_and_the_refund_read_as_sentences() {
        let treasury = "0x7E7e7e7E7e7E7e7e7e7e7E7E7e7e7E7e7e7e7e7E";
        let text = described(50, |job| {
            job.status = JobStatus::Cancelled;
            job.refund = Some("50000000".into());
            job.attempt_rows = vec![
                AttemptRow {
                    attempt: 1,
                    node_id: 1,
                    claimed: true,
                    outcome: AttemptOutcome::Rejected,
                    fault: AttemptFault::Job,
                    reason: Some("sha256 mismatch for input data".into()),
                    slashed: "0".into(),
                    ..AttemptRow::default()
                },
                AttemptRow {
                    attempt: 2,
                    node_id: 3,
                    outcome: AttemptOutcome::ReclaimedNodeInactive,
                    fault: AttemptFault::Node,
                    reason: Some("the node was marked inactive".into()),
                    slashed: "5000000".into(),
                    slashed_to: Some(treasury.into()),
                    ..AttemptRow::default()
                },
                AttemptRow {
                    attempt: 3,
                    node_id: 4,
                    outcome: AttemptOutcome::FailedByItself,
                    fault: AttemptFault::Job,
                    reason: Some("the job exited with code 1".into()),
                    slashed: "0".into(),
                    ..AttemptRow::default()
                },
            ];
            // Shown by the attempts, not again.
            job.charges = vec![gantry_protocol::api::ChargeRow {
                node_id: 3,
                cause: ChargeCause::NodeInactive,
                amount: "5000000".into(),
                at: 0,
            }];
        });
        for line in [
            "  attempt 1  node 1 (claimed): gave the job back, the job's fault: sha256 mismatch \
             for input data\n",
            &format!(
                "  attempt 2  node 3: reclaimed: the node went inactive, the node's fault: the \
                 node was marked inactive; slashed 5 gUSD to the treasury {treasury}\n"
            ),
            "  attempt 3  node 4: the job failed by itself (its failure report is the result), \
             the job's fault: the job exited with code 1\n",
            &format!(
                "  refunded   50 gUSD to the submitter's credits (`gantry balance`, `gantry \
                 withdraw`): the whole bounty; the nodes' slashes (5 gUSD: node 3's charge for \
                 going inactive with the job) went to the treasury {treasury}, not to the \
                 submitter\n"
            ),
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
        assert!(!text.contains("charged"), "{text}");
        // No slash, a partial refund.
        let text = described(50, |job| job.refund = Some("20000000".into()));
        assert!(
            text.contains("20 gUSD to the submitter's credits (`gantry balance`, `gantry withdraw`): of the bounty of 50 gUSD; no node was slashed on it"),
            "{text}"
        );
    }

    #[test]
    fn a_submitted_job_shows_the_bond_a_dispute_would_post() {
        let submitted = |job: &mut JobRow| {
            job.status = JobStatus::Submitted;
            job.until = Some(1_800_000_000);
        };
        for (bounty, bond) in [(200, "20 gUSD"), (50, "10 gUSD"), (100, "10 gUSD")] {
            let text = described(bounty, submitted);
            assert!(
                text.contains(&format!(
                    "a dispute posts a bond of {bond} (`gantry job dispute 4`)"
                )),
                "bounty {bounty}: {text}"
            );
        }
        // Without the policy (the API never saw it) no bond is guessed.
        let text = described(200, |job| {
            submitted(job);
            job.policy = None;
        });
        assert!(!text.contains("bond"), "{text}");
    }

    #[test]
    fn disputes_refunds_credits_and_charges_read_as_sentences() {
        let check = |change: fn(&mut JobRow), expected: &str| {
            let text = described(200, change);
            assert!(text.contains(expected), "{expected:?} in {text}");
        };
        check(
            |job| job.from_credits = "50000000".into(),
            "bounty     200 gUSD (50 gUSD of it from credits)",
        );
        check(
            |job| {
                job.status = JobStatus::Disputed;
                job.dispute = Some(DisputeRow {
                    bond: "20000000".into(),
                    exposure: "50000000".into(),
                    deadline: 1_800_000_000,
                    ..DisputeRow::default()
                });
            },
            "dispute    bond 20 gUSD posted, 50 gUSD of the node's stake held; the arbiter decides by",
        );
        check(
            |job| {
                job.status = JobStatus::Failed;
                job.refund = Some("200000000".into());
                job.dispute = Some(DisputeRow {
                    bond: "20000000".into(),
                    exposure: "50000000".into(),
                    outcome: Some(DisputeOutcome {
                        bond_to_submitter: "20000000".into(),
                        ..DisputeOutcome::default()
                    }),
                    ..DisputeRow::default()
                });
                job.charges = vec![gantry_protocol::api::ChargeRow {
                    node_id: 1,
                    cause: ChargeCause::DisputeLost,
                    amount: "50000000".into(),
                    at: 0,
                }];
            },
            "decided for the submitter: the bond (20 gUSD) and the bounty went back",
        );
        check(
            |job| job.refund = Some("200000000".into()),
            "refunded   200 gUSD to the submitter's credits (`gantry balance`, `gantry withdraw`)",
        );
        check(
            |job| {
                job.charges = vec![gantry_protocol::api::ChargeRow {
                    node_id: 1,
                    cause: ChargeCause::DisputeLost,
                    amount: "50000000".into(),
                    at: 0,
                }];
            },
            "charged    node 1 50 gUSD to the treasury (lost the dispute)",
        );
        check(
            |job| {
                job.status = JobStatus::Completed;
                job.payout = Some("195000000".into());
                job.fee = Some("5000000".into());
                job.completion = Some(Completion::DisputeWon);
            },
            "paid       195 gUSD to the provider's earnings (fee 5 gUSD, the dispute decided for it)",
        );
    }

    /// The "refunded" line of a job of 200 gUSD, as `change` leaves its detail.
    fn refunded(change: impl FnOnce(&mut JobDetail)) -> String {
        let mut detail = JobDetail {
            job: JobRow {
                job_id: 5,
                bounty: "200000000".into(),
                from_credits: "0".into(),
                refund: Some("200000000".into()),
                ..JobRow::default()
            },
            ..JobDetail::default()
        };
        change(&mut detail);
        let text = describe(&detail, &gusd());
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("refunded"));
        let line = line.unwrap_or_else(|| panic!("a refund in {text}"));
        line.split_once("`gantry withdraw`): ")
            .map(|(_, sentence)| sentence.to_owned())
            .unwrap_or_else(|| panic!("a sentence in {line}"))
    }

    fn charge(node_id: u64, cause: ChargeCause, amount: &str) -> gantry_protocol::api::ChargeRow {
        gantry_protocol::api::ChargeRow {
            node_id,
            cause,
            amount: amount.into(),
            at: 0,
        }
    }

    #[test]
    fn a_lost_dispute_s_refund_names_the_bond_back_and_the_exposure_slashed() {
        let treasury = "0x7E7e7e7E7e7E7e7e7e7e7E7E7e7e7E7e7e7e7e7E";
        let sentence = refunded(|detail| {
            let job = &mut detail.job;
            job.status = JobStatus::Failed;
            job.dispute = Some(DisputeRow {
                bond: "20000000".into(),
                exposure: "9000000".into(),
                outcome: Some(DisputeOutcome {
                    bond_to_submitter: "20000000".into(),
                    bond_to_provider: "0".into(),
                    ..DisputeOutcome::default()
                }),
                ..DisputeRow::default()
            });
            job.charges = vec![charge(2, ChargeCause::DisputeLost, "9000000")];
            job.attempt_rows = vec![AttemptRow {
                attempt: 1,
                node_id: 2,
                outcome: AttemptOutcome::DisputeLost,
                fault: AttemptFault::Node,
                slashed: "9000000".into(),
                slashed_to: Some(treasury.into()),
                ..AttemptRow::default()
            }];
        });
        assert_eq!(
            sentence,
            format!(
                "the whole bounty and the dispute bond (20 gUSD): 220 gUSD in all; the nodes' \
                 slashes (9 gUSD: node 2's dispute exposure, for losing the dispute) went to the \
                 treasury {treasury}, not to the submitter"
            )
        );
    }

    #[test]
    fn every_node_s_charge_is_counted_once() {
        // Node 1 gave the job back (charged), node 3 went inactive (reclaimed); a charge of
        // nothing is no loss.
        let sentence = refunded(|detail| {
            detail.job.refund = Some("150000000".into());
            detail.job.charges = vec![
                charge(1, ChargeCause::Reject, "2000000"),
                charge(4, ChargeCause::Reject, "0"),
                charge(3, ChargeCause::NodeInactive, "5000000"),
            ];
        });
        assert_eq!(
            sentence,
            "of the bounty of 200 gUSD; the nodes' slashes (7 gUSD: node 1's 2 gUSD charge for \
             giving the job back and node 3's 5 gUSD charge for going inactive with the job) went \
             to the treasury, not to the submitter"
        );
    }

    #[test]
    fn a_verified_job_s_refund_counts_its_seats() {
        use gantry_protocol::api::{RefereesRow, SeatRow, TimelineEntry, VerificationRow};
        let seat = |node_id: u64, outcome: &str, charged: Option<&str>| SeatRow {
            node_id,
            role: "replica".into(),
            outcome: outcome.into(),
            charged: charged.map(Into::into),
            ..SeatRow::default()
        };
        // Replicated 3/2, no quorum: one seat paid, one slashed, one reclaimed before (its
        // charge is the job's too, as its `NodeSlashed` made it).
        let sentence = refunded(|detail| {
            let job = &mut detail.job;
            job.bounty = "100000000".into();
            job.refund = Some("200000000".into());
            job.charges = vec![charge(6, ChargeCause::NodeInactive, "4000000")];
            job.verification = Some(VerificationRow {
                tier: "replicated".into(),
                escrow: "300000000".into(),
                seat_rows: vec![
                    seat(4, "paid", None),
                    seat(5, "slashed", Some("10000000")),
                    seat(6, "reclaimed", Some("4000000")),
                ],
                ..VerificationRow::default()
            });
        });
        assert_eq!(
            sentence,
            "the bounty of the 2 seats not paid, of 300 gUSD escrowed; the slashed seats' stakes \
             (14 gUSD: node 6's 4 gUSD charge for going inactive with the job and node 5's 10 \
             gUSD replica seat stake) went to the treasury, not to the submitter"
        );
        // Refereed, overturned: the bounty, the referees' escrow not paid out, the provider's
        // repayment of the referees it paid (`HoldForfeited`, out of its stake); its seat
        // stake slashed.
        let sentence = refunded(|detail| {
            let job = &mut detail.job;
            job.charges = vec![charge(2, ChargeCause::DisputeLost, "30000000")];
            job.verification = Some(VerificationRow {
                tier: "refereed".into(),
                referees: Some(RefereesRow {
                    to_submitter: Some("20000000".into()),
                    ..RefereesRow::default()
                }),
                ..VerificationRow::default()
            });
            detail.timeline = vec![TimelineEntry {
                name: "HoldForfeited".into(),
                data: serde_json::json!({"jobId": 5, "nodeId": 2, "amount": "0x17d7840"}),
                ..TimelineEntry::default()
            }];
        });
        assert_eq!(
            sentence,
            "the whole bounty, 20 gUSD of the referees' bond and prepay and 25 gUSD of node 2's \
             stake, repaying the referees: 245 gUSD in all; the nodes' slashes (30 gUSD: node 2's \
             dispute exposure, for losing the dispute) went to the treasury, not to the submitter"
        );
    }
}
