// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

import {MarketStorage} from "./MarketStorage.sol";
import {JobCodec} from "./types/JobCodec.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IVerificationEvents} from "./interfaces/IVerification.sol";
import {
    Assignment,
    CompletionKind,
    FailureKind,
    JobRequirements,
    JobState,
    JobStatus,
    JobPolicy,
    JobTerms,
    MarketParams,
    NodeStatus,
    ReclaimKind
} from "./types/Types.sol";

/// @title JobMarket
/// @notice Escrowed GPU jobs on staked nodes: post, assign or claim, submit, challenge,
/// settle. Node calls (register, heartbeat, exit, ...; see `INodeRegistry`) and verified
/// jobs (`IVerification`) are served at this same address by the `NodeRegistry` and
/// `Verification` extensions, through `delegatecall`. Money leaves
/// only through withdrawals (pull payments). A job is one storage word, the hash of its
/// state; see `IJobMarket`.
contract JobMarket is IJobMarket, IVerificationEvents, MarketStorage {
    using SafeERC20 for IERC20;
    using JobCodec for JobTerms;
    using JobCodec for JobState;

    uint16 internal constant MAX_FEE_BPS = 1_000;
    /// @notice Longest challenge window the admin may set, seconds. The unbonding period is
    /// at least `MAX_RUNTIME + MAX_CHALLENGE_WINDOW`: a node that began its exit keeps its
    /// stake until every attempt it was given and every challenge of its results is over.
    uint32 public constant MAX_CHALLENGE_WINDOW = 3 days;

    // `IVerification`'s selectors, routed to `verification` by the fallback.
    uint256 internal constant POST_VERIFIED_JOB = 0x5251167e;
    uint256 internal constant EXPIRE_VERIFIED = 0x1b3cddf4;
    uint256 internal constant SET_VERIFY_PARAMS = 0x2b21d8ad;
    uint256 internal constant VERIFY_PARAMS = 0x6260cb30;
    uint256 internal constant POOL_FLOOR = 0xc0639dac;
    uint256 internal constant DRAW = 0x9c081ff9;
    uint256 internal constant COMMIT_SEAT = 0x79f4de50;
    uint256 internal constant REJECT_SEAT = 0xbc144078;
    uint256 internal constant RECLAIM_SEAT = 0x75b85119;
    uint256 internal constant OPEN_REVEALS = 0x6d42b2b7;
    uint256 internal constant REVEAL_SEAT = 0x7bc93dcc;
    uint256 internal constant DECIDE = 0x6b842ed2;
    uint256 internal constant CANCEL_VERIFIED = 0x21987453;
    // `IReferees`' selectors, routed to `referees`.
    uint256 internal constant REQUEST_REFEREES = 0xfff72ab5;
    uint256 internal constant ASSIGN_REFEREED = 0x45dc9994;
    uint256 internal constant CLAIM_REFEREED = 0xe722b90a;
    uint256 internal constant SUBMIT_REFEREED_RESULT = 0xec243e5b;
    uint256 internal constant REJECT_REFEREED = 0x5352a63f;
    uint256 internal constant RECLAIM_REFEREED = 0x5f1a9e0c;
    uint256 internal constant ACCEPT_VERIFIED = 0xaa09a815;
    uint256 internal constant FINALIZE_VERIFIED = 0x833b2e20;
    uint256 internal constant DECIDE_REFEREES = 0xd223ce35;
    uint256 internal constant RESOLVE_VERIFIED = 0x415b2171;
    uint256 internal constant SETTLE_VERIFIED = 0x27425206;
    uint256 internal constant REVEAL_REFEREED = 0x68bf9d94;
    /// `INodeRegistry.heartbeat`, routed to the registry first.
    uint256 internal constant HEARTBEAT = 0x9bf6fa57;

    /// @notice The extension serving the node calls (`INodeRegistry`) at this address.
    address public immutable nodeRegistry;
    /// @notice The extension serving verified jobs (`IVerification`) at this address.
    address public immutable verification;
    /// @notice The extension serving the refereed tier's calls (`IReferees`) at this address.
    address public immutable referees;

    /// @param admin Holds DEFAULT_ADMIN_ROLE: a TimelockController in production, so that
    /// parameter changes and role grants wait out its delay.
    constructor(
        IERC20 token_,
        address admin,
        MarketParams memory params_,
        MarketStorage nodeRegistry_,
        MarketStorage verification_,
        MarketStorage referees_
    ) MarketStorage(token_) {
        if (address(token_) == address(0) || admin == address(0)) {
            revert JobMarket_ZeroAddress();
        }
        if (
            address(nodeRegistry_.token()) != address(token_) || address(verification_.token()) != address(token_)
                || address(referees_.token()) != address(token_)
        ) revert JobMarket_RegistryMismatch();
        nodeRegistry = address(nodeRegistry_);
        verification = address(verification_);
        referees = address(referees_);
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _config.nextJobId = 1;
        _nodeParams.nextNodeId = 1;
        _setParams(params_);
    }

    /// @notice Serves the node calls and the verified jobs: runs `NodeRegistry`,
    /// `Verification` or `Referees` on this contract's storage. The `IVerification` and
    /// `IReferees` selectors are listed here as literals (a unit test checks them against
    /// the interfaces); every other call goes to the registry.
    fallback() external {
        address target = nodeRegistry;
        address verification_ = verification;
        address referees_ = referees;
        assembly ("memory-safe") {
            let sig := shr(224, calldataload(0))
            // The heartbeat, every node's most frequent call, skips the lists.
            if iszero(eq(sig, HEARTBEAT)) {
                if or(
                    or(
                        or(
                            or(eq(sig, POST_VERIFIED_JOB), eq(sig, EXPIRE_VERIFIED)),
                            or(eq(sig, SET_VERIFY_PARAMS), eq(sig, VERIFY_PARAMS))
                        ),
                        or(or(eq(sig, POOL_FLOOR), eq(sig, DRAW)), or(eq(sig, COMMIT_SEAT), eq(sig, REJECT_SEAT)))
                    ),
                    or(
                        or(eq(sig, RECLAIM_SEAT), eq(sig, OPEN_REVEALS)),
                        or(or(eq(sig, REVEAL_SEAT), eq(sig, DECIDE)), eq(sig, CANCEL_VERIFIED))
                    )
                ) { target := verification_ }
                if or(
                    or(
                        or(eq(sig, FINALIZE_VERIFIED), eq(sig, ASSIGN_REFEREED)),
                        or(eq(sig, CLAIM_REFEREED), eq(sig, SUBMIT_REFEREED_RESULT))
                    ),
                    or(
                        or(or(eq(sig, REJECT_REFEREED), eq(sig, RECLAIM_REFEREED)), eq(sig, ACCEPT_VERIFIED)),
                        or(
                            or(or(eq(sig, REQUEST_REFEREES), eq(sig, DECIDE_REFEREES)), eq(sig, REVEAL_REFEREED)),
                            or(eq(sig, RESOLVE_VERIFIED), eq(sig, SETTLE_VERIFIED))
                        )
                    )
                ) { target := referees_ }
            }
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), target, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }

    // ================================================================ submitter

    /// @inheritdoc IJobMarket
    function postJob(JobRequirements calldata requirements, uint96 bounty, uint40 deadline, bytes calldata spec)
        external
        returns (uint64 jobId)
    {
        jobId = _post(requirements, bounty, deadline, spec);
    }

    /// @inheritdoc IJobMarket
    function postJobWithPermit(
        JobRequirements calldata requirements,
        uint96 bounty,
        uint40 deadline,
        bytes calldata spec,
        uint256 permitDeadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external returns (uint64 jobId) {
        // A permit seen in the mempool can be front-run; if that consumed it, the allowance
        // is there anyway and the transfer below decides.
        try IERC20Permit(address(token)).permit(msg.sender, address(this), bounty, permitDeadline, v, r, s) {} catch {}
        jobId = _post(requirements, bounty, deadline, spec);
    }

    /// @inheritdoc IJobMarket
    function deposit(uint256 amount) external nonReentrant {
        if (amount == 0) revert JobMarket_ZeroAmount();
        _credits[msg.sender] += amount;
        emit Deposited(msg.sender, amount);

        token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc IJobMarket
    function accept(uint64 jobId, JobTerms calldata terms, JobState calldata state) external {
        _check(jobId, state, JobStatus.Submitted);
        _checkSubmitter(jobId, terms, state);
        _pay(jobId, state, CompletionKind.Accepted);
    }

    /// @inheritdoc IJobMarket
    function dispute(uint64 jobId, JobTerms calldata terms, JobState calldata state) external nonReentrant {
        _check(jobId, state, JobStatus.Submitted);
        _checkSubmitter(jobId, terms, state);
        if (block.timestamp >= state.until()) revert JobMarket_ChallengeWindowClosed(jobId, state.until());

        uint64 nodeId = state.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        JobPolicy memory policy_ = _policies[terms.policy()];
        uint96 bond = _bond(policy_, terms.bounty());
        uint96 exposure = _slashable(node, policy_.slashBps);
        node.locked += exposure;
        _exposure[jobId] = exposure;
        uint40 until = uint40(block.timestamp) + policy_.disputePeriod;
        _jobs[jobId] = _hashNext(state, JobStatus.Disputed, state.faults(), state.barred(), nodeId, until);
        emit JobDisputed(jobId, nodeId, bond, exposure, until);

        token.safeTransferFrom(msg.sender, address(this), bond);
    }

    /// @inheritdoc IJobMarket
    function cancel(uint64 jobId, JobTerms calldata terms, JobState calldata state) external {
        _check(jobId, state, JobStatus.Open);
        _checkSubmitter(jobId, terms, state);
        delete _jobs[jobId];
        _credits[msg.sender] += state.bounty();
        emit JobCancelled(jobId, state.bounty());
    }

    // ================================================================ matcher, agent

    /// @inheritdoc IJobMarket
    function assign(uint64 jobId, uint64 nodeId, JobTerms calldata terms, JobState calldata state)
        external
        onlyRole(MATCHER_ROLE)
    {
        _assign(jobId, nodeId, terms, state, false);
    }

    /// @inheritdoc IJobMarket
    function assignBatch(Assignment[] calldata assignments) external onlyRole(MATCHER_ROLE) {
        for (uint256 i; i < assignments.length; ++i) {
            Assignment calldata a = assignments[i];
            _assign(a.jobId, a.nodeId, a.terms, a.state, false);
        }
    }

    /// @inheritdoc IJobMarket
    function claim(uint64 jobId, uint64 nodeId, JobTerms calldata terms, JobState calldata state) external {
        _assign(jobId, nodeId, terms, state, true);
    }

    /// @inheritdoc IJobMarket
    function submitResult(uint64 jobId, JobState calldata state, bytes32 resultHash, string calldata resultURI)
        external
    {
        _check(jobId, state, JobStatus.Assigned);
        _checkText(bytes(resultURI).length);
        if (block.timestamp > state.until()) revert JobMarket_RuntimeOver(jobId, state.until());
        uint64 nodeId = state.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        if (msg.sender != node.agent) revert JobMarket_NotAssignedAgent(jobId, msg.sender);

        uint40 endsAt = uint40(block.timestamp) + state.challengeWindow();
        _jobs[jobId] = _hashNext(state, JobStatus.Submitted, state.faults(), state.barred(), nodeId, endsAt);
        emit ResultSubmitted(jobId, resultHash, resultURI, endsAt);
    }

    /// @inheritdoc IJobMarket
    function reject(uint64 jobId, JobTerms calldata terms, JobState calldata state, string calldata reason) external {
        _check(jobId, state, JobStatus.Assigned);
        _checkTerms(jobId, terms, state);
        _checkText(bytes(reason).length);
        uint64 nodeId = state.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        if (msg.sender != node.agent) revert JobMarket_NotAssignedAgent(jobId, msg.sender);
        uint32 maxRuntime = terms.maxRuntime();
        uint40 assignedAt = state.until() - maxRuntime;
        // A node at fault (gone Inactive during the attempt, or past its runtime) cannot
        // walk away with a reject: that job is reclaimed, with the slash.
        if (block.timestamp > state.until() || node.inactiveSince >= assignedAt) {
            revert JobMarket_MustBeReclaimed(jobId);
        }

        emit JobRejected(jobId, nodeId, reason);
        _slash(node, nodeId, jobId, _rejectCharge(node, terms, block.timestamp - assignedAt));
        _requeueOrFail(jobId, terms, state, false);
    }

    // ================================================================ anyone

    /// @inheritdoc IJobMarket
    function finalize(uint64 jobId, JobState calldata state) external {
        _finalize(jobId, state);
    }

    /// @inheritdoc IJobMarket
    function finalizeBatch(uint64[] calldata jobIds, JobState[] calldata states) external {
        if (jobIds.length != states.length) revert JobMarket_LengthMismatch();
        for (uint256 i; i < jobIds.length; ++i) {
            _finalize(jobIds[i], states[i]);
        }
    }

    /// @inheritdoc IJobMarket
    function reclaim(uint64 jobId, JobTerms calldata terms, JobState calldata state) external {
        _check(jobId, state, JobStatus.Assigned);
        _checkTerms(jobId, terms, state);
        uint64 nodeId = state.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        ReclaimKind kind;
        if (node.inactiveSince >= state.until() - terms.maxRuntime()) {
            kind = ReclaimKind.NodeInactive;
        } else if (block.timestamp > state.until()) {
            kind = ReclaimKind.RuntimeExceeded;
        } else {
            revert JobMarket_NotReclaimable(jobId);
        }

        emit JobReclaimed(jobId, nodeId, kind, msg.sender);
        _slash(node, nodeId, jobId, _slashable(node, _policies[terms.policy()].slashBps));
        _requeueOrFail(jobId, terms, state, true);
    }

    /// @inheritdoc IJobMarket
    function expire(uint64 jobId, JobTerms calldata terms, JobState calldata state) external {
        _check(jobId, state, JobStatus.Open);
        _checkTerms(jobId, terms, state);
        if (block.timestamp + terms.maxRuntime() <= terms.deadline()) revert JobMarket_NotExpired(jobId);
        delete _jobs[jobId];
        _credits[terms.submitter()] += state.bounty();
        emit JobExpired(jobId, state.bounty());
    }

    /// @inheritdoc IJobMarket
    function settleDispute(uint64 jobId, JobTerms calldata terms, JobState calldata state) external {
        _check(jobId, state, JobStatus.Disputed);
        _checkTerms(jobId, terms, state);
        if (block.timestamp < state.until()) revert JobMarket_DisputeOpen(jobId, state.until());
        _release(jobId, state.nodeId());
        uint96 bond = _bond(_policies[terms.policy()], terms.bounty());
        _credits[terms.submitter()] += bond;
        emit DisputeResolved(jobId, state.nodeId(), true, true, bond, 0, msg.sender);
        _pay(jobId, state, CompletionKind.DisputeLapsed);
    }

    /// @inheritdoc IJobMarket
    function withdraw() external nonReentrant {
        uint256 amount = _credits[msg.sender];
        if (amount == 0) revert JobMarket_NothingToWithdraw();
        _credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);

        token.safeTransfer(msg.sender, amount);
    }

    /// @inheritdoc IJobMarket
    function withdrawTreasury() external nonReentrant {
        Treasury memory t = _treasury;
        if (t.balance == 0) revert JobMarket_NothingToWithdraw();
        _treasury.balance = 0;
        emit TreasuryWithdrawn(t.account, t.balance);

        token.safeTransfer(t.account, t.balance);
    }

    // ================================================================ arbiter, admin

    /// @inheritdoc IJobMarket
    function resolve(uint64 jobId, JobTerms calldata terms, JobState calldata state, bool providerWins)
        external
        onlyRole(ARBITER_ROLE)
    {
        _check(jobId, state, JobStatus.Disputed);
        _checkTerms(jobId, terms, state);
        if (block.timestamp >= state.until()) revert JobMarket_DisputeLapsed(jobId, state.until());
        uint64 nodeId = state.nodeId();
        uint96 exposure = _release(jobId, nodeId);
        uint96 bond = _bond(_policies[terms.policy()], terms.bounty());

        if (providerWins) {
            _nodes[nodeId].earnings += bond;
            emit DisputeResolved(jobId, nodeId, true, false, 0, bond, msg.sender);
            _pay(jobId, state, CompletionKind.DisputeWon);
            return;
        }
        emit DisputeResolved(jobId, nodeId, false, false, bond, 0, msg.sender);
        _slash(_nodes[nodeId], nodeId, jobId, exposure);
        delete _jobs[jobId];
        uint96 refund = state.bounty();
        _credits[terms.submitter()] += refund + bond;
        emit JobFailed(jobId, FailureKind.DisputeLost, refund);
    }

    /// @inheritdoc IJobMarket
    function setParams(MarketParams calldata params_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setParams(params_);
    }

    /// @inheritdoc IJobMarket
    function setPaused(bool paused_) external onlyRole(PAUSER_ROLE) {
        _config.paused = paused_;
        emit PausedSet(paused_, msg.sender);
    }

    // ================================================================ views

    /// @inheritdoc IJobMarket
    function jobHash(uint64 jobId) external view returns (bytes32) {
        return _jobs[jobId];
    }

    /// @inheritdoc IJobMarket
    function hashTerms(JobTerms calldata terms) external pure returns (bytes32) {
        return _hashTerms(terms);
    }

    /// @inheritdoc IJobMarket
    function hashState(JobState calldata state) external pure returns (bytes32) {
        return _hashState(state);
    }

    /// @inheritdoc IJobMarket
    function isBarred(uint64 jobId, uint64 nodeId) external view returns (bool) {
        return _barred[jobId][nodeId];
    }

    /// @inheritdoc IJobMarket
    function params() external view returns (MarketParams memory) {
        JobPolicy memory p = _policies[_config.policy];
        NodeParams memory n = _nodeParams;
        return MarketParams({
            treasury: _treasury.account,
            challengeWindow: p.challengeWindow,
            protocolFeeBps: p.feeBps,
            maxAttempts: p.maxAttempts,
            disputeBond: p.disputeBond,
            disputePeriod: p.disputePeriod,
            slashBps: p.slashBps,
            minStake: n.minStake,
            heartbeatTimeout: n.heartbeatTimeout,
            unbondingPeriod: n.unbondingPeriod
        });
    }

    /// @inheritdoc IJobMarket
    function policy(uint32 version) external view returns (JobPolicy memory) {
        return _policies[version];
    }

    /// @inheritdoc IJobMarket
    function policyVersion() external view returns (uint32) {
        return _config.policy;
    }

    /// @inheritdoc IJobMarket
    function paused() external view returns (bool) {
        return _config.paused;
    }

    /// @inheritdoc IJobMarket
    function jobCount() external view returns (uint64) {
        return _config.nextJobId - 1;
    }

    /// @inheritdoc IJobMarket
    function creditOf(address account) external view returns (uint256) {
        return _credits[account];
    }

    /// @inheritdoc IJobMarket
    function treasuryBalance() external view returns (uint256) {
        return _treasury.balance;
    }

    // ================================================================ internal

    function _post(JobRequirements calldata requirements, uint96 bounty, uint40 deadline, bytes calldata spec)
        internal
        returns (uint64 jobId)
    {
        Config memory c = _config;
        if (c.paused) revert JobMarket_Paused();
        _checkRequirements(requirements);
        if (bounty == 0) revert JobMarket_ZeroBounty();
        uint256 earliest = block.timestamp + requirements.maxRuntime;
        if (deadline < earliest) revert JobMarket_DeadlineTooSoon(deadline, earliest);
        _checkSpec(spec.length);

        jobId = c.nextJobId;
        _config.nextJobId = c.nextJobId + 1;
        JobTerms memory terms = JobCodec.pack(msg.sender, bounty, keccak256(spec), requirements, deadline, c.policy);
        uint256 fields = JobCodec.opened(bounty, c.feeBps, c.challengeWindow);
        _jobs[jobId] = _hash(keccak256(abi.encode(terms)), fields);
        // Credits first: a job posted from credits touches one slot that already exists
        // and makes no token call.
        uint256 credit = _credits[msg.sender];
        uint96 fromCredits = credit >= bounty ? bounty : uint96(credit);
        if (fromCredits != 0) _credits[msg.sender] = credit - fromCredits;
        emit JobPosted(jobId, msg.sender, terms, fromCredits, spec);

        if (fromCredits < bounty) token.safeTransferFrom(msg.sender, address(this), bounty - fromCredits);
    }

    function _assign(uint64 jobId, uint64 nodeId, JobTerms calldata terms, JobState calldata state, bool claimed)
        internal
    {
        _check(jobId, state, JobStatus.Open);
        _checkTerms(jobId, terms, state);
        uint40 until = uint40(block.timestamp) + terms.maxRuntime();
        if (until > terms.deadline()) revert JobMarket_DoesNotFit(jobId, until, terms.deadline());
        if (state.barred() != 0 && _barred[jobId][nodeId]) revert JobMarket_Barred(jobId, nodeId);

        // The node is read, not written: its slots are the matcher's and the worker's to
        // count (a worker refuses work beyond them at once: free, within `REJECT_GRACE`).
        NodeRecord storage node = _nodes[nodeId];
        NodeHot memory hot = node.hot;
        if (hot.status != NodeStatus.Active) revert JobMarket_NodeNotActive(nodeId, hot.status);
        if (claimed && msg.sender != node.agent) revert JobMarket_NotNodeAgent(nodeId, msg.sender);
        _checkEligible(terms, hot);

        _jobs[jobId] = _hashNext(state, JobStatus.Assigned, state.faults(), state.barred(), nodeId, until);
        emit JobAssigned(jobId, nodeId, claimed, until);
    }

    function _finalize(uint64 jobId, JobState calldata state) internal {
        _check(jobId, state, JobStatus.Submitted);
        if (block.timestamp < state.until()) revert JobMarket_ChallengeWindowOpen(jobId, state.until());
        _pay(jobId, state, CompletionKind.Finalized);
    }

    /// @dev Pays a Submitted or Disputed job's bounty to its node's earnings, the fee owed
    /// to the treasury; the job is settled.
    function _pay(uint64 jobId, JobState calldata state, CompletionKind kind) internal {
        uint96 bounty = state.bounty();
        uint96 fee = uint96((uint256(bounty) * state.feeBps()) / BPS);
        uint96 payout = bounty - fee;
        uint64 nodeId = state.nodeId();
        delete _jobs[jobId];
        // One slot: the fee waits there for the next sweep into the treasury.
        NodeRecord storage node = _nodes[nodeId];
        node.earnings += payout;
        node.feesOwed += fee;
        emit JobCompleted(jobId, nodeId, payout, fee, kind);
    }

    /// @dev After a reject or a reclaim: the node is barred from the job; the job is Open
    /// again, or Failed and refunded when out of attempts or when no attempt can fit.
    function _requeueOrFail(uint64 jobId, JobTerms calldata terms, JobState calldata state, bool fault) internal {
        _barred[jobId][state.nodeId()] = true;
        uint8 barred = state.barred() == type(uint8).max ? state.barred() : state.barred() + 1;
        uint8 faults = fault ? state.faults() + 1 : state.faults();

        FailureKind kind;
        if (faults >= _policies[terms.policy()].maxAttempts || barred == type(uint8).max) {
            kind = FailureKind.OutOfAttempts;
        } else if (block.timestamp + terms.maxRuntime() > terms.deadline()) {
            kind = FailureKind.PastDeadline;
        } else {
            _jobs[jobId] = _hashNext(state, JobStatus.Open, faults, barred, 0, 0);
            emit JobRequeued(jobId, faults, barred);
            return;
        }
        delete _jobs[jobId];
        _credits[terms.submitter()] += state.bounty();
        emit JobFailed(jobId, kind, state.bounty());
    }

    /// @dev What a reject costs the node that held the job `held` seconds: nothing for the
    /// grace, then the share of one slash that the time past it is of the rest of the
    /// runtime (a full slash at the runtime's end).
    function _rejectCharge(NodeRecord storage node, JobTerms calldata terms, uint256 held)
        internal
        view
        returns (uint96)
    {
        uint256 maxRuntime = terms.maxRuntime();
        uint256 grace = maxRuntime / 10 < REJECT_GRACE ? maxRuntime / 10 : REJECT_GRACE;
        if (held <= grace) return 0;
        uint256 slash = _slashable(node, _policies[terms.policy()].slashBps);
        return uint96((slash * (held - grace)) / (maxRuntime - grace));
    }

    /// @dev Ends a dispute's hold on its node's stake; returns what was held.
    function _release(uint64 jobId, uint64 nodeId) internal returns (uint96 exposure) {
        exposure = _exposure[jobId];
        delete _exposure[jobId];
        _nodes[nodeId].locked -= exposure;
    }

    function _check(uint64 jobId, JobState calldata state, JobStatus expected) internal view {
        if (_jobs[jobId] != _hashState(state)) revert JobMarket_StaleState(jobId);
        if (state.status() != expected) revert JobMarket_WrongStatus(jobId, state.status());
    }

    function _checkTerms(uint64 jobId, JobTerms calldata terms, JobState calldata state) internal pure {
        if (_hashTerms(terms) != state.terms) revert JobMarket_WrongTerms(jobId);
    }

    function _hashState(JobState calldata state) internal pure returns (bytes32) {
        return _hash(state.terms, state.fields);
    }

    /// @dev The hash of the verified `state` moved on: status, counters, node and `until`
    /// replaced.
    function _hashNext(
        JobState calldata state,
        JobStatus status,
        uint8 faults,
        uint8 barred,
        uint64 nodeId,
        uint40 until
    ) internal pure returns (bytes32) {
        return _hash(state.terms, JobCodec.next(state.fields, status, faults, barred, nodeId, until));
    }

    /// @dev keccak256(abi.encode(JobState)), from its two words.
    function _hash(bytes32 terms, uint256 fields) internal pure returns (bytes32 hash) {
        assembly ("memory-safe") {
            mstore(0, terms)
            mstore(0x20, fields)
            hash := keccak256(0, 0x40)
        }
    }

    /// @dev keccak256(abi.encode(JobTerms)), read in place: five static words.
    function _hashTerms(JobTerms calldata terms) internal pure returns (bytes32 hash) {
        assembly ("memory-safe") {
            let p := mload(0x40)
            calldatacopy(p, terms, 0xa0)
            hash := keccak256(p, 0xa0)
        }
    }

    function _checkSubmitter(uint64 jobId, JobTerms calldata terms, JobState calldata state) internal view {
        _checkTerms(jobId, terms, state);
        if (msg.sender != terms.submitter()) revert JobMarket_NotSubmitter(jobId, msg.sender);
    }

    function _setParams(MarketParams memory p) internal {
        if (
            p.treasury == address(0) || p.protocolFeeBps > MAX_FEE_BPS || p.maxAttempts == 0 || p.challengeWindow == 0
                || p.disputeBond == 0 || p.disputePeriod == 0 || p.slashBps > BPS || p.minStake == 0
                || p.heartbeatTimeout == 0 || p.challengeWindow > MAX_CHALLENGE_WINDOW
                || p.unbondingPeriod < MAX_RUNTIME + MAX_CHALLENGE_WINDOW
        ) revert JobMarket_InvalidParams();
        // A new policy version for jobs posted from now on; posted jobs keep theirs.
        Config storage c = _config;
        uint32 version = c.policy + 1;
        _policies[version] = JobPolicy({
            feeBps: p.protocolFeeBps,
            challengeWindow: p.challengeWindow,
            disputeBond: p.disputeBond,
            disputePeriod: p.disputePeriod,
            slashBps: p.slashBps,
            maxAttempts: p.maxAttempts
        });
        c.policy = version;
        c.feeBps = p.protocolFeeBps;
        c.challengeWindow = p.challengeWindow;
        _treasury.account = p.treasury;
        NodeParams storage n = _nodeParams;
        n.minStake = p.minStake;
        n.heartbeatTimeout = p.heartbeatTimeout;
        n.unbondingPeriod = p.unbondingPeriod;
        emit MarketParamsUpdated(p, version);
    }
}
