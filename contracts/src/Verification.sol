// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

import {VerificationBase} from "./VerificationBase.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IVerification} from "./interfaces/IVerification.sol";
import {JobCodec} from "./types/JobCodec.sol";
import {
    DETERMINISTIC_DOCKER,
    ENGINE_DOCKER,
    ENGINE_WASM,
    FailureKind,
    JobPolicy,
    JobRequirements,
    JobStatus,
    JobTerms,
    Seat,
    VERIFY_REFEREED,
    VERIFY_REPLICATED,
    VerifiedState,
    VerifyParams,
    VerifyPolicy
} from "./types/Types.sol";

/// @title Verification
/// @notice Verified jobs (`IVerification`): runs only inside the JobMarket, which forwards
/// their calls to it with `delegatecall`, as it does the node calls to `NodeRegistry`. Its
/// own address holds nothing and refuses calls.
contract Verification is IVerification, VerificationBase {
    using SafeERC20 for IERC20;
    using JobCodec for JobTerms;
    using JobCodec for VerifiedState;
    using JobCodec for Seat;

    /// @dev Time a replicated job's deadline leaves for its first draw, seconds.
    uint32 internal constant DRAW_SLACK = 10 minutes;
    /// @dev Pool samples a round draws at most (each one a node, seated unless skipped).
    uint256 internal constant MAX_SAMPLES = 32;

    constructor(IERC20 token_) VerificationBase(token_) {}

    // ================================================================ admin

    /// @inheritdoc IVerification
    function setVerifyParams(VerifyParams calldata p) external onlyDelegated onlyRole(DEFAULT_ADMIN_ROLE) {
        if (
            p.seatFloor == 0 || p.seatFloor > p.poolFloor || p.seatBps == 0 || p.minVerifiedBounty == 0
                || p.minRevealWindow == 0 || p.minPool < 3
        ) revert Verification_InvalidParams();
        uint32 version = _config.policy;
        _verify[version] = p;
        _poolFloor = p.poolFloor;
        emit VerifyParamsSet(version, p);
    }

    // ================================================================ submitter

    /// @inheritdoc IVerification
    function postVerifiedJob(
        JobRequirements calldata requirements,
        VerifyPolicy calldata policy,
        uint96 bounty,
        uint40 deadline,
        bytes calldata spec
    ) external nonReentrant onlyDelegated returns (uint64 jobId) {
        Config memory c = _config;
        uint96 seatStake = _checkPosting(c, requirements, policy, bounty, spec.length);
        (uint256 fields, uint256 drawWord, uint256 escrow) =
            _opening(c, requirements.maxRuntime, policy, bounty, deadline, seatStake);
        jobId = c.nextJobId;
        _config.nextJobId = c.nextJobId + 1;
        // Credits first, as `postJob`.
        uint256 credit = _credits[msg.sender];
        uint256 fromCredits = credit >= escrow ? escrow : credit;
        if (fromCredits != 0) _credits[msg.sender] = credit - fromCredits;
        _record(jobId, requirements, policy, bounty, deadline, spec, fields, drawWord, uint96(fromCredits));

        if (fromCredits < escrow) token.safeTransferFrom(msg.sender, address(this), escrow - fromCredits);
    }

    /// @inheritdoc IVerification
    function cancelVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _checkState(jobId, terms, state);
        if (msg.sender != terms.submitter()) revert IJobMarket.JobMarket_NotSubmitter(jobId, msg.sender);
        if (terms.tier() != VERIFY_REFEREED || state.status() != JobStatus.Open) {
            revert Verification_NotCancellable(jobId);
        }
        uint96 refund = terms.bounty();
        delete _jobs[jobId];
        _credits[msg.sender] += refund;
        emit IJobMarket.JobCancelled(jobId, refund);
    }

    /// @inheritdoc IVerification
    function expireVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _checkState(jobId, terms, state);
        uint256 runEnd = block.timestamp + terms.maxRuntime();
        uint96 refund;
        if (terms.tier() == VERIFY_REPLICATED) {
            // No seat filled, and none can be: a draw needs a run to fit before the commit
            // phase ends, and rounds left.
            bool drawable = state.drawBlock() != 0 && runEnd <= state.commitEnd() && state.rounds() < MAX_ROUNDS;
            if (state.status() != JobStatus.Committing || state.seats != 0 || drawable) {
                revert Verification_NotExpired(jobId);
            }
            refund = uint96(uint256(terms.bounty()) * terms.size());
        } else {
            if (state.status() != JobStatus.Open || runEnd <= terms.deadline()) revert Verification_NotExpired(jobId);
            refund = terms.bounty();
        }
        delete _jobs[jobId];
        _credits[terms.submitter()] += refund;
        emit IJobMarket.JobExpired(jobId, refund);
    }

    // ================================================================ anyone

    /// @inheritdoc IVerification
    function draw(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) external onlyDelegated {
        _checkState(jobId, terms, state);
        if (state.status() != JobStatus.Committing) {
            revert IJobMarket.JobMarket_WrongStatus(jobId, state.status());
        }
        uint40 drawBlock = state.drawBlock();
        if (drawBlock == 0 || block.number < drawBlock) revert Verification_NotArmed(jobId, drawBlock);
        uint8 round = state.rounds();
        uint40 until = uint40(block.timestamp) + terms.maxRuntime();
        if (until > state.commitEnd() || round >= MAX_ROUNDS) revert Verification_CannotDraw(jobId);

        uint256 seats = _drawSeats(jobId, terms, state, round, until);
        // Counted: this round is never drawn again. Seats left empty arm the next round
        // while one could still fill them in time.
        uint40 next;
        if (_nextEmpty(seats, terms.size(), 0) < terms.size() && round + 1 < MAX_ROUNDS) {
            next = uint40(block.number) + DRAW_DELAY;
        }
        uint256 drawn = JobCodec.draw(next, round + 1, state.commitEnd(), state.seatStake());
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(state.terms, state.fields, seats, drawn, state.result)));
        emit Drawn(jobId, round, seats);
        if (next != 0) emit DrawArmed(jobId, next, round + 1);
    }

    // ================================================================ seats

    /// @inheritdoc IVerification
    function commitSeat(uint64 jobId, uint8 seat, Seat calldata s, bytes32 seal) external onlyDelegated {
        (uint64 nodeId,) = _runningSeat(jobId, seat, s);
        if (seal == 0) revert Verification_EmptySeal();
        _seats[jobId][seat] = keccak256(abi.encode(Seat(JobCodec.withPhase(s.fields, COMMITTED), seal, 0)));
        emit SealCommitted(jobId, nodeId, seat, seal);
    }

    /// @inheritdoc IVerification
    function rejectSeat(uint64 jobId, uint8 seat, Seat calldata s) external onlyDelegated {
        (uint64 nodeId, NodeRecord storage node) = _runningSeat(jobId, seat, s);
        // The grace, then the share of the seat stake that the time held past it is of the
        // rest of the run (`JobMarket._rejectCharge`'s rule on the seat's lock). The seat's
        // run is the job's max runtime.
        uint256 run = s.until() - s.seatedAt();
        uint256 grace = run / 10 < REJECT_GRACE ? run / 10 : REJECT_GRACE;
        uint256 held = block.timestamp - s.seatedAt();
        uint96 locked = s.locked();
        uint96 charged = held <= grace ? 0 : uint96((uint256(locked) * (held - grace)) / (run - grace));
        // Only the seat's word: declines of one job's seats never race each other. The
        // seat is vacated (and redrawn) by `reclaimSeat`.
        _seats[jobId][seat] =
            keccak256(abi.encode(Seat(JobCodec.withPhase(s.fields, DECLINED) & ~uint256(type(uint96).max), 0, 0)));
        _barred[jobId][nodeId] = true;
        node.locked -= locked;
        emit SeatFreed(jobId, nodeId, seat, false, locked, charged);
        _slash(node, nodeId, jobId, charged);
        _poolSync(nodeId, node);
    }

    /// @inheritdoc IVerification
    function reclaimSeat(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        uint8 seat,
        Seat calldata s
    ) external onlyDelegated {
        _checkCommitPhase(jobId, terms, state);
        _checkSeat(jobId, seat, s);
        uint64 nodeId = s.nodeId();
        bool fault = s.phase() != DECLINED;
        if (fault) {
            NodeRecord storage node = _nodes[nodeId];
            if (s.phase() != SEATED || node.inactiveSince < s.seatedAt()) {
                revert Verification_NotReclaimable(jobId, seat);
            }
            uint96 locked = s.locked();
            _barred[jobId][nodeId] = true;
            node.locked -= locked;
            emit SeatFreed(jobId, nodeId, seat, true, locked, locked);
            _slash(node, nodeId, jobId, locked);
            _poolSync(nodeId, node);
        }
        delete _seats[jobId][seat];
        emit SeatVacated(jobId, nodeId, seat, fault);
        _vacated(jobId, terms, state, seat, fault);
    }

    /// @inheritdoc IVerification
    function openReveals(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, Seat[] calldata seats)
        external
        onlyDelegated
    {
        _checkCommitPhase(jobId, terms, state);
        uint256 n = terms.size();
        _checkSeats(jobId, seats, n);
        uint256 committed;
        uint256 empty;
        for (uint256 i; i < n; ++i) {
            uint8 phase = seats[i].phase();
            if (phase == 0 || phase == DECLINED) {
                ++empty;
            } else if (phase == SEATED) {
                // A seat whose run ended without a commit is absent; one still running may
                // commit.
                if (block.timestamp <= seats[i].until()) revert Verification_NotCommitted(jobId, i);
            } else {
                ++committed;
            }
        }
        if (committed == 0) revert Verification_NothingCommitted(jobId);
        if (empty != 0 && block.timestamp + terms.maxRuntime() <= state.commitEnd() && state.rounds() < MAX_ROUNDS) {
            revert Verification_SeatsCanStillFill(jobId);
        }
        uint40 revealBy = uint40(block.timestamp) + terms.revealWindow();
        uint256 fields =
            JobCodec.next(state.fields, JobStatus.Revealing, state.faults(), state.barred(), state.nodeId(), revealBy);
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(state.terms, fields, state.seats, state.draw, state.result)));
        emit RevealsOpened(jobId, revealBy);
    }

    /// @inheritdoc IVerification
    function revealSeat(
        uint64 jobId,
        JobTerms calldata terms,
        VerifiedState calldata state,
        uint8 seat,
        Seat calldata s,
        bytes32 digest,
        bytes32 salt
    ) external onlyDelegated {
        _checkState(jobId, terms, state);
        uint40 revealBy = _revealBy(jobId, terms, state);
        if (block.timestamp > revealBy) revert Verification_RevealClosed(jobId, revealBy);
        _checkSeat(jobId, seat, s);
        _checkPhase(jobId, seat, s, COMMITTED);
        (uint64 nodeId,) = _seatNode(jobId, seat, s);
        if (digest == 0) revert Verification_EmptyDigest();
        if (keccak256(abi.encode(block.chainid, address(this), jobId, seat, nodeId, digest, salt)) != s.seal) {
            revert Verification_SealMismatch(jobId, seat);
        }
        _seats[jobId][seat] = keccak256(abi.encode(Seat(JobCodec.withPhase(s.fields, REVEALED), s.seal, digest)));
        emit ResultRevealed(jobId, nodeId, seat, digest);
    }

    /// @inheritdoc IVerification
    function decide(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, Seat[] calldata seats)
        external
        onlyDelegated
    {
        _checkState(jobId, terms, state);
        // The refereed tier decides by its own rules (design 18, §2.6).
        if (terms.tier() != VERIFY_REPLICATED) revert Verification_InvalidPolicy();
        uint40 revealBy = _revealBy(jobId, terms, state);
        uint256 n = terms.size();
        _checkSeats(jobId, seats, n);
        Tally memory t = _tally(seats, n, terms.quorum());
        // No seat was ever filled: `expireVerified` ends it.
        if (t.filled == 0) revert Verification_NoSeatFilled(jobId);
        if (block.timestamp <= revealBy && t.unrevealed != 0) revert Verification_NotDecidable(jobId, revealBy);

        uint96 bounty = state.bounty();
        uint96 fee = uint96((uint256(bounty) * state.feeBps()) / BPS);
        t.sandboxed = terms.engine() == ENGINE_DOCKER;
        _settleSeats(jobId, seats, n, t, bounty, fee);
        uint96 refund = uint96(uint256(bounty) * (n - t.paid - t.forfeited));
        delete _jobs[jobId];
        _credits[terms.submitter()] += refund;
        if (t.quorum) emit JobVerified(jobId, t.digest, t.agreed, refund);
        else emit IJobMarket.JobFailed(jobId, FailureKind.NoQuorum, refund);
    }

    // ================================================================ views

    /// @inheritdoc IVerification
    function verifyParams(uint32 policyVersion) external view returns (VerifyParams memory) {
        return _verify[policyVersion];
    }

    /// @inheritdoc IVerification
    function poolFloor() external view returns (uint96) {
        return _poolFloor;
    }

    // ================================================================ internal

    /// @dev Every rule of posting but the deadline's; returns the seat stake.
    function _checkPosting(
        Config memory c,
        JobRequirements calldata requirements,
        VerifyPolicy calldata policy,
        uint96 bounty,
        uint256 specLength
    ) internal view returns (uint96 seatStake) {
        if (c.paused) revert IJobMarket.JobMarket_Paused();
        VerifyParams memory p = _verify[c.policy];
        if (p.poolFloor == 0) revert Verification_NotOffered(c.policy);
        _checkRequirements(requirements);
        // WASM, or a CPU Docker job replicated: a refereed verdict against a provider on a
        // Docker job could not tell a lie from a job that is not deterministic (§1).
        if (
            requirements.engine != ENGINE_WASM
                && (requirements.engine != ENGINE_DOCKER
                    || policy.tier != VERIFY_REPLICATED
                    || requirements.minGpuCount != 0
                    || requirements.gpuModel != bytes32(0))
        ) revert Verification_EngineNotVerifiable(requirements.engine);
        if (requirements.maxRuntime < MIN_VERIFIED_RUNTIME) {
            revert Verification_RuntimeTooShort(requirements.maxRuntime, MIN_VERIFIED_RUNTIME);
        }
        _checkSpec(specLength);
        _checkPolicy(policy, p.minRevealWindow);
        if (bounty < p.minVerifiedBounty) revert Verification_BountyTooSmall(bounty, p.minVerifiedBounty);
        uint256 scaled = (uint256(bounty) * p.seatBps) / BPS;
        seatStake = scaled > p.seatFloor ? uint96(scaled) : p.seatFloor;
        // Any member of the pool can take a seat.
        if (scaled > p.poolFloor) revert Verification_SeatStakeOverFloor(uint96(scaled), p.poolFloor);
        if (policy.tier == VERIFY_REPLICATED) {
            // Members that can take its seats: WASM ones, or sandboxed Docker ones.
            uint256 members = requirements.engine == ENGINE_WASM ? _poolKinds.wasm : _poolKinds.sandboxed;
            if (members < p.minPool) revert Verification_PoolTooSmall(members, p.minPool);
        }
    }

    /// @dev The new job's `fields` and `draw` words and its escrow. Replicated: Committing
    /// until the commit phase ends (deadline - W), the first draw armed, n bounties
    /// escrowed. Refereed: Open, one bounty.
    function _opening(
        Config memory c,
        uint32 maxRuntime,
        VerifyPolicy calldata policy,
        uint96 bounty,
        uint40 deadline,
        uint96 seatStake
    ) internal view returns (uint256 fields, uint256 drawWord, uint256 escrow) {
        fields = JobCodec.opened(bounty, c.feeBps, c.challengeWindow);
        if (policy.tier == VERIFY_REPLICATED) {
            uint256 earliest = block.timestamp + DRAW_SLACK + maxRuntime + policy.revealWindow;
            uint256 latest = block.timestamp + 2 * uint256(MAX_RUNTIME) + policy.revealWindow;
            if (deadline < earliest || deadline > latest) {
                revert Verification_DeadlineOutOfRange(deadline, earliest, latest);
            }
            uint40 commitEnd = deadline - policy.revealWindow;
            fields = JobCodec.next(fields, JobStatus.Committing, 0, 0, 0, commitEnd);
            drawWord = JobCodec.draw(uint40(block.number) + DRAW_DELAY, 0, commitEnd, seatStake);
            escrow = uint256(bounty) * policy.size;
            // The escrow travels in 96-bit amounts (events, credits' refunds).
            if (escrow > type(uint96).max) revert Verification_BountyTooLarge(bounty);
        } else {
            uint256 earliest = block.timestamp + maxRuntime;
            if (deadline < earliest) revert IJobMarket.JobMarket_DeadlineTooSoon(deadline, earliest);
            // The provider's hold (the seat stake and r bounties), and with a dispute's bond
            // every sum a decision makes, travel in 96 bits too.
            uint256 bond = _bond(_policies[c.policy], bounty);
            if (uint256(seatStake) + uint256(bounty) * policy.size + bond > type(uint96).max) {
                revert Verification_BountyTooLarge(bounty);
            }
            drawWord = JobCodec.draw(0, 0, 0, seatStake);
            escrow = bounty;
        }
    }

    /// @dev Stores the new job's state and emits its posting.
    function _record(
        uint64 jobId,
        JobRequirements calldata requirements,
        VerifyPolicy calldata policy,
        uint96 bounty,
        uint40 deadline,
        bytes calldata spec,
        uint256 fields,
        uint256 drawWord,
        uint96 fromCredits
    ) internal {
        JobTerms memory terms = JobCodec.pack(
                msg.sender, bounty, keccak256(spec), requirements, deadline, _config.policy
            ).verified(policy);
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(keccak256(abi.encode(terms)), fields, 0, drawWord, 0)));
        emit IJobMarket.JobPosted(jobId, msg.sender, terms, fromCredits, spec);
        uint40 drawBlock = uint40(drawWord);
        emit VerifiedJobPosted(jobId, policy, uint96(drawWord >> 88), uint40(drawWord >> 48));
        if (drawBlock != 0) emit DrawArmed(jobId, drawBlock, 0);
    }

    /// @dev Replicated: 3 <= n <= 5, 2k > n (one digest at most reaches k), k <= n - 1 (one
    /// seat never vetoes). Refereed: r odd, 3 or 5, no quorum. Both: the reveal window at
    /// least the policy's floor.
    function _checkPolicy(VerifyPolicy calldata policy, uint32 minRevealWindow) internal pure {
        uint8 n = policy.size;
        uint8 k = policy.quorum;
        bool valid = policy.tier == VERIFY_REPLICATED
            ? n >= 3 && n <= MAX_SEATS && 2 * uint16(k) > n && k < n
            : policy.tier == VERIFY_REFEREED && (n == 3 || n == 5) && k == 0;
        if (!valid) revert Verification_InvalidPolicy();
        if (policy.revealWindow < minRevealWindow) {
            revert Verification_RevealWindowTooShort(policy.revealWindow, minRevealWindow);
        }
    }

    /// @dev A round being drawn.
    struct Round {
        uint64 jobId;
        uint256 n;
        uint256 length;
        bytes32 seed;
        address submitter;
        /// A refereed dispute's provider, its operator and its agent (0 otherwise): never a
        /// referee.
        uint64 provider;
        address providerOperator;
        address providerAgent;
        uint40 until;
        uint96 seatStake;
        /// The `engines` bit a seated node must have: WASM, or the Docker sandbox's.
        uint8 capability;
        /// The seat word so far.
        uint256 seats;
        /// The operators of the filled seats: one seat per operator.
        address[MAX_SEATS] operators;
    }

    /// @dev Fills the empty seats of round `round` from the pool as it stood when this block
    /// began; returns the seat word after it.
    function _drawSeats(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, uint8 round, uint40 until)
        internal
        returns (uint256)
    {
        Round memory r;
        r.seats = state.seats;
        r.n = terms.size();
        r.length = _poolLengthAtBlockStart();
        r.capability = terms.engine() == ENGINE_WASM ? ENGINE_WASM : DETERMINISTIC_DOCKER;
        // The members that can take its seats, as posting counts them, as the block began.
        (uint32 wasm, uint32 sandboxed) = _poolKindsAtBlockStart();
        uint256 members = r.capability == ENGINE_WASM ? wasm : sandboxed;
        if (r.length == 0 || members < _verify[terms.policy()].minPool) return r.seats;
        r.jobId = jobId;
        r.until = until;
        r.seatStake = state.seatStake();
        r.submitter = terms.submitter();
        r.provider = state.nodeId();
        if (r.provider != 0) {
            (r.providerOperator, r.providerAgent) = (_nodes[r.provider].operator, _nodes[r.provider].agent);
        }
        r.seed = keccak256(abi.encode(block.prevrandao, block.chainid, jobId, round));
        for (uint256 i; i < r.n; ++i) {
            uint64 id = state.seat(i);
            if (id != 0) r.operators[i] = _nodes[id].operator;
        }
        uint256 next = _nextEmpty(r.seats, r.n, 0);
        for (uint256 j; j < MAX_SAMPLES && next < r.n; ++j) {
            if (_trySeat(r, next, j)) next = _nextEmpty(r.seats, r.n, next + 1);
        }
        return r.seats;
    }

    /// @dev Sample `j` of the round: seats its node in seat `i` if it may take one.
    function _trySeat(Round memory r, uint256 i, uint256 j) internal returns (bool) {
        uint64 nodeId = _poolAtBlockStart(uint256(keccak256(abi.encode(r.seed, j))) % r.length);
        NodeRecord storage node = _nodes[nodeId];
        if (!_seatable(r, nodeId, node)) return false;
        r.operators[i] = node.operator;
        r.seats |= uint256(nodeId) << (48 * i);
        _seat(r.jobId, i, nodeId, node, r.until, r.seatStake);
        return true;
    }

    /// @dev Whether a drawn node may take a seat: it runs the job's engine verified (the
    /// pool holds WASM and sandboxed Docker nodes), its free stake covers the seat stake (a
    /// seat is only as good as what it locks), not seated already, not of a seated node's
    /// operator, neither operated nor served by the submitter, not barred from the job, and
    /// neither a refereed dispute's provider nor of its operator.
    /// Whatever else it did since the block began (left, exited, went Inactive), it is
    /// seated, and answers for the seat like any other.
    function _seatable(Round memory r, uint64 nodeId, NodeRecord storage node) internal view returns (bool) {
        if ((node.hot.engines >> r.capability) & 1 == 0) return false;
        if (node.stake - node.locked < r.seatStake) return false;
        address operator = node.operator;
        if (operator == r.submitter || node.agent == r.submitter || _barred[r.jobId][nodeId]) return false;
        if (nodeId == r.provider || operator == r.providerOperator) return false;
        if (r.provider != 0 && (node.agent == r.providerAgent || operator == r.providerAgent)) return false;
        for (uint256 i; i < r.n; ++i) {
            if (uint64(uint48(r.seats >> (48 * i))) == nodeId || r.operators[i] == operator) return false;
        }
        return true;
    }

    /// @dev Seats `nodeId` in seat `i`: locks the seat stake, writes the seat's word, and
    /// takes the node out of the pool if its free stake fell under the floor.
    function _seat(uint64 jobId, uint256 i, uint64 nodeId, NodeRecord storage node, uint40 until, uint96 seatStake)
        internal
    {
        node.locked += seatStake;
        _seats[jobId][i] = keccak256(
            abi.encode(Seat(JobCodec.seatFields(SEATED, nodeId, uint40(block.timestamp), until, seatStake), 0, 0))
        );
        emit SeatDrawn(jobId, nodeId, uint8(i), until, seatStake);
        _poolSync(nodeId, node);
    }

    /// @dev The first empty seat at or after `from` (n if none).
    function _nextEmpty(uint256 seats, uint256 n, uint256 from) internal pure returns (uint256 i) {
        for (i = from; i < n; ++i) {
            if (uint48(seats >> (48 * i)) == 0) return i;
        }
    }

    /// @dev The job's word after seat `seat` was vacated, with a draw armed for it if none
    /// is and one could still fill it.
    function _vacated(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state, uint8 seat, bool fault)
        internal
    {
        uint8 barred = state.barred() == type(uint8).max ? state.barred() : state.barred() + 1;
        uint8 faults = state.faults();
        if (fault && faults < type(uint8).max) ++faults;
        // (A refereed dispute's job keeps its provider's id.)
        uint256 fields =
            JobCodec.next(state.fields, JobStatus.Committing, faults, barred, state.nodeId(), state.commitEnd());
        uint256 seats = state.seats & ~(uint256(type(uint48).max) << (48 * uint256(seat)));
        uint256 drawWord = state.draw;
        uint8 round = state.rounds();
        if (state.drawBlock() == 0 && round < MAX_ROUNDS && block.timestamp + terms.maxRuntime() <= state.commitEnd()) {
            uint40 next = uint40(block.number) + DRAW_DELAY;
            drawWord = JobCodec.draw(next, round, state.commitEnd(), state.seatStake());
            emit DrawArmed(jobId, next, round);
        }
        _jobs[jobId] = keccak256(abi.encode(VerifiedState(state.terms, fields, seats, drawWord, state.result)));
    }

    /// @dev `s` is seat `seat`'s stored word (not empty).
    function _checkSeat(uint64 jobId, uint256 seat, Seat calldata s) internal view {
        if (seat >= MAX_SEATS || _seats[jobId][seat] != keccak256(abi.encode(s))) {
            revert Verification_SeatMismatch(jobId, seat);
        }
    }

    function _checkPhase(uint64 jobId, uint256 seat, Seat calldata s, uint8 phase) internal pure {
        if (s.phase() != phase) revert Verification_WrongPhase(jobId, seat, s.phase());
    }

    /// @dev A Seated seat whose run is on, sent by its node's agent: its run is not over,
    /// and its node was not marked Inactive since it was seated (that seat is reclaimed,
    /// with the slash). Returns the node.
    function _runningSeat(uint64 jobId, uint256 seat, Seat calldata s)
        internal
        view
        returns (uint64 nodeId, NodeRecord storage node)
    {
        _checkSeat(jobId, seat, s);
        _checkPhase(jobId, seat, s, SEATED);
        (nodeId, node) = _seatNode(jobId, seat, s);
        if (block.timestamp > s.until()) revert Verification_SeatTimedOut(jobId, seat, s.until());
        if (node.inactiveSince >= s.seatedAt()) revert Verification_MustBeReclaimed(jobId, seat);
    }

    /// @dev The seat's node; the caller is its agent.
    function _seatNode(uint64 jobId, uint256 seat, Seat calldata s)
        internal
        view
        returns (uint64 nodeId, NodeRecord storage node)
    {
        nodeId = s.nodeId();
        node = _nodes[nodeId];
        if (msg.sender != node.agent) revert Verification_NotSeatAgent(jobId, seat, msg.sender);
    }

    /// @dev The job is the caller's state, Committing, and its commit phase not over.
    function _checkCommitPhase(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) internal view {
        _checkState(jobId, terms, state);
        if (state.status() != JobStatus.Committing || block.timestamp > state.commitEnd()) {
            revert Verification_CommitPhaseOver(jobId, state.commitEnd());
        }
    }
}
