// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobRequirements, JobTerms, VerifiedState, VerifyParams, VerifyPolicy} from "../types/Types.sol";

/// @title What verified jobs emit and revert with: declared apart so that `JobMarket`, at
/// whose address they happen, carries them in its ABI (its consumers decode them as market
/// events).
interface IVerificationEvents {
    // ---------------------------------------------------------------- events

    /// @notice A verified job was posted: each seat's stake is `seatStake`; a replicated
    /// job's commit phase ends at `commitEnd` (0 for a refereed job until a dispute).
    event VerifiedJobPosted(uint64 indexed jobId, VerifyPolicy policy, uint96 seatStake, uint40 commitEnd);
    /// @notice The job's next draw round (`round`, from 0) may be drawn from block
    /// `drawBlock` on.
    event DrawArmed(uint64 indexed jobId, uint40 drawBlock, uint8 round);
    /// @notice Round `round` of the job's draw seated node `nodeId` in seat `seat`: it must
    /// run the job and commit its result by `until`; `locked` of its stake is held until
    /// the job is decided (what a fault of this seat costs, at most).
    event SeatDrawn(uint64 indexed jobId, uint64 indexed nodeId, uint8 seat, uint40 until, uint96 locked);
    /// @notice Round `round` was drawn (nobody may draw it again); `seats` is the job's seat
    /// word after it (seat i's node id at bits [48i, 48i + 47]).
    event Drawn(uint64 indexed jobId, uint8 round, uint256 seats);
    /// @notice The admin set the verification rules of policy version `policyVersion`.
    event VerifyParamsSet(uint32 indexed policyVersion, VerifyParams params);

    // ---------------------------------------------------------------- errors

    error Verification_OnlyThroughMarket();
    error Verification_InvalidParams();
    /// @notice The current policy version has no verification rules: verified jobs are not
    /// offered.
    error Verification_NotOffered(uint32 policyVersion);
    error Verification_EngineNotVerifiable(uint8 engine);
    error Verification_InvalidPolicy();
    error Verification_RevealWindowTooShort(uint16 revealWindow, uint32 min);
    error Verification_BountyTooSmall(uint96 bounty, uint96 min);
    error Verification_BountyTooLarge(uint96 bounty);
    error Verification_SeatStakeOverFloor(uint96 seatStake, uint96 poolFloor);
    error Verification_PoolTooSmall(uint256 size, uint16 min);
    error Verification_DeadlineOutOfRange(uint40 deadline, uint256 earliest, uint256 latest);
    error Verification_NotCancellable(uint64 jobId);
    error Verification_NotExpired(uint64 jobId);
    /// @notice No round is armed, or its first block is still to come.
    error Verification_NotArmed(uint64 jobId, uint40 drawBlock);
    /// @notice A seat drawn now could not finish a run before the commit phase ends, or
    /// the job used all its rounds.
    error Verification_CannotDraw(uint64 jobId);
}

/// @title Gantry verified jobs
/// @notice Jobs whose result is verified by the market instead of an arbiter
/// (contracts/docs/verification-design.md): **replicated** (n nodes of n operators, drawn
/// from the verification pool, run the job, commit a seal of their result, reveal it; k
/// equal reveals decide) and **refereed** (one provider runs it; a dispute draws referees
/// who re-execute it). Deterministic WASM jobs only. Served at the market's address, like
/// `INodeRegistry`, by the `Verification` extension.
///
/// A verified job's state is a `VerifiedState` (five words): no `IJobMarket` call can act
/// on it. Its terms carry the policy (`VerifyPolicy`, `limits`' high bits). Posting emits
/// `IJobMarket.JobPosted` (its `fromCredits` counts against the whole escrow: n × bounty for
/// a replicated job, the bounty for a refereed one) and `VerifiedJobPosted`.
interface IVerification is IVerificationEvents {
    // ---------------------------------------------------------------- admin

    /// @notice Sets the verification rules of the current policy version (and the pool's
    /// floor, which applies to every member from its next registry write or `syncPool`).
    /// DEFAULT_ADMIN_ROLE (the timelock), in the same batch as `setParams`: a new policy
    /// version has no rules until this is called.
    function setVerifyParams(VerifyParams calldata params) external;

    // ---------------------------------------------------------------- submitter

    /// @notice Posts a verified job and escrows its pay (n × bounty replicated, the bounty
    /// refereed): from the caller's credits first, the rest pulled. WASM only; the policy
    /// within the rules (replicated: 3 <= n <= 5, 2k > n, k <= n - 1; refereed: r = 3 or 5;
    /// reveal window at least `minRevealWindow`); bounty at least `minVerifiedBounty`; the
    /// seat stake, max(seatFloor, seatBps × bounty), at most the pool's floor. Replicated:
    /// the pool holds at least `minPool` nodes, and now + DRAW_SLACK + maxRuntime + W <=
    /// deadline <= now + 2 × MAX_RUNTIME + W; its first draw is armed. Refereed: deadline >=
    /// now + maxRuntime; the job is Open for a provider.
    function postVerifiedJob(
        JobRequirements calldata requirements,
        VerifyPolicy calldata verification,
        uint96 bounty,
        uint40 deadline,
        bytes calldata spec
    ) external returns (uint64 jobId);

    /// @notice The submitter cancels its Open refereed job; the bounty is credited back. A
    /// replicated job cannot be cancelled: a submitter that could would cancel and re-post
    /// until a draw pleased it. It ends by its decision or `expireVerified`.
    function cancelVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;

    /// @notice Anyone ends a verified job that can no longer run, crediting its escrow back to
    /// the submitter: an Open refereed job no attempt fits before its deadline; a replicated
    /// job with no seat filled when no seat can be drawn any more (too late for a run before
    /// the commit phase ends, or out of rounds).
    function expireVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;

    // ---------------------------------------------------------------- anyone

    /// @notice Draws the job's armed round, from its first block on: seats drawn nodes of
    /// the verification pool as it stood when this block began, uniformly by the block's
    /// `prevrandao`, in the empty seats, skipping a node whose free stake does not cover
    /// the seat stake, one already seated, one of a seated node's operator, one the
    /// submitter operates or serves, and one barred from the job; at most `MAX_SAMPLES`
    /// samples; nobody when the pool is under the policy's `minPool`. Each seat locks the
    /// seat stake. A round is drawn once; seats left empty arm the next round (from
    /// `DRAW_DELAY` blocks on) while a run could still end before the commit phase does and
    /// rounds are left. Anyone (the keeper sends it for the first eligible block).
    function draw(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;

    // ---------------------------------------------------------------- views

    /// @notice The verification rules of policy version `policyVersion` (zeros: none).
    function verifyParams(uint32 policyVersion) external view returns (VerifyParams memory);
    /// @notice The free stake a node needs to be in the verification pool (0: no pool).
    function poolFloor() external view returns (uint96);
}
