//! `gantry balance`, `gantry deposit` and `gantry withdraw`.

use alloy::primitives::U256;

use crate::Context;
use crate::config::{BalanceArgs, DepositArgs};
use crate::error::{CliError, Result};
use crate::units;

pub async fn balance(ctx: &Context, args: &BalanceArgs) -> Result<()> {
    let chain = ctx.chain().await?;
    let account = chain.account_or(args.address)?;
    let token = chain.token_info().await?;
    let wallet = chain.balance(account).await?;
    let credits = chain.credit(account).await?;
    let json = serde_json::json!({
        "account": account,
        "token": chain.token.address(),
        "symbol": token.symbol,
        "decimals": token.decimals,
        "wallet": wallet.to_string(),
        "credits": credits.to_string(),
    });
    ctx.say(json, || {
        let hint = if credits.is_zero() {
            ""
        } else {
            " (jobs are posted from them first; `gantry withdraw` pays them out)"
        };
        format!(
            "account  {account}\nwallet   {}\ncredits  {}{hint}",
            token.show(wallet),
            token.show(credits)
        )
    });
    Ok(())
}

pub async fn withdraw(ctx: &Context) -> Result<()> {
    let chain = ctx.chain().await?;
    let account = chain.account()?;
    if chain.credit(account).await?.is_zero() {
        return Err(CliError::Refused(format!(
            "{account} has no credits to withdraw"
        )));
    }
    let receipt = chain.send("withdraw", chain.market.withdraw()).await?;
    let amount = receipt
        .decoded_log::<gantry_protocol::bindings::JobMarket::Withdrawn>()
        .map(|log| log.amount)
        .unwrap_or_default();
    let json = serde_json::json!({
        "tx": receipt.transaction_hash, "amount": amount.to_string(),
    });
    ctx.say_in_tokens(json, |token| {
        format!("withdrew {} to {account}", token.show(amount))
    })
    .await
}

pub async fn deposit(ctx: &Context, args: &DepositArgs) -> Result<()> {
    let chain = ctx.chain().await?;
    let account = chain.account()?;
    let token = chain.token_info().await?.clone();
    let amount = units::parse_amount(&args.amount, token.decimals)
        .map_err(|e| CliError::usage(format!("amount: {e}")))?;
    if amount.is_zero() {
        return Err(CliError::usage("amount: deposit more than nothing"));
    }
    chain.ensure_balance(account, amount, "the deposit").await?;
    chain
        .approve_if_short(*chain.market.address(), amount)
        .await?;
    let receipt = chain.send("deposit", chain.market.deposit(amount)).await?;
    let credits: U256 = chain.credit(account).await?;
    let json = serde_json::json!({
        "tx": receipt.transaction_hash,
        "amount": amount.to_string(),
        "credits": credits.to_string(),
    });
    ctx.say(json, || {
        format!(
            "deposited {}: your credits are {} (jobs are posted from them first)",
            token.show(amount),
            token.show(credits)
        )
    });
    Ok(())
}
