//! `gantry job status|list|logs|result|cancel|accept|dispute`.

use alloy::primitives::U256;
use gantry_protocol::api::LiveEventName;
use gantry_protocol::api::{JobDetail, JobSummary, Page};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::jobs::LogLine;
use gantry_protocol::market;
use gantry_protocol::status::JobStatus;

use crate::Context;
use crate::api::{Api, MAX_RECONNECTS, unsigned, wait_to_reconnect};
use crate::config::{ListArgs, LogsArgs, ResultArgs};
use crate::error::{CliError, Result};
use crate::output::{self, Money};
use crate::results::{self, Source};
use crate::units;

pub async fn status(ctx: &Context, job_id: u64) -> Result<()> {
    let value = ctx.api.job(job_id).await?;
    if ctx.json() {
        output::json(&value);
        return Ok(());
    }
    let detail: JobDetail = Api::typed(&value)?;
    let money = ctx.money().await;
    print!("{}", describe(&detail, &money));
    Ok(())
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
    fact("bounty", money.show_str(&job.bounty));
    fact("deadline", units::format_time(unsigned(job.deadline)));
    if let Ok(r) = serde_json::from_str::<JobMarket::JobRequirements>(&job.requirements) {
        fact("needs", output::requirements(&r, money));
    }
    if let Ok(spec) = serde_json::from_str::<gantry_protocol::spec::JobSpec>(&job.spec) {
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
        fact(
            "challenge",
            format!("open until {}", units::format_time(unsigned(ends))),
        );
    }
    if let Some(payout) = &job.payout {
        let fee = job
            .fee
            .as_deref()
            .map(|f| money.show_str(f))
            .unwrap_or_default();
        fact(
            "paid",
            format!("{} to the provider (fee {fee})", money.show_str(payout)),
        );
    }
    if let Some(refund) = &job.refund {
        fact("refunded", money.show_str(refund));
    }
    if let Some(reason) = &job.reason {
        fact("reason", reason.clone());
    }
    if let Some(pending) = &detail.pending {
        fact("waiting", pending.summary.clone());
    }
    for completion in &detail.completions {
        if let Some(error) = &completion.error {
            fact("attempt", format!("{}: {error}", completion.attempt));
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
    if ctx.json() {
        output::json(&value);
        return Ok(());
    }
    let page: Page<JobSummary> = Api::typed(&value)?;
    let money = ctx.money().await;
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
                units::format_time(unsigned(j.job.posted_at)),
            ]
        })
        .collect();
    let symbol = money
        .0
        .as_ref()
        .map_or("BOUNTY".to_string(), |t| format!("BOUNTY ({})", t.symbol));
    println!(
        "{}",
        output::table(
            &["ID", "STATUS", &symbol, "NODE", "PROGRESS", "POSTED"],
            &rows
        )
    );
    if let Some(cursor) = page.next_cursor {
        println!("more: --cursor {cursor}");
    }
    Ok(())
}

pub async fn logs(ctx: &Context, args: &LogsArgs) -> Result<()> {
    let print = |line: &LogLine| {
        if ctx.json() {
            println!(
                "{}",
                serde_json::to_string(line).expect("log lines serialize")
            );
        } else {
            println!("{}", line.line);
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
    let Some((result_hash, committed_uri)) = chain.result(args.id).await? else {
        let status = chain.job(args.id).await?.state.status;
        return Err(CliError::NotFound(format!(
            "job {} has no result (it is {})",
            args.id,
            status.as_str()
        )));
    };
    let uri = args.uri.clone().unwrap_or(committed_uri);
    let source = Source::parse(&uri)?;
    std::fs::create_dir_all(&args.output).map_err(|e| CliError::io(args.output.display(), e))?;
    let downloaded = results::download(
        &source,
        &ctx.global.nats_url,
        &args.output,
        u64::from(limit) << 20,
    )
    .await?;
    results::verify(&downloaded, result_hash)?;
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
        output::json(&serde_json::json!({
            "jobId": args.id,
            "uri": uri,
            "bytes": bytes,
            "sha256": sha256,
            "dir": args.output,
            "files": unpacked.files,
            "dirs": unpacked.dirs,
        }));
    } else {
        println!(
            "job {} result: {bytes} bytes, sha256 {sha256} (matches the chain), {} files unpacked into {}",
            args.id,
            unpacked.files,
            args.output.display()
        );
    }
    Ok(())
}

/// Refuses, before anything is sent, a call on `job` the market would refuse for its
/// status (a settled job's state is gone from the chain, so the market could only say
/// "stale"); `only` names the status the call needs and what it does.
fn require_status(job_id: u64, job: &market::Job, needed: JobStatus, only: &str) -> Result<()> {
    let status = job.state.status;
    if status == needed {
        return Ok(());
    }
    Err(CliError::Refused(format!(
        "job {job_id} is {}: {only}",
        status.as_str()
    )))
}

pub async fn cancel(ctx: &Context, job_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let job = chain.job(job_id).await?;
    require_status(
        job_id,
        &job,
        JobStatus::Open,
        "only an open job can be cancelled",
    )?;
    let (terms, state) = (job.terms.pack(), job.state.pack());
    let receipt = chain
        .send("cancel", chain.market.cancel(job_id, terms, state))
        .await?;
    let refund = receipt
        .decoded_log::<JobMarket::JobCancelled>()
        .map(|log| U256::from(log.refund))
        .unwrap_or_default();
    if ctx.json() {
        output::json(&serde_json::json!({
            "jobId": job_id, "tx": receipt.transaction_hash, "refund": refund.to_string(),
        }));
    } else {
        println!(
            "job {job_id} cancelled: {} credited to you (`gantry withdraw` pays it out)",
            chain.token_info().await?.show(refund)
        );
    }
    Ok(())
}

pub async fn accept(ctx: &Context, job_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let job = chain.job(job_id).await?;
    require_status(
        job_id,
        &job,
        JobStatus::Submitted,
        "only a submitted job can be accepted",
    )?;
    let (terms, state) = (job.terms.pack(), job.state.pack());
    let receipt = chain
        .send("accept", chain.market.accept(job_id, terms, state))
        .await?;
    let completed = receipt
        .decoded_log::<JobMarket::JobCompleted>()
        .ok_or_else(|| CliError::Other("the receipt has no JobCompleted log".into()))?;
    if ctx.json() {
        output::json(&serde_json::json!({
            "jobId": job_id,
            "tx": receipt.transaction_hash,
            "payout": completed.payout.to_string(),
            "fee": completed.fee.to_string(),
        }));
    } else {
        let token = chain.token_info().await?;
        println!(
            "job {job_id} accepted: {} paid to node {}'s operator (fee {})",
            token.show(completed.payout),
            completed.nodeId,
            token.show(completed.fee)
        );
    }
    Ok(())
}

/// Disputes posting the bond (the larger of the job's policy floor and a tenth of its
/// bounty): checks first what the contract would (status, submitter, window, balance), so
/// no approval is sent for a dispute that cannot happen.
pub async fn dispute(ctx: &Context, job_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let account = chain.account()?;
    let job = chain.job(job_id).await?;
    require_status(
        job_id,
        &job,
        JobStatus::Submitted,
        "only a submitted job can be disputed, inside its challenge window",
    )?;
    if job.terms.submitter != account {
        return Err(CliError::Refused(format!(
            "job {job_id} was not posted by {account}: only its submitter may dispute it"
        )));
    }
    let ends = job.state.until;
    if chain.now().await? >= ends {
        return Err(CliError::Refused(format!(
            "the challenge window of job {job_id} closed at {}: it can no longer be disputed",
            units::format_time(ends)
        )));
    }
    let policy = chain.policy(job.terms.policy).await?;
    let bond = U256::from(policy.bond(job.terms.bounty));
    chain
        .ensure_balance(account, bond, "the dispute bond")
        .await?;
    chain
        .approve_if_short(*chain.market.address(), bond)
        .await?;
    let (terms, state) = (job.terms.pack(), job.state.pack());
    let receipt = chain
        .send("dispute", chain.market.dispute(job_id, terms, state))
        .await?;
    if ctx.json() {
        output::json(&serde_json::json!({
            "jobId": job_id, "tx": receipt.transaction_hash, "bond": bond.to_string(),
        }));
    } else {
        println!(
            "job {job_id} disputed with a bond of {}: the arbiter decides; the winner gets the bond",
            chain.token_info().await?.show(bond)
        );
    }
    Ok(())
}
