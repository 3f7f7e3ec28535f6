//! `gantry node register|status|topup|exit|withdraw|earnings|set-agent`, as the node's operator,
//! and `gantry node consent`, as its agent.

use alloy::primitives::aliases::U96;
use alloy::primitives::{Address, Bytes, U256};
use alloy::rpc::types::TransactionReceipt;
use gantry_protocol::api::NodeDetail;
use gantry_protocol::bindings::NodeRegistry;
use gantry_protocol::status::NodeStatus;

use crate::Context;
use crate::chain::{self, Chain, SignedConsent};
use crate::config::{AgentArgs, ConsentArgs, RegisterArgs, SetAgentArgs, TopupArgs};
use crate::error::{CliError, Result};
use crate::output::Money;
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
    // Twice the minimum by default: a node registered with exactly the minimum would be
    // disabled for good by its first slash.
    let stake = match &args.stake {
        Some(text) => to_u96("stake", text)?,
        None => min_stake.saturating_mul(U96::from(2)),
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
        engines: args
            .engines
            .iter()
            .copied()
            .collect::<gantry_protocol::eligibility::Engines>()
            .0,
    };
    // An agent other than the operator must have consented.
    let consent = agent_consent(chain, operator, &args.agent, Some(operator)).await?;
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
                consent.agent,
                U256::from(consent.deadline),
                consent.signature,
            ),
        )
        .await?;
    let registered: NodeRegistry::NodeRegistered = chain::logged(&receipt)?;
    let json = serde_json::json!({
        "nodeId": registered.nodeId,
        "tx": receipt.transaction_hash,
        "stake": stake.to_string(),
        "agent": registered.agent,
    });
    ctx.say(json, || {
        format!(
            "node {} registered with a stake of {} (agent {}, tx {})",
            registered.nodeId,
            token.show(stake),
            registered.agent,
            receipt.transaction_hash
        )
    });
    Ok(())
}

pub async fn status(ctx: &Context, node_id: u64) -> Result<()> {
    ctx.show(ctx.api.node(node_id).await?, describe).await
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
            units::format_mib(node.vram_mib)
        )
    };
    fact(
        "offers",
        format!(
            "{gpus} · {} CPU cores · {} RAM · {} per GPU-hour · {} slot(s)",
            node.cpu_cores,
            units::format_mib(node.ram_mib),
            money.show_str(&node.price_per_gpu_hour),
            node.max_concurrent_jobs
        ),
    );
    let locked = node.locked_stake.parse::<U256>().unwrap_or_default();
    let held = if locked.is_zero() {
        String::new()
    } else {
        format!(", {} held for open disputes", money.show(locked))
    };
    fact(
        "stake",
        format!(
            "{} (slashed {}{held})",
            money.show_str(&node.stake),
            money.show_str(&node.slashed)
        ),
    );
    let earnings = node.earnings.parse::<U256>().unwrap_or_default();
    let withdraw = if earnings.is_zero() {
        String::new()
    } else {
        format!(
            " (`gantry node withdraw-earnings {}` pays them to the operator)",
            node.node_id
        )
    };
    fact(
        "earnings",
        format!(
            "{} to withdraw{withdraw} · {} withdrawn · fees owed {}",
            money.show(earnings),
            money.show_str(&node.earnings_withdrawn),
            money.show_str(&node.fees_owed)
        ),
    );
    if let (Some(ends), NodeStatus::Exiting) = (node.unbonding_ends_at, node.status) {
        fact(
            "unbonding",
            format!(
                "stake withdrawable from {} (`gantry node withdraw {}`)",
                units::format_time(ends),
                node.node_id
            ),
        );
    }
    if let Some(since) = node.inactive_since
        && node.status == NodeStatus::Inactive
    {
        fact(
            "inactive",
            format!(
                "since {} (a heartbeat reactivates it)",
                units::format_time(since)
            ),
        );
    }
    // The API's reason from the chain's facts; a stake below the minimum needs a top-up.
    if let Some(no_work) = &view.takes_no_work
        && no_work.reason == "stake_below_minimum"
    {
        fact(
            "no work",
            format!(
                "the stake is below the market's minimum: `gantry node topup {} <amount>`",
                node.node_id
            ),
        );
    }
    fact(
        "jobs",
        format!(
            "{} running · {} completed · {} failed · reputation {:.2}",
            node.active_jobs, node.completed_jobs, node.failed_jobs, view.reputation
        ),
    );
    fact(
        "heartbeat",
        format!("{} ago", units::format_secs(view.heartbeat_age_secs.max(1))),
    );
    for job in &detail.jobs {
        fact("job", format!("{} ({})", job.job_id, job.status));
    }
    lines.push(String::new());
    lines.join("\n")
}

/// Adds to the node's stake (`topUpStake`, operator only), approving the registry first
/// when its allowance is short.
pub async fn topup(ctx: &Context, args: &TopupArgs) -> Result<()> {
    let node_id = args.id;
    let chain = ctx.chain().await?;
    let operator = chain.account()?;
    let token = chain.token_info().await?.clone();
    let amount = units::parse_amount(&args.amount, token.decimals)
        .map_err(|e| CliError::usage(format!("amount: {e}")))?;
    if amount.is_zero() {
        return Err(CliError::usage("amount: top up more than nothing"));
    }
    let amount = U96::checked_from_limbs_slice(amount.as_limbs())
        .ok_or_else(|| CliError::usage("amount: more than the contract's uint96"))?;
    chain
        .ensure_balance(operator, U256::from(amount), "the top-up")
        .await?;
    chain
        .approve_if_short(*chain.registry.address(), U256::from(amount))
        .await?;
    let receipt = chain
        .send("topUpStake", chain.registry.topUpStake(node_id, amount))
        .await?;
    let added: NodeRegistry::NodeStakeAdded = chain::logged(&receipt)?;
    let min_stake = chain.market_params().await?.minStake;
    let json = serde_json::json!({
        "nodeId": node_id,
        "tx": receipt.transaction_hash,
        "amount": added.amount.to_string(),
        "stake": added.stake.to_string(),
        "minStake": min_stake.to_string(),
    });
    ctx.say(json, || {
        let hint = if added.stake < min_stake {
            format!(
                "; still below the minimum {}: the node takes no work",
                token.show(min_stake)
            )
        } else {
            String::new()
        };
        format!(
            "node {node_id}: {} added, stake now {}{hint} (tx {})",
            token.show(added.amount),
            token.show(added.stake),
            receipt.transaction_hash
        )
    });
    Ok(())
}

pub async fn exit(ctx: &Context, node_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let call = chain.registry.beginExit(node_id);
    let receipt = chain.send("beginExit", call).await?;
    let begun: NodeRegistry::NodeExitBegun = chain::logged(&receipt)?;
    let ends = begun.unbondingEndsAt.to::<u64>();
    let json = serde_json::json!({
        "nodeId": node_id, "tx": receipt.transaction_hash, "unbondingEndsAt": ends,
    });
    ctx.say(json, || {
        format!(
            "node {node_id} is exiting: no new jobs; the stake is withdrawable from {} \
             once its jobs have settled (`gantry node withdraw {node_id}`)",
            units::format_time(ends)
        )
    });
    Ok(())
}

pub async fn withdraw(ctx: &Context, node_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let call = chain.registry.withdrawStake(node_id);
    let receipt = chain.send("withdrawStake", call).await?;
    let withdrawn: NodeRegistry::NodeStakeWithdrawn = chain::logged(&receipt)?;
    let operator = withdrawn.operator;
    paid_out(ctx, node_id, &receipt, withdrawn.amount, |amount| {
        format!("node {node_id} exited: its stake of {amount} went back to {operator}")
    })
    .await
}

pub async fn earnings(ctx: &Context, node_id: u64) -> Result<()> {
    let chain = ctx.chain().await?;
    let call = chain.registry.withdrawEarnings(node_id);
    let receipt = chain.send("withdrawEarnings", call).await?;
    let paid: NodeRegistry::NodeEarningsWithdrawn = chain::logged(&receipt)?;
    let operator = paid.operator;
    paid_out(ctx, node_id, &receipt, paid.amount, |amount| {
        format!("node {node_id}'s earnings of {amount} went to {operator}")
    })
    .await
}

/// Says what `withdraw` or `earnings` paid out: the node, the transaction and the amount
/// with `--json`, else the line `text` makes of the amount in tokens.
async fn paid_out(
    ctx: &Context,
    node_id: u64,
    receipt: &TransactionReceipt,
    amount: U96,
    text: impl FnOnce(String) -> String,
) -> Result<()> {
    let json = serde_json::json!({
        "nodeId": node_id,
        "tx": receipt.transaction_hash,
        "amount": amount.to_string(),
    });
    ctx.say_in_tokens(json, |token| text(token.show(amount)))
        .await
}

/// Signs, as the agent, its consent to serve a node of `--operator`: the EIP-712
/// `AgentConsent` the market checks, with the agent's current nonce. The digest is
/// computed here from what the agent means to consent to, not asked of the node.
pub async fn consent(ctx: &Context, args: &ConsentArgs) -> Result<()> {
    let valid_for = units::parse_duration_secs(&args.valid_for)
        .map_err(|e| CliError::usage(format!("--valid-for: {e}")))?;
    let chain = ctx.chain().await?;
    let agent = chain::signer(&ctx.global)?.ok_or_else(|| {
        CliError::usage("the agent signs its consent with its own key: set GANTRY_PRIVATE_KEY")
    })?;
    let SignedConsent {
        nonce,
        deadline,
        signature,
    } = chain.consent(&agent, args.operator, valid_for).await?;
    let agent = agent.address();
    let json = serde_json::json!({
        "agent": agent,
        "operator": args.operator,
        "nonce": nonce.to_string(),
        "deadline": deadline,
        "signature": signature,
    });
    ctx.say(json, || {
        format!(
            "agent {agent} consents to serve a node of {} until {} (nonce {nonce}: it is good \
             for one registration or agent change); the operator registers (or re-points a node) with:\n  --agent \
             {agent} --consent {signature} --consent-deadline {deadline}",
            args.operator,
            units::format_time(deadline)
        )
    });
    Ok(())
}

/// `setAgent`: the node is served by another agent from now on, which consents.
pub async fn set_agent(ctx: &Context, args: &SetAgentArgs) -> Result<()> {
    let chain = ctx.chain().await?;
    let operator = chain.account()?;
    let consent = agent_consent(chain, operator, &args.agent, None).await?;
    let receipt = chain
        .send(
            "setAgent",
            chain.registry.setAgent(
                args.id,
                consent.agent,
                U256::from(consent.deadline),
                consent.signature,
            ),
        )
        .await?;
    let changed: NodeRegistry::NodeAgentChanged = chain::logged(&receipt)?;
    let json = serde_json::json!({
        "nodeId": args.id, "tx": receipt.transaction_hash, "agent": changed.agent,
    });
    ctx.say(json, || {
        format!(
            "node {} is served by agent {} from now on (tx {})",
            args.id, changed.agent, receipt.transaction_hash
        )
    });
    Ok(())
}

/// An agent and its consent as `register` and `setAgent` take them.
#[derive(Debug)]
struct Consent {
    agent: Address,
    /// Zero with no signature: the agent is the caller.
    deadline: u64,
    signature: Bytes,
}

/// How long a consent signed here for the caller's own transaction stays valid.
const LOCAL_CONSENT_SECS: u64 = 600;

/// The agent the flags name and its consent to serve `operator`: signed here with the
/// agent's key, or as the agent signed it (`gantry node consent`). The operator's own
/// address needs none (the market takes the caller's word for itself); `default` is the
/// agent when the flags name none (`register`: the operator).
async fn agent_consent(
    chain: &Chain,
    operator: Address,
    args: &AgentArgs,
    default: Option<Address>,
) -> Result<Consent> {
    let unsigned = |agent: Address| Consent {
        agent,
        deadline: 0,
        signature: Bytes::new(),
    };
    let given = args.consent.clone().zip(args.consent_deadline);
    match (chain::agent_signer(args)?, given) {
        (Some(_), Some(_)) => Err(CliError::usage(
            "both the agent's key (--agent-key, --agent-key-file or GANTRY_AGENT_KEY) and \
             --consent give its consent; keep one",
        )),
        (Some(key), None) => {
            let agent = key.address();
            if let Some(named) = args.agent
                && named != agent
            {
                return Err(CliError::usage(format!(
                    "--agent {named} is not the agent key's address {agent}"
                )));
            }
            if agent == operator {
                return Ok(unsigned(agent));
            }
            let signed = chain.consent(&key, operator, LOCAL_CONSENT_SECS).await?;
            Ok(Consent {
                agent,
                deadline: signed.deadline,
                signature: signed.signature,
            })
        }
        (None, Some((signature, deadline))) => {
            let agent = args.agent.ok_or_else(|| {
                CliError::usage("--consent: name the agent that signed it (--agent)")
            })?;
            chain
                .check_consent(operator, agent, deadline, &signature)
                .await?;
            Ok(Consent {
                agent,
                deadline,
                signature,
            })
        }
        (None, None) => match args.agent.or(default) {
            Some(agent) if agent == operator => Ok(unsigned(agent)),
            Some(agent) => Err(CliError::usage(format!(
                "--agent {agent} is not you: the agent consents first — it runs `gantry node \
                 consent --operator {operator}` with its own key and you pass what it prints \
                 as --consent and --consent-deadline — or give its key here (--agent-key-file \
                 or GANTRY_AGENT_KEY) to sign the consent locally"
            ))),
            None => Err(CliError::usage(
                "name the new agent: --agent with its --consent, or its key (--agent-key-file \
                 or GANTRY_AGENT_KEY)",
            )),
        },
    }
}
