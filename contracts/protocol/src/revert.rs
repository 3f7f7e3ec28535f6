//! Contract reverts as sentences: the custom errors of `contracts/src/interfaces` (and the
//! token's OpenZeppelin errors, which the market's transfers pass through), decoded through
//! the bindings' error enums. Pure. The CLI shows them to its users (with an exit code by
//! [`Refusal`] kind), the worker writes them in its logs.

use crate::bindings::{GantryTestToken, JobMarket, NodeRegistry};
use alloy::primitives::U256;
use alloy::primitives::ruint::UintTryFrom;

use crate::api::TokenInfo;
use crate::status::{JobStatus, NodeStatus};
use crate::units::{format_amount, format_time};

/// Why the contracts refused a call, as a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The job, node or account the call names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The call is not allowed in this state or by this caller.
    #[error("{0}")]
    Refused(String),
}

impl TokenInfo {
    /// "12.5 gUSD".
    pub fn show<T>(&self, amount: T) -> String
    where
        U256: UintTryFrom<T>,
    {
        format!(
            "{} {}",
            format_amount(U256::from(amount), self.decimals),
            self.symbol
        )
    }
}

/// A status the chain reported, by name ("unknown" for a value no contract defines).
pub fn job_status_name(value: u8) -> &'static str {
    JobStatus::try_from(value).map_or("unknown", JobStatus::as_str)
}

fn node_status_name(value: u8) -> &'static str {
    NodeStatus::try_from(value).map_or("unknown", NodeStatus::as_str)
}

/// The status a call needs, for "job 4 is assigned: only an open job can be cancelled".
fn needs(call: &str) -> Option<&'static str> {
    match call {
        "cancel" => Some("only an open job can be cancelled"),
        "accept" => Some("only a submitted job can be accepted"),
        "dispute" => Some("only a submitted job can be disputed, inside its challenge window"),
        _ => None,
    }
}

/// The sentence for a revert of `call`, when it is one of the contracts' errors.
pub fn explain(call: &str, error: &alloy::contract::Error, token: &TokenInfo) -> Option<Refusal> {
    if let Some(e) = error.as_decoded_interface_error::<JobMarket::JobMarketErrors>() {
        return Some(market(call, e, token));
    }
    if let Some(e) = error.as_decoded_interface_error::<NodeRegistry::NodeRegistryErrors>() {
        return Some(registry(e, token));
    }
    if let Some(e) = error.as_decoded_interface_error::<GantryTestToken::GantryTestTokenErrors>() {
        return Some(token_error(e, token));
    }
    None
}

pub fn market(call: &str, error: JobMarket::JobMarketErrors, token: &TokenInfo) -> Refusal {
    use JobMarket::JobMarketErrors as E;
    let refused = |message: String| Refusal::Refused(message);
    let time = |t: alloy::primitives::aliases::U40| format_time(t.to::<u64>());
    match error {
        E::JobMarket_StaleState(e) => refused(format!(
            "job {} has moved on (or does not exist, or is settled): fetch its current state and try again",
            e.jobId
        )),
        E::JobMarket_WrongTerms(e) => refused(format!(
            "those are not the terms job {} was posted with",
            e.jobId
        )),
        E::JobMarket_WrongStatus(e) => {
            let status = job_status_name(e.status);
            match needs(call) {
                Some(rule) => refused(format!("job {} is {status}: {rule}", e.jobId)),
                None => refused(format!("job {} is {status}", e.jobId)),
            }
        }
        E::JobMarket_NotSubmitter(e) => refused(format!(
            "job {} was not posted by {}: only its submitter may {call} it",
            e.jobId, e.caller
        )),
        E::JobMarket_ChallengeWindowClosed(e) => refused(format!(
            "the challenge window of job {} closed at {}: it can no longer be disputed",
            e.jobId,
            time(e.until)
        )),
        E::JobMarket_ChallengeWindowOpen(e) => refused(format!(
            "the challenge window of job {} is open until {}",
            e.jobId,
            time(e.until)
        )),
        E::JobMarket_DisputeOpen(e) => refused(format!(
            "the arbiter has until {} to decide the dispute of job {}",
            time(e.until),
            e.jobId
        )),
        E::JobMarket_DisputeLapsed(e) => refused(format!(
            "the dispute of job {} lapsed at {}: anyone may settle it now",
            e.jobId,
            time(e.until)
        )),
        E::JobMarket_DeadlineTooSoon(e) => refused(format!(
            "the deadline {} leaves no room for one attempt: it must be at least {}",
            time(e.deadline),
            format_time(u64::try_from(e.earliest).unwrap_or(u64::MAX))
        )),
        E::JobMarket_DoesNotFit(e) => refused(format!(
            "an attempt of job {} started now would end after its deadline {}",
            e.jobId,
            time(e.deadline)
        )),
        E::JobMarket_RuntimeOver(e) => refused(format!(
            "the attempt of job {} ran out of time at {}",
            e.jobId,
            time(e.until)
        )),
        E::JobMarket_MustBeReclaimed(e) => refused(format!(
            "job {}'s node is at fault (inactive during the attempt, or past its runtime): the job can only be reclaimed",
            e.jobId
        )),
        E::JobMarket_NotReclaimable(e) => refused(format!(
            "job {}'s node is within its runtime and was not marked inactive",
            e.jobId
        )),
        E::JobMarket_NotExpired(e) => refused(format!(
            "an attempt of job {} still fits before its deadline",
            e.jobId
        )),
        E::JobMarket_Barred(e) => refused(format!(
            "node {} gave job {} back or failed it: it may not take it again",
            e.nodeId, e.jobId
        )),
        E::JobMarket_NodeNotActive(e) => refused(format!(
            "node {} is {}, not active",
            e.nodeId,
            node_status_name(e.status)
        )),
        E::JobMarket_ZeroBounty(_) => refused("the bounty must be more than 0".into()),
        E::JobMarket_EmptySpec(_) => refused("the spec is empty".into()),
        E::JobMarket_SpecTooLarge(e) => refused(format!(
            "the spec is {} bytes; the market takes at most {}",
            e.length, e.max
        )),
        E::JobMarket_InvalidRequirements(_) => refused(
            "invalid requirements: priority must be 1 to 10, the runtime positive and at most \
             7 days, a GPU model needs at least one GPU, and the engine must be docker or wasm \
             (a WASM job takes no GPU)"
                .into(),
        ),
        E::JobMarket_EngineNotServed(e) => refused(format!(
            "the node does not run {} jobs",
            crate::spec::Engine::from_code(e.engine).map_or_else(
                || format!("engine {}", e.engine),
                |engine| engine.to_string()
            )
        )),
        E::JobMarket_NothingToWithdraw(_) => refused("you have no credits to withdraw".into()),
        E::JobMarket_NotAssignedAgent(e) => refused(format!(
            "{} is not the agent of the node job {} is assigned to",
            e.caller, e.jobId
        )),
        E::JobMarket_NotNodeAgent(e) => refused(format!(
            "{} is not the agent of node {}",
            e.caller, e.nodeId
        )),
        E::JobMarket_PriceTooHigh(e) => refused(format!(
            "the node charges {} per GPU-hour, more than the job's {}",
            token.show(e.price),
            token.show(e.maxPrice)
        )),
        E::JobMarket_Paused(_) => refused(
            "the market is paused: no new jobs or nodes (settlement and withdrawals work)".into(),
        ),
        E::NodeRegistry_TextTooLong(e) => refused(format!(
            "a text of {} bytes is longer than the market's {}",
            e.length, e.max
        )),
        E::AccessControlUnauthorizedAccount(e) => refused(format!(
            "{} lacks the role {} this call needs",
            e.account, e.neededRole
        )),
        other => refused(format!("{call} refused by the market: {other:?}")),
    }
}

pub fn registry(error: NodeRegistry::NodeRegistryErrors, token: &TokenInfo) -> Refusal {
    use NodeRegistry::NodeRegistryErrors as E;
    let refused = |message: String| Refusal::Refused(message);
    match error {
        E::NodeRegistry_UnknownNode(e) => {
            Refusal::NotFound(format!("node {} does not exist", e.nodeId))
        }
        E::NodeRegistry_StakeTooLow(e) => refused(format!(
            "a stake of {} is below the market's minimum {}",
            token.show(e.stake),
            token.show(e.minStake)
        )),
        E::NodeRegistry_NotOperator(e) => refused(format!(
            "node {} is not operated by {}: only its operator may do this",
            e.nodeId, e.caller
        )),
        E::NodeRegistry_NotAgent(e) => refused(format!(
            "{} is not the agent of node {}",
            e.caller, e.nodeId
        )),
        E::NodeRegistry_Exiting(e) => {
            refused(format!("node {} is already exiting or exited", e.nodeId))
        }
        E::NodeRegistry_NotExiting(e) => refused(format!(
            "node {0} is not exiting: `gantry node exit {0}` first, then wait for the unbonding period",
            e.nodeId
        )),
        E::NodeRegistry_StillUnbonding(e) => refused(format!(
            "node {} is unbonding until {}",
            e.nodeId,
            format_time(e.unbondingEndsAt.to::<u64>())
        )),
        E::NodeRegistry_NothingToWithdraw(e) => {
            refused(format!("node {} has nothing to withdraw", e.nodeId))
        }
        E::NodeRegistry_InvalidCapabilities(_) => refused(
            "invalid capabilities: a GPU model needs GPUs with VRAM (and GPUs need a model), \
             and a node needs a CPU core, a job slot and an engine (docker, wasm or both)"
                .into(),
        ),
        E::NodeRegistry_ZeroAddress(_) => refused("the agent address must not be zero".into()),
        E::NodeRegistry_ConsentExpired(e) => refused(format!(
            "the agent's consent expired at {}",
            format_time(u64::try_from(e.deadline).unwrap_or(u64::MAX))
        )),
        E::NodeRegistry_BadConsent(e) => refused(format!(
            "{} did not consent to serve this operator: sign the consent with the agent's key",
            e.agent
        )),
        E::NodeRegistry_NotActive(e) => refused(format!(
            "node {} is {}, not active",
            e.nodeId,
            node_status_name(e.status)
        )),
        E::NodeRegistry_TextTooLong(e) => refused(format!(
            "a text of {} bytes is longer than the market's {}",
            e.length, e.max
        )),
        E::JobMarket_Paused(_) => refused("the market is paused: no new nodes".into()),
        other => refused(format!("refused by the market: {other:?}")),
    }
}

pub fn token_error(error: GantryTestToken::GantryTestTokenErrors, token: &TokenInfo) -> Refusal {
    use GantryTestToken::GantryTestTokenErrors as E;
    match error {
        E::ERC20InsufficientBalance(e) => Refusal::Refused(format!(
            "{} needs {} but your token balance is {}",
            e.sender,
            token.show(e.needed),
            token.show(e.balance)
        )),
        E::ERC20InsufficientAllowance(e) => Refusal::Refused(format!(
            "{} may take {} of your tokens, {} is needed",
            e.spender,
            token.show(e.allowance),
            token.show(e.needed)
        )),
        other => Refusal::Refused(format!("refused by the token: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, aliases::U40};

    use super::*;

    fn gusd() -> TokenInfo {
        TokenInfo {
            decimals: 6,
            symbol: "gUSD".into(),
        }
    }

    #[test]
    fn market_errors_read_as_sentences_with_their_exit_kind() {
        use JobMarket::JobMarketErrors as E;
        let wrong = E::JobMarket_WrongStatus(JobMarket::JobMarket_WrongStatus {
            jobId: 4,
            status: 2,
        });
        let error = market("cancel", wrong, &gusd());
        assert_eq!(
            error.to_string(),
            "job 4 is assigned: only an open job can be cancelled"
        );
        assert!(matches!(error, Refusal::Refused(_)));

        let stale = market(
            "accept",
            E::JobMarket_StaleState(JobMarket::JobMarket_StaleState { jobId: 9 }),
            &gusd(),
        );
        assert!(stale.to_string().contains("job 9 has moved on"));

        let closed = market(
            "dispute",
            E::JobMarket_ChallengeWindowClosed(JobMarket::JobMarket_ChallengeWindowClosed {
                jobId: 2,
                until: U40::from(1_793_707_200u64),
            }),
            &gusd(),
        );
        assert!(
            closed
                .to_string()
                .contains("closed at 2026-11-03T12:00:00Z")
        );
    }

    #[test]
    fn amounts_in_reverts_are_in_tokens() {
        let low = registry(
            NodeRegistry::NodeRegistryErrors::NodeRegistry_StakeTooLow(
                NodeRegistry::NodeRegistry_StakeTooLow {
                    stake: alloy::primitives::aliases::U96::from(50_000_000u64),
                    minStake: alloy::primitives::aliases::U96::from(100_000_000u64),
                },
            ),
            &gusd(),
        );
        assert_eq!(
            low.to_string(),
            "a stake of 50 gUSD is below the market's minimum 100 gUSD"
        );
        let poor = token_error(
            GantryTestToken::GantryTestTokenErrors::ERC20InsufficientBalance(
                GantryTestToken::ERC20InsufficientBalance {
                    sender: Address::ZERO,
                    balance: U256::from(1_500_000u64),
                    needed: U256::from(10_000_000u64),
                },
            ),
            &gusd(),
        );
        assert!(
            poor.to_string()
                .ends_with("needs 10 gUSD but your token balance is 1.5 gUSD")
        );
    }
}
