// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobRequirements, JobTerms, Seat, VerifiedState, VerifyParams, VerifyPolicy} from "../types/Types.sol";

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
    /// @notice The node in seat `seat` committed the seal of its result: keccak256(abi.encode(
    /// chainid, market, jobId, seat, nodeId, digest, salt)), opened by `revealSeat`.
    event SealCommitted(uint64 indexed jobId, uint64 indexed nodeId, uint8 seat, bytes32 seal);
    /// @notice Seat `seat`'s lock ended before the decision: its node gave it back (`fault`
    /// false, `rejectSeat`: the seat is Declined until vacated) or it was reclaimed from a
    /// node marked Inactive (`fault` true, `reclaimSeat`). `unlocked` of the node's stake is
    /// no longer held; `charged` of it was slashed (also in `NodeSlashed`). The node is
    /// barred from the job.
    event SeatFreed(
        uint64 indexed jobId, uint64 indexed nodeId, uint8 seat, bool fault, uint96 unlocked, uint96 charged
    );
    /// @notice Seat `seat` is empty again (`reclaimSeat`): the job's seat word lost node
    /// `nodeId`, its barred count grew by one (and its faults, when `fault`); a draw may
    /// refill it.
    event SeatVacated(uint64 indexed jobId, uint64 indexed nodeId, uint8 seat, bool fault);
    /// @notice The seats committed: the reveal phase runs until `revealBy`.
    event RevealsOpened(uint64 indexed jobId, uint40 revealBy);
    /// @notice The node in seat `seat` opened its seal: its result's digest is `digest`.
    event ResultRevealed(uint64 indexed jobId, uint64 indexed nodeId, uint8 seat, bytes32 digest);
    /// @notice The job was decided and seat `seat`'s lock ended: `unlocked` of the node's
    /// stake is free again (less any slash, in `NodeSlashed`, which follows).
    event SeatReleased(uint64 indexed jobId, uint64 indexed nodeId, uint8 seat, uint96 unlocked);
    /// @notice A replica's pay: `payout` to the node's earnings, `fee` owed to the treasury
    /// (together the bounty).
    event ReplicaPaid(uint64 indexed jobId, uint64 indexed nodeId, uint96 payout, uint96 fee);
    /// @notice A replicated Docker job's seat revealed and is not paid (another digest than
    /// the quorum's, or one no other seat matched without a quorum): not slashed either (a
    /// job deterministic by its submitter's word only can part honest nodes); its share
    /// `forfeited` of the escrow went to the treasury, not back to the submitter.
    event ReplicaForfeited(uint64 indexed jobId, uint64 indexed nodeId, uint96 forfeited);
    /// @notice The replicated job is Completed: `agreed` seats revealed `digest` (at least
    /// the quorum); `refund` (the unpaid seats' bounties) was credited to the submitter.
    event JobVerified(uint64 indexed jobId, bytes32 digest, uint8 agreed, uint96 refund);
    /// @notice A refereed job's provider holds `amount` of its stake while it has the job:
    /// the seat stake (what its fault costs) and r bounties (what repays the referees of
    /// a dispute it loses).
    event HoldLocked(uint64 indexed jobId, uint64 indexed nodeId, uint96 amount);
    /// @notice A disputed refereed job's provider opened the seal it submitted as its
    /// result: the result's digest is `digest` (after the referees' commit phase).
    event ProviderRevealed(uint64 indexed jobId, uint64 indexed nodeId, bytes32 digest);
    /// @notice The provider's hold ended (less any slash, in `NodeSlashed`, which follows).
    event HoldReleased(uint64 indexed jobId, uint64 indexed nodeId, uint96 amount);
    /// @notice The submitter of refereed job `jobId` disputed provider `nodeId`'s result:
    /// it escrowed `bond` (the market's dispute bond) and `prepay` (r bounties, the referees'
    /// pay), `fromCredits` of it from its credits; referees are drawn and commit by
    /// `commitEnd`.
    event RefereesRequested(
        uint64 indexed jobId, uint64 indexed nodeId, uint96 bond, uint96 prepay, uint96 fromCredits, uint40 commitEnd
    );
    /// @notice The referees decided: `outcome` 0 upheld (a majority revealed the provider's
    /// result), 1 overturned (a majority revealed another, `digest`), 2 no majority (the job
    /// goes to the arbiter until `until`), 3 overturned because the provider never opened its
    /// seal (`digest`: the referees' most common one, if any). `paid` referees were paid from the prepay;
    /// `toSubmitter` of the escrow was credited to the submitter (the prepay not paid out,
    /// and, overturned, the bond), `toProvider` to the provider's earnings (upheld, the
    /// bond); the bounty moves in `JobCompleted` or `JobFailed`.
    event RefereesDecided(
        uint64 indexed jobId,
        uint64 indexed nodeId,
        uint8 outcome,
        bytes32 digest,
        uint8 paid,
        uint96 toSubmitter,
        uint96 toProvider,
        uint40 until
    );
    /// @notice `amount` of provider `nodeId`'s stake (out of its hold) was credited to the
    /// submitter: the referees' pay, repaid by a provider whose result was overturned.
    event HoldForfeited(uint64 indexed jobId, uint64 indexed nodeId, uint96 amount);
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
    /// @notice The seat passed is not the seat's stored word (or the seat is empty).
    error Verification_SeatMismatch(uint64 jobId, uint256 seat);
    /// @notice The seat is not in the phase the call needs (1 Seated, 2 Committed, 3
    /// Revealed, 4 Declined).
    error Verification_WrongPhase(uint64 jobId, uint256 seat, uint8 phase);
    error Verification_NotSeatAgent(uint64 jobId, uint256 seat, address caller);
    /// @notice The seat's run ended at `until` without a commit: it is counted absent.
    error Verification_SeatTimedOut(uint64 jobId, uint256 seat, uint40 until);
    /// @notice The seat's node was marked Inactive after it was seated: `reclaimSeat`.
    error Verification_MustBeReclaimed(uint64 jobId, uint256 seat);
    /// @notice The seat is neither Declined nor Seated with its node marked Inactive since.
    error Verification_NotReclaimable(uint64 jobId, uint256 seat);
    /// @notice The commit phase ended at `commitEnd`, or the job left it.
    error Verification_CommitPhaseOver(uint64 jobId, uint40 commitEnd);
    error Verification_EmptySeal();
    error Verification_EmptyDigest();
    /// @notice A filled seat has not committed.
    error Verification_NotCommitted(uint64 jobId, uint256 seat);
    /// @notice An empty seat can still be drawn and run before the commit phase ends.
    error Verification_SeatsCanStillFill(uint64 jobId);
    error Verification_NoSeatFilled(uint64 jobId);
    error Verification_NothingCommitted(uint64 jobId);
    /// @notice The node's free stake does not cover a refereed job's hold and what it must
    /// keep free beside it (`needed`).
    error Verification_InsufficientCollateral(uint64 nodeId, uint256 needed, uint96 free);
    /// @notice A verified job runs at least ten `REJECT_GRACE`s.
    error Verification_RuntimeTooShort(uint32 maxRuntime, uint32 min);
    /// @notice The reveal phase has not begun.
    error Verification_RevealNotOpen(uint64 jobId);
    /// @notice The reveal phase ended at `revealBy`.
    error Verification_RevealClosed(uint64 jobId, uint40 revealBy);
    /// @notice digest and salt do not open the seat's seal.
    error Verification_SealMismatch(uint64 jobId, uint256 seat);
    /// @notice The reveal phase runs until `revealBy` and a filled seat has not revealed.
    error Verification_NotDecidable(uint64 jobId, uint40 revealBy);
}

/// @title Gantry verified jobs
/// @notice Jobs whose result is verified by the market instead of an arbiter
/// (contracts/docs/verification-design.md): **replicated** (n nodes of n operators, drawn
/// from the verification pool, run the job, commit a seal of their result, reveal it; k
/// equal reveals decide) and **refereed** (one provider runs it; a dispute draws referees
/// who re-execute it). Deterministic WASM jobs only. Served at the market's address, like
/// `INodeRegistry`, by the `Verification` extension; the refereed tier's own calls are
/// `IReferees`', served by the `Referees` extension.
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
    /// refereed): from the caller's credits first, the rest pulled. WASM only, a max runtime
    /// of at least ten `REJECT_GRACE`s (300 s); the policy within the rules (replicated: 3 <= n <= 5, 2k > n, k <= n - 1; refereed: r = 3 or 5;
    /// reveal window at least `minRevealWindow`); bounty at least `minVerifiedBounty`; the
    /// seat stake, max(seatFloor, seatBps × bounty), at most the pool's floor. Replicated:
    /// the pool holds at least `minPool` nodes, and now + DRAW_SLACK + maxRuntime + W <=
    /// deadline <= now + 2 × MAX_RUNTIME + W; its first draw is armed. Refereed: deadline >=
    /// now + maxRuntime, the provider's hold (seat stake + r × bounty) within 96 bits; the
    /// job is Open for a provider.
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

    // ---------------------------------------------------------------- seats

    /// @notice The agent of seat `seat`'s node commits the seal of its result (see
    /// `SealCommitted`): the seat is Seated, its run time (`until`) not over, and its node
    /// not marked Inactive since it was seated. Reads only the seat's word, so the seats of
    /// a job commit in one block without racing each other.
    function commitSeat(uint64 jobId, uint8 seat, Seat calldata s, bytes32 seal) external;

    /// @notice The agent of seat `seat`'s node gives the seat back (when `commitSeat` may
    /// be sent): free within the grace (30 s, at most a tenth of the runtime), later the
    /// share of the seat stake that the time past it is of the rest of the run; the rest of
    /// the lock is released and the node barred from the job. Like `commitSeat` it writes
    /// only the seat's word (Declined), so the seats of a job decline in one block without
    /// racing each other and none pays for another's timing; `reclaimSeat` vacates it.
    function rejectSeat(uint64 jobId, uint8 seat, Seat calldata s) external;

    /// @notice Anyone vacates a seat in the commit phase: a Declined one (nothing more to
    /// charge), or a Seated one whose node was marked Inactive since it was seated (its
    /// whole seat stake slashed, the node barred). The seat is empty in the job's word and
    /// a draw is armed for it while a run could still end before the commit phase does.
    function reclaimSeat(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        uint8 seat,
        Seat calldata s
    ) external;

    /// @notice Anyone starts the reveal phase before the commit phase ends, once a seat
    /// committed, every other filled seat committed or ran out of time without it (absent),
    /// and the empty or Declined ones cannot be filled (no run could end before the commit
    /// phase does, or no rounds left): the job is Revealing until now + its reveal window.
    /// `seats`: every seat's word, n entries in order (an empty seat: all zeros).
    /// @notice Anyone starts the reveal phase before the commit phase ends, once every
    /// filled seat (at least one) has committed and the empty ones cannot be filled (all n
    /// filled, or no run could end before the commit phase does, or no rounds left): the
    /// job is Revealing until now + its reveal window. `seats`: every seat's word, n entries
    /// in order (an empty seat: all zeros).
    function openReveals(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, Seat[] calldata seats)
        external;

    /// @notice The agent of seat `seat`'s node (now: it may have changed since the commit)
    /// opens its seal with the result's `digest` (not zero) and `salt`, in the reveal phase:
    /// Revealing, or Committing past the commit phase's end (then until it plus the reveal
    /// window).
    function revealSeat(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        uint8 seat,
        Seat calldata s,
        bytes32 digest,
        bytes32 salt
    ) external;

    /// @notice Anyone decides a replicated job once the reveal phase is over, or in it once
    /// no committed seat is left to reveal. If k seats revealed one digest: Completed
    /// (`JobVerified`), those seats paid, every other seat slashed its seat stake.
    /// Otherwise Failed (`NoQuorum`): each revealer whose digest another revealer matched
    /// is paid; a seat that committed and did not reveal is slashed, and one that never
    /// committed only if two seats agreed (the job was shown to run); a lone digest is
    /// neither. Declined seats are neither. Every lock is released, every seat word and the
    /// job's word deleted, the unpaid bounties credited to the submitter. `seats` as
    /// `openReveals`. A job no seat was ever drawn for ends by `expireVerified`.
    function decide(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, Seat[] calldata seats) external;

    // ---------------------------------------------------------------- views

    /// @notice The verification rules of policy version `policyVersion` (zeros: none).
    function verifyParams(uint32 policyVersion) external view returns (VerifyParams memory);
    /// @notice The free stake a node needs to be in the verification pool (0: no pool).
    function poolFloor() external view returns (uint96);
}

/// @title Gantry verified jobs, the refereed tier
/// @notice A refereed job's own calls (design 18, §2.6), served at the market's address by
/// the `Referees` extension (the drawn referees use `IVerification`'s seat calls).
interface IReferees is IVerificationEvents {
    /// @notice The matcher gives an Open refereed job to an eligible Active node not barred
    /// from it, when a run fits before the deadline (as `IJobMarket.assign`), and locks the
    /// node's hold: the seat stake and r bounties (`HoldLocked`). Refused unless the node's
    /// free stake covers the hold and, beside it, the minimum stake (and, for a member of the
    /// verification pool, the pool's floor: no role takes a member out of a draw). MATCHER_ROLE.
    function assignRefereed(uint64 jobId, uint64 nodeId, JobTerms calldata terms, VerifiedState calldata state) external;

    /// @notice `assignRefereed` by the node's own agent (claim mode); a pool member may
    /// claim a hold that takes it out of the pool.
    function claimRefereed(uint64 jobId, uint64 nodeId, JobTerms calldata terms, VerifiedState calldata state) external;

    /// @notice The provider's agent submits its result, sealed (not zero), before its runtime
    /// ends; the challenge window runs from now (as `IJobMarket.submitResult`). The seal is
    /// keccak256(abi.encode(chainid, market, jobId, PROVIDER_SEAT (255), nodeId, digest,
    /// salt)), as a seat's: the digest stays unknown to the referees a dispute draws until
    /// they committed (`revealRefereed`). The outputs and the salt go to the submitter
    /// only, off-chain; `resultURI` says where.
    function submitRefereedResult(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        bytes32 seal,
        string calldata resultURI
    ) external;

    /// @notice Anyone opens a disputed job's provider seal in the referees' reveal phase
    /// (never earlier): `digest` and `salt` must open `state.result`. The provider's worker
    /// sends it; the submitter, which received the salt with the outputs, may too. A
    /// provider whose seal is not opened by the end of the reveal phase loses the dispute.
    function revealRefereed(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        bytes32 digest,
        bytes32 salt
    ) external;

    /// @notice The provider's agent gives the job back (as `IJobMarket.reject`): free within
    /// the grace, later the prorated share of the seat stake; the hold is released, the node
    /// barred, the job requeued or failed.
    function rejectRefereed(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, string calldata reason)
        external;

    /// @notice Anyone takes the job back from a provider marked Inactive during the attempt
    /// or past its runtime (as `IJobMarket.reclaim`): the seat stake is slashed, the rest of
    /// the hold released, the node barred, the job requeued or failed.
    function reclaimRefereed(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;

    /// @notice The submitter accepts the result: the provider is paid, its hold released.
    function acceptVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;

    /// @notice Anyone pays the provider once the challenge window ended without a dispute;
    /// its hold is released.
    function finalizeVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;

    /// @notice The submitter disputes the provider's result within the challenge window:
    /// it escrows the market's dispute bond and r bounties (the referees' pay), from its
    /// credits first, the rest pulled. The job is Committing until now + the dispute period
    /// (at least 5 minutes, so that a panel can be drawn) + its max runtime, and a draw of r
    /// referees is armed (never the provider, nor a node of its operator, nor one its agent
    /// serves). The referees commit, reveal and are decided by `decideReferees`.
    function requestReferees(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;

    /// @notice Anyone decides a refereed dispute once the referees' reveal phase is over,
    /// or in it once the provider and every committed referee revealed. A provider that did
    /// not reveal loses (**overturned**). A majority of r ((r + 1) / 2 reveals of one digest)
    /// **upholds** the provider's revealed result (the provider is paid the bounty and the
    /// bond, its hold released; the submitter gets back the prepay not paid to referees) or
    /// **overturns** it (the provider's seat stake is slashed and it repays the paid
    /// referees out of its hold; the submitter gets back all it put in). Without a majority,
    /// or with no referee, the job goes to the arbiter (Arbitrating, the provider's hold
    /// kept). Referees are paid and slashed as `decide`'s seats are, by that majority.
    /// `seats`: every referee seat's word, r entries in order.
    function decideReferees(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, Seat[] calldata seats)
        external;

    /// @notice The arbiter decides an Arbitrating job before its deadline: for the provider
    /// as upheld, against it as overturned (repaying the referees paid). ARBITER_ROLE.
    function resolveVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, bool providerWins)
        external;

    /// @notice Anyone settles an Arbitrating job the arbiter did not decide in time: the
    /// result stands (the provider is paid, its hold released), the bond goes back.
    function settleVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external;
}
