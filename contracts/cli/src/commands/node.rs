//! `gantry node register|status|exit|withdraw|earnings`, as the node's operator, and
//! `gantry node consent`, as its agent.

use alloy::primitives::U256;
use alloy::primitives::aliases::U96;
use gantry_protocol::api::NodeDetail;
use gantry_protocol::bindings::NodeRegistry;
use gantry_protocol::status::NodeStatus;

use crate::Context;
use crate::api::{Api, unsigned};
use crate::config::{ConsentArgs, RegisterArgs};
use crate::error::{CliError, Result};
use crate::output::{self, Money};
use crate::units;

pub async fn register(ctx: &Context, args: &RegisterArgs) -> Result<()> {
    let usage = |flag: &'static str| move |e: String| CliError::usage(format!("--{flag}: {e}"));
    let gpu_model = args.gpu.as_deref().map(units::model_id).unwrap_or_default();
    let gpu_count = args.gpus.unwrap_or(u16::from(!gpu_model.is_zero()));
    let vram_mib = match &args.vram {
        Some(text) => units::parse_size_mib(text).map_err(usage("vram"))?,
        None if gpu_count > 0 => {
            return Err(CliError::usage(
                "--vram: a node with GPUs says how much memory each has",
            ));
        }
        None => 0,
    };
    let ram_mib = units::parse_size_mib(&args.ram).map_err(usage("ram"))?;

    let chain = ctx.chain().await?;
    let operator = chain.account()?;
    let token = chain.token_info().await?.clone();
    let to_u96 = |flag: &'static str, text: &str| -> Result<U96> {
        let amount = units::parse_amount(text, token.decimals).map_err(usage(flag))?;
        U96::checked_from_limbs_slice(amount.as_limbs())
            .ok_or_else(|| CliError::usage(format!("--{flag}: more than the contract's uint96")))
    };
    let price = to_u96("price", &args.price)?;
    let min_stake = chain.market_params().await?.minStake;
    let stake = match &args.stake {
        Some(text) => to_u96("stake", text)?,
        None => min_stake,
    };
    if stake < min_stake {
        return Err(CliError::Refused(format!(
            "a stake of {} is below the registry's minimum {}",
            token.show(stake),
            token.show(min_stake)
        )));
    }
    let capabilities = NodeRegistry::NodeCapabilities {
        gpuModel: gpu_model,
        gpuCount: gpu_count,
        vramMiB: vram_mib,
        cpuCores: args.cpus,
        ramMiB: ram_mib,
        pricePerGpuHour: price,
        maxConcurrentJobs: args.slots,
    };
    // An agent other than the operator must have consented (`gantry node consent`).
    let agent = args.agent.unwrap_or(operator);
    let (deadline, signature) = match (&args.consent, args.consent_deadline) {
        (Some(signature), Some(deadline)) => (U256::from(deadline), signature.clone()),
        _ if agent == operator => (U256::ZERO, Default::default()),
        _ => {
            return Err(CliError::usage(format!(
                "--agent {agent} is not you: the agent consents first — it runs `gantry node \
                 consent --operator {operator}` with its own key — and you pass what it \
                 prints as --consent and --consent-deadline"
            )));
        }
    };
    chain
        .ensure_balance(operator, U256::from(stake), "the stake")
        .await?;
    chain
        .approve_if_short(*chain.registry.address(), U256::from(stake))
        .await?;
    let receipt = chain
        .send(
            "register",
            chain.registry.register(
                capabilities,
                args.metadata_uri.clone(),
                stake,
                agent,
                deadline,
                signature,
            ),
        )
        .await?;
    let registered = receipt
        .decoded_log::<NodeRegistry::NodeRegistered>()
        .ok_or_else(|| CliError::Other("the receipt has no NodeRegistered log".into()))?;
    if ctx.json() {
        output::json(&serde_json::json!({
            "nodeId": registered.nodeId,
            "tx": receipt.transaction_hash,
            "stake": stake.to_string(),
        }));
    } else {
        println!(
            "node {} registered with a stake of {} (agent {}, tx {})",
            registered.nodeId,
            token.show(stake),
            registered.agent,
            receipt.transaction_hash
        );
    }
    Ok(())
}

pub async fn status(ctx: &Context, node_id: u64) -> Result<()> {
    let value = ctx.api.node(node_id).await?;
    if ctx.json() {
        output::json(&value);
        return Ok(());
    }
    let detail: NodeDetail = Api::typed(&value)?;
    let money = ctx.money().await;
    print!("{}", describe(&detail, &money));
    // The unbonding end is on-chain only.
    if detail.node.node.status == NodeStatus::Exiting
        && let Ok(chain) = ctx.chain().await
        && let Ok(node) = chain.registry.getNode(node_id).call().await
    {
        println!(
            "  {:<10} stake withdrawable from {} (`gantry node withdraw {node_id}`)",
            "unbonding",
            units::format_time(node.unbondingEndsAt.to::<u64>())
        );
    }
    Ok(())
}

/// A node for people.
pub fn describe(detail: &NodeDetail, money: &Money) -> String {
    let view = &detail.node;
    let node = &view.node;
    let mut lines = vec![format!("node {}: {}", node.node_id, node.status)];
    let mut fact = |name: &str, value: String| lines.push(format!("  {name:<10} {value}"));
    fact("operator", node.operator.clone());
    fact("agent", node.agent.clone());
    let gpus = if node.gpu_count == 0 {
        "no GPU".to_string()
    } else {
        format!(
            "{}× {} ({} each)",
            node.gpu_count,
            node.gpu_model,
            units::format_mib(unsigned(node.vram_mib))
        )
    };
    fact(
        "offers",
        format!(
            "{gpus} · {} CPU cores · {} RAM · {} per GPU-hour · {} slot(s)",
            node.cpu_cores,
            units::format_mib(unsigned(node.ram_mib)),
            money.show_str(&node.price_per_gpu_hour),
            node.max_concurrent_jobs
        ),
    );
    fact(
        "stake",
        format!(
            "{} (slashed {})",
            money.show_str(&node.stake),
            money.show_str(&node.slashed)
        ),
    );
    fact("earned", money.show_str(&node.earnings));
    fact(
        "jobs",
        format!(
            "{} running · {} completed · {} failed · reputation {:.2}",
            node.active_jobs, node.completed_jobs, node.failed_jobs, view.reputation
        ),
    );
    fact(
        "heartbeat",
        format!(
            "{} ago",
            units::format_secs(unsigned(view.heartbeat_age_secs).max(1))
        ),
    );
    for job in &detail.jobs {
        fact("job", format!("{} ({})", job.job_id, job.status));
    }
    lines.push(String::new());
    lines.join("\n")
}

pub async fn exit(ctx: &Context, node_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let receipt = chain
        .send("beginExit", chain.registry.beginExit(node_id))
        .await?;
    let begun = receipt
        .decoded_log::<NodeRegistry::NodeExitBegun>()
        .ok_or_else(|| CliError::Other("the receipt has no NodeExitBegun log".into()))?;
    let ends = begun.unbondingEndsAt.to::<u64>();
    if ctx.json() {
        output::json(&serde_json::json!({
            "nodeId": node_id, "tx": receipt.transaction_hash, "unbondingEndsAt": ends,
        }));
    } else {
        println!(
            "node {node_id} is exiting: no new jobs; the stake is withdrawable from {} \
             once its jobs have settled (`gantry node withdraw {node_id}`)",
            units::format_time(ends)
        );
    }
    Ok(())
}

pub async fn withdraw(ctx: &Context, node_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let receipt = chain
        .send("withdrawStake", chain.registry.withdrawStake(node_id))
        .await?;
    let withdrawn = receipt
        .decoded_log::<NodeRegistry::NodeStakeWithdrawn>()
        .ok_or_else(|| CliError::Other("the receipt has no NodeStakeWithdrawn log".into()))?;
    if ctx.json() {
        output::json(&serde_json::json!({
            "nodeId": node_id,
            "tx": receipt.transaction_hash,
            "amount": withdrawn.amount.to_string(),
        }));
    } else {
        println!(
            "node {node_id} exited: its stake of {} went back to {}",
            chain.token_info().await?.show(withdrawn.amount),
            withdrawn.operator
        );
    }
    Ok(())
}

pub async fn earnings(ctx: &Context, node_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let receipt = chain
        .send("withdrawEarnings", chain.registry.withdrawEarnings(node_id))
        .await?;
    let paid = receipt
        .decoded_log::<NodeRegistry::NodeEarningsWithdrawn>()
        .ok_or_else(|| CliError::Other("the receipt has no NodeEarningsWithdrawn log".into()))?;
    if ctx.json() {
        output::json(&serde_json::json!({
            "nodeId": node_id,
            "tx": receipt.transaction_hash,
            "amount": paid.amount.to_string(),
        }));
    } else {
        println!(
            "node {node_id}'s earnings of {} went to {}",
            chain.token_info().await?.show(paid.amount),
            paid.operator
        );
    }
    Ok(())
}

/// Signs, as the agent, its consent to serve a node of `--operator`: the EIP-712
/// `AgentConsent` the market checks, with the agent's current nonce. The digest is
/// computed here from what the agent means to consent to, not asked of the node.
pub async fn consent(ctx: &Context, args: &ConsentArgs) -> Result<()> {
    let chain = ctx.chain().await?;
    let agent = chain.account()?;
    let valid_for = units::parse_duration_secs(&args.valid_for)
        .map_err(|e| CliError::usage(format!("--valid-for: {e}")))?;
    let nonce = chain
        .registry
        .agentNonce(agent)
        .call()
        .await
        .map_err(|e| CliError::Unavailable(format!("reading agentNonce: {e}")))?;
    let deadline = chain.now().await? + valid_for;
    let digest = gantry_protocol::consent::digest(
        chain.chain_id,
        *chain.market.address(),
        args.operator,
        agent,
        nonce,
        deadline,
    );
    let signature = chain.sign_hash(&digest).await?;
    if ctx.json() {
        output::json(&serde_json::json!({
            "agent": agent,
            "operator": args.operator,
            "nonce": nonce.to_string(),
            "deadline": deadline,
            "signature": signature,
        }));
    } else {
        println!(
            "agent {agent} consents to serve a node of {} until {} (nonce {nonce}); the \
             operator registers with:\n  --agent {agent} --consent {signature} --consent-deadline {deadline}",
            args.operator,
            units::format_time(deadline)
        );
    }
    Ok(())
}
