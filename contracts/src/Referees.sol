// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

import {VerificationBase} from "./VerificationBase.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IReferees} from "./interfaces/IVerification.sol";
import {JobCodec} from "./types/JobCodec.sol";
import {
    CompletionKind,
    FailureKind,
    JobPolicy,
    JobStatus,
    JobTerms,
    NodeStatus,
    ReclaimKind,
    Seat,
    VERIFY_REFEREED,
    VerifiedState
} from "./types/Types.sol";

/// @title Referees
/// @notice The refereed tier of verified jobs (`IReferees`, design 18, §2.6): runs only
/// inside the JobMarket, which forwards its calls with `delegatecall`.
contract Referees is IReferees, VerificationBase {
    using SafeERC20 for IERC20;
    using JobCodec for JobTerms;
    using JobCodec for VerifiedState;
    using JobCodec for Seat;

    /// @dev `RefereesDecided`'s outcomes.
    uint8 internal constant UPHELD = 0;
    uint8 internal constant OVERTURNED = 1;
    uint8 internal constant NO_MAJORITY = 2;
    /// @dev Overturned because the provider never opened its seal.
    uint8 internal constant NOT_SHOWN = 3;

    /// @dev The seat number in the provider's seal, and the `_seats` slot of its revealed
    /// digest during a dispute.
    uint8 internal constant PROVIDER_SEAT = type(uint8).max;
    /// @dev A dispute's least time to draw its panel (its first round waits `DRAW_DELAY`
    /// blocks) beside the referees' runtime, whatever the market's dispute period.
    uint40 internal constant MIN_DRAW_TIME = 5 minutes;

    constructor(IERC20 token_) VerificationBase(token_) {}

    // ================================================================ the provider

    /// @inheritdoc IReferees
    function assignRefereed(uint64 jobId, uint64 nodeId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
        onlyRole(MATCHER_ROLE)
    {
        _place(jobId, nodeId, terms, state, false);
    }

    /// @inheritdoc IReferees
    function claimRefereed(uint64 jobId, uint64 nodeId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _place(jobId, nodeId, terms, state, true);
    }

    /// @inheritdoc IReferees
    function submitRefereedResult(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        bytes32 seal,
        string calldata resultURI
    ) external onlyDelegated {
        _checkRefereed(jobId, terms, state, JobStatus.Assigned);
        _checkText(bytes(resultURI).length);
        if (block.timestamp > state.until()) revert IJobMarket.JobMarket_RuntimeOver(jobId, state.until());
        uint64 nodeId = state.nodeId();
        if (msg.sender != _nodes[nodeId].agent) revert IJobMarket.JobMarket_NotAssignedAgent(jobId, msg.sender);
        if (seal == 0) revert Verification_EmptySeal();
        uint40 endsAt = uint40(block.timestamp) + state.challengeWindow();
        uint256 fields =
            JobCodec.next(state.fields, JobStatus.Submitted, state.faults(), state.barred(), nodeId, endsAt);
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(state.terms, fields, state.seats, state.draw, seal)));
        emit IJobMarket.ResultSubmitted(jobId, seal, resultURI, endsAt);
    }

    /// @inheritdoc IReferees
    function rejectRefereed(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, string calldata reason)
        external
        onlyDelegated
    {
        _checkRefereed(jobId, terms, state, JobStatus.Assigned);
        _checkText(bytes(reason).length);
        uint64 nodeId = state.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        if (msg.sender != node.agent) revert IJobMarket.JobMarket_NotAssignedAgent(jobId, msg.sender);
        uint256 run = terms.maxRuntime();
        uint256 assignedAt = state.until() - run;
        // A node at fault (gone Inactive during the attempt, or past its runtime) cannot
        // walk away with a reject: that job is reclaimed, with the slash.
        if (block.timestamp > state.until() || node.inactiveSince >= assignedAt) {
            revert IJobMarket.JobMarket_MustBeReclaimed(jobId);
        }
        // The grace, then the share of the seat stake that the time held past it is of the
        // rest of the runtime (`JobMarket._rejectCharge`'s rule on the seat stake).
        uint256 grace = run / 10 < REJECT_GRACE ? run / 10 : REJECT_GRACE;
        uint256 held = block.timestamp - assignedAt;
        uint96 charge = held <= grace ? 0 : uint96((uint256(state.seatStake()) * (held - grace)) / (run - grace));
        emit IJobMarket.JobRejected(jobId, nodeId, reason);
        _release(jobId, terms, state, nodeId, node, charge);
        _requeueOrFail(jobId, terms, state, false);
    }

    /// @inheritdoc IReferees
    function reclaimRefereed(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _checkRefereed(jobId, terms, state, JobStatus.Assigned);
        uint64 nodeId = state.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        ReclaimKind kind;
        if (node.inactiveSince >= state.until() - terms.maxRuntime()) {
            kind = ReclaimKind.NodeInactive;
        } else if (block.timestamp > state.until()) {
            kind = ReclaimKind.RuntimeExceeded;
        } else {
            revert IJobMarket.JobMarket_NotReclaimable(jobId);
        }
        emit IJobMarket.JobReclaimed(jobId, nodeId, kind, msg.sender);
        _release(jobId, terms, state, nodeId, node, state.seatStake());
        _requeueOrFail(jobId, terms, state, true);
    }

    /// @inheritdoc IReferees
    function acceptVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _checkRefereed(jobId, terms, state, JobStatus.Submitted);
        if (msg.sender != terms.submitter()) revert IJobMarket.JobMarket_NotSubmitter(jobId, msg.sender);
        _pay(jobId, terms, state, CompletionKind.Accepted);
    }

    /// @inheritdoc IReferees
    function finalizeVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _checkRefereed(jobId, terms, state, JobStatus.Submitted);
        if (block.timestamp < state.until()) revert IJobMarket.JobMarket_ChallengeWindowOpen(jobId, state.until());
        _pay(jobId, terms, state, CompletionKind.Finalized);
    }

    // ================================================================ disputes

    /// @inheritdoc IReferees
    function requestReferees(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        nonReentrant
        onlyDelegated
    {
        _checkRefereed(jobId, terms, state, JobStatus.Submitted);
        if (msg.sender != terms.submitter()) revert IJobMarket.JobMarket_NotSubmitter(jobId, msg.sender);
        if (block.timestamp >= state.until()) revert IJobMarket.JobMarket_ChallengeWindowClosed(jobId, state.until());
        JobPolicy memory policy_ = _policies[terms.policy()];
        uint96 bond = _bond(policy_, terms.bounty());
        // Within the hold (checked at posting to fit 96 bits).
        uint96 prepay = uint96(uint256(terms.bounty()) * terms.size());
        uint40 drawTime = policy_.disputePeriod < MIN_DRAW_TIME ? MIN_DRAW_TIME : policy_.disputePeriod;
        uint40 commitEnd = uint40(block.timestamp) + drawTime + terms.maxRuntime();
        uint40 drawBlock = uint40(block.number) + DRAW_DELAY;
        uint64 provider = state.nodeId();
        uint256 fields =
            JobCodec.next(state.fields, JobStatus.Committing, state.faults(), state.barred(), provider, commitEnd);
        uint256 drawWord = JobCodec.draw(drawBlock, 0, commitEnd, state.seatStake());
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(state.terms, fields, 0, drawWord, state.result)));
        // Credits first, as posting.
        uint256 escrow = uint256(bond) + prepay;
        uint256 credit = _credits[msg.sender];
        uint256 fromCredits = credit >= escrow ? escrow : credit;
        if (fromCredits != 0) _credits[msg.sender] = credit - fromCredits;
        emit RefereesRequested(jobId, provider, bond, prepay, uint96(fromCredits), commitEnd);
        emit DrawArmed(jobId, drawBlock, 0);
        if (fromCredits < escrow) token.safeTransferFrom(msg.sender, address(this), escrow - fromCredits);
    }

    /// @inheritdoc IReferees
    function revealRefereed(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        bytes32 digest,
        bytes32 salt
    ) external onlyDelegated {
        _checkState(jobId, terms, state);
        if (terms.tier() != VERIFY_REFEREED) revert Verification_InvalidPolicy();
        uint40 revealBy = _revealBy(jobId, terms, state);
        if (block.timestamp > revealBy) revert Verification_RevealClosed(jobId, revealBy);
        if (_seats[jobId][PROVIDER_SEAT] != 0) revert Verification_WrongPhase(jobId, PROVIDER_SEAT, REVEALED);
        uint64 provider = state.nodeId();
        if (digest == 0) revert Verification_EmptyDigest();
        if (
            keccak256(abi.encode(block.chainid, address(this), jobId, PROVIDER_SEAT, provider, digest, salt))
                != state.result
        ) {
            revert Verification_SealMismatch(jobId, PROVIDER_SEAT);
        }
        // Its own word: the referees' reveals and `openReveals` never race it.
        _seats[jobId][PROVIDER_SEAT] = digest;
        emit ProviderRevealed(jobId, provider, digest);
    }

    /// @dev A dispute's amounts, as its decision moves them.
    struct Dispute {
        uint64 provider;
        address submitter;
        uint96 bounty;
        uint96 fee;
        uint96 bond;
        /// Referees paid from the prepay.
        uint256 paid;
    }

    /// @inheritdoc IReferees
    function decideReferees(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, Seat[] calldata seats)
        external
        onlyDelegated
    {
        _checkState(jobId, terms, state);
        if (terms.tier() != VERIFY_REFEREED) revert Verification_InvalidPolicy();
        uint40 revealBy = _revealBy(jobId, terms, state);
        uint256 r = terms.size();
        _checkSeats(jobId, seats, r);
        // A majority counted against r: empty seats do not agree.
        Tally memory t = _tally(seats, r, uint8((r + 1) / 2));
        bytes32 shown = _seats[jobId][PROVIDER_SEAT];
        if (block.timestamp <= revealBy && (t.unrevealed != 0 || shown == 0)) {
            revert Verification_NotDecidable(jobId, revealBy);
        }
        if (shown != 0) delete _seats[jobId][PROVIDER_SEAT];

        Dispute memory d = _dispute(terms, state);
        // As `decide`'s seats, by the majority: referees are always paid from the prepay.
        _settleSeats(jobId, seats, r, t, d.bounty, d.fee);
        d.paid = t.paid;
        uint96 unpaid = uint96(uint256(d.bounty) * (r - d.paid));
        // A provider that never showed its result loses, whatever the referees found.
        if (shown != 0 && !t.quorum) {
            _toArbiter(jobId, terms, state, d, unpaid, t.digest);
        } else if (shown != 0 && t.digest == shown) {
            emit RefereesDecided(jobId, d.provider, UPHELD, t.digest, uint8(d.paid), unpaid, d.bond, 0);
            _forProvider(jobId, terms, state, d, unpaid, CompletionKind.RefereesUpheld);
        } else {
            uint8 outcome = shown == 0 ? NOT_SHOWN : OVERTURNED;
            emit RefereesDecided(jobId, d.provider, outcome, t.digest, uint8(d.paid), unpaid + d.bond, 0, 0);
            _againstProvider(jobId, terms, state, d, unpaid + d.bond, FailureKind.RefereesOverturned);
        }
    }

    /// @inheritdoc IReferees
    function resolveVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, bool providerWins)
        external
        onlyDelegated
        onlyRole(ARBITER_ROLE)
    {
        _checkRefereed(jobId, terms, state, JobStatus.Arbitrating);
        if (block.timestamp >= state.until()) revert IJobMarket.JobMarket_DisputeLapsed(jobId, state.until());
        Dispute memory d = _dispute(terms, state);
        d.paid = state.paidReferees();
        if (providerWins) {
            emit IJobMarket.DisputeResolved(jobId, d.provider, true, false, 0, d.bond, msg.sender);
            _forProvider(jobId, terms, state, d, 0, CompletionKind.DisputeWon);
        } else {
            emit IJobMarket.DisputeResolved(jobId, d.provider, false, false, d.bond, 0, msg.sender);
            _againstProvider(jobId, terms, state, d, d.bond, FailureKind.DisputeLost);
        }
    }

    /// @inheritdoc IReferees
    function settleVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _checkRefereed(jobId, terms, state, JobStatus.Arbitrating);
        if (block.timestamp < state.until()) revert IJobMarket.JobMarket_DisputeOpen(jobId, state.until());
        Dispute memory d = _dispute(terms, state);
        emit IJobMarket.DisputeResolved(jobId, d.provider, true, true, d.bond, 0, msg.sender);
        // The result stands; the bond goes back.
        d.bond = 0;
        _forProvider(jobId, terms, state, d, _bond(_policies[terms.policy()], d.bounty), CompletionKind.DisputeLapsed);
    }

    /// @dev No majority, or no panel: the arbiter decides (Arbitrating for the dispute
    /// period, the hold kept, the referees paid counted in the draw word); the prepay not
    /// paid goes back.
    function _toArbiter(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        Dispute memory d,
        uint96 unpaid,
        bytes32 digest
    ) internal {
        uint40 until = uint40(block.timestamp) + _policies[terms.policy()].disputePeriod;
        uint256 fields =
            JobCodec.next(state.fields, JobStatus.Arbitrating, state.faults(), state.barred(), d.provider, until);
        uint256 drawWord = JobCodec.draw(0, state.rounds(), state.commitEnd(), state.seatStake()) | (d.paid << 184);
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(state.terms, fields, 0, drawWord, state.result)));
        _credits[d.submitter] += unpaid;
        emit RefereesDecided(jobId, d.provider, NO_MAJORITY, digest, uint8(d.paid), unpaid, 0, until);
    }

    /// @dev The dispute's parties and amounts.
    function _dispute(JobTerms calldata terms, VerifiedState calldata state) internal view returns (Dispute memory d) {
        d.provider = state.nodeId();
        d.submitter = terms.submitter();
        d.bounty = state.bounty();
        d.fee = uint96((uint256(d.bounty) * state.feeBps()) / BPS);
        d.bond = _bond(_policies[terms.policy()], d.bounty);
    }

    /// @dev The result stands: the provider is paid the bounty and `d.bond`, its hold
    /// released; `toSubmitter` of the escrow goes back to the submitter.
    function _forProvider(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        Dispute memory d,
        uint96 toSubmitter,
        CompletionKind kind
    ) internal {
        delete _jobs[jobId];
        _credits[d.submitter] += toSubmitter;
        NodeRecord storage node = _nodes[d.provider];
        node.earnings += d.bounty - d.fee + d.bond;
        node.feesOwed += d.fee;
        emit IJobMarket.JobCompleted(jobId, d.provider, d.bounty - d.fee, d.fee, kind);
        _release(jobId, terms, state, d.provider, node, 0);
    }

    /// @dev The result falls: the provider's seat stake is slashed and, out of its hold, it
    /// repays the referees paid; the submitter gets back the bounty, `toSubmitter` of the
    /// escrow and that repayment: all it put in.
    function _againstProvider(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        Dispute memory d,
        uint96 toSubmitter,
        FailureKind kind
    ) internal {
        delete _jobs[jobId];
        uint96 repaid = uint96(uint256(d.bounty) * d.paid);
        _credits[d.submitter] += uint256(toSubmitter) + d.bounty + repaid;
        NodeRecord storage node = _nodes[d.provider];
        uint96 hold = uint96(_hold(terms, state));
        node.locked -= hold;
        emit HoldReleased(jobId, d.provider, hold);
        if (repaid != 0) {
            node.stake -= repaid;
            emit HoldForfeited(jobId, d.provider, repaid);
        }
        _slash(node, d.provider, jobId, state.seatStake());
        _poolSync(d.provider, node);
        emit IJobMarket.JobFailed(jobId, kind, d.bounty);
    }

    // ================================================================ internal

    /// @dev Gives an Open refereed job to `nodeId` (eligible, Active, not barred, the run
    /// fits before the deadline) and locks its hold: the seat stake, which a fault of the
    /// provider costs, and r bounties, which repay the referees of a dispute it loses.
    function _place(uint64 jobId, uint64 nodeId, JobTerms calldata terms, VerifiedState calldata state, bool claimed)
        internal
    {
        _checkRefereed(jobId, terms, state, JobStatus.Open);
        uint40 until = uint40(block.timestamp) + terms.maxRuntime();
        if (until > terms.deadline()) revert IJobMarket.JobMarket_DoesNotFit(jobId, until, terms.deadline());
        if (state.barred() != 0 && _barred[jobId][nodeId]) revert IJobMarket.JobMarket_Barred(jobId, nodeId);
        NodeRecord storage node = _nodes[nodeId];
        NodeHot memory hot = node.hot;
        if (hot.status != NodeStatus.Active) revert IJobMarket.JobMarket_NodeNotActive(nodeId, hot.status);
        if (claimed && msg.sender != node.agent) revert IJobMarket.JobMarket_NotNodeAgent(nodeId, msg.sender);
        _checkEligible(terms, hot);
        // Reserved, not just checked. The node keeps the minimum stake free, so its tier-none
        // faults still cost it (no node locks its stake away on jobs it posted itself), and
        // a pool member placed by the matcher keeps the pool's floor free: no role can take
        // a member out of a draw by placing a job on it.
        uint256 hold = _hold(terms, state);
        uint256 keep = _nodeParams.minStake;
        if (!claimed && node.poolIndex != 0 && _poolFloor > keep) keep = _poolFloor;
        uint96 free = node.stake - node.locked;
        if (free < hold + keep) revert Verification_InsufficientCollateral(nodeId, hold + keep, free);
        node.locked += uint96(hold);
        uint256 fields = JobCodec.next(state.fields, JobStatus.Assigned, state.faults(), state.barred(), nodeId, until);
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(state.terms, fields, state.seats, state.draw, state.result)));
        emit IJobMarket.JobAssigned(jobId, nodeId, claimed, until);
        emit HoldLocked(jobId, nodeId, uint96(hold));
        _poolSync(nodeId, node);
    }

    /// @dev The provider's hold: the seat stake and r bounties.
    function _hold(JobTerms calldata terms, VerifiedState calldata state) internal pure returns (uint256) {
        return uint256(state.seatStake()) + uint256(terms.bounty()) * terms.size();
    }

    /// @dev Ends the provider's hold, slashing `charge` of it.
    function _release(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        uint64 nodeId,
        NodeRecord storage node,
        uint96 charge
    ) internal {
        uint96 hold = uint96(_hold(terms, state));
        node.locked -= hold;
        emit HoldReleased(jobId, nodeId, hold);
        _slash(node, nodeId, jobId, charge);
        _poolSync(nodeId, node);
    }

    /// @dev Pays a Submitted refereed job's bounty to its provider (the fee owed to the
    /// treasury) and ends its hold; the job is settled.
    function _pay(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, CompletionKind kind) internal {
        uint96 bounty = state.bounty();
        uint96 fee = uint96((uint256(bounty) * state.feeBps()) / BPS);
        uint64 nodeId = state.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        delete _jobs[jobId];
        node.earnings += bounty - fee;
        node.feesOwed += fee;
        emit IJobMarket.JobCompleted(jobId, nodeId, bounty - fee, fee, kind);
        _release(jobId, terms, state, nodeId, node, 0);
    }

    /// @dev After a reject or a reclaim: the node is barred from the job; the job is Open
    /// again, or Failed and refunded when out of attempts or when no attempt can fit
    /// (`JobMarket._requeueOrFail`'s rule).
    function _requeueOrFail(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, bool fault) internal {
        _barred[jobId][state.nodeId()] = true;
        uint8 barred = state.barred() == type(uint8).max ? state.barred() : state.barred() + 1;
        uint8 faults = fault ? state.faults() + 1 : state.faults();
        FailureKind kind;
        if (faults >= _policies[terms.policy()].maxAttempts || barred == type(uint8).max) {
            kind = FailureKind.OutOfAttempts;
        } else if (block.timestamp + terms.maxRuntime() > terms.deadline()) {
            kind = FailureKind.PastDeadline;
        } else {
            uint256 fields = JobCodec.next(state.fields, JobStatus.Open, faults, barred, 0, 0);
            _jobs[jobId] =
                keccak256(abi.encode(VerifiedState(state.terms, fields, state.seats, state.draw, state.result)));
            emit IJobMarket.JobRequeued(jobId, faults, barred);
            return;
        }
        delete _jobs[jobId];
        _credits[terms.submitter()] += state.bounty();
        emit IJobMarket.JobFailed(jobId, kind, state.bounty());
    }

    /// @dev The job is the caller's state, refereed, and in `status`.
    function _checkRefereed(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, JobStatus status)
        internal
        view
    {
        _checkState(jobId, terms, state);
        if (terms.tier() != VERIFY_REFEREED) revert Verification_InvalidPolicy();
        if (state.status() != status) revert IJobMarket.JobMarket_WrongStatus(jobId, state.status());
    }
}
