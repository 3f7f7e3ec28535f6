// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../../Base.t.sol";
import {JobView} from "../../JobView.sol";
import {JobMarket} from "../../../src/JobMarket.sol";
import {
    DETERMINISTIC_DOCKER,
    ENGINE_DOCKER,
    ENGINE_WASM,
    JobPolicy,
    JobRequirements,
    JobState,
    JobStatus,
    JobTerms
} from "../../../src/types/Types.sol";
import {MarketParams, NodeCapabilities, NodeInfo, NodeStatus, VerifyParams} from "../../../src/types/Types.sol";
import {Seat, VERIFY_REFEREED, VERIFY_REPLICATED, VerifiedState, VerifyPolicy} from "../../../src/types/Types.sol";
import {IReferees, IVerification} from "../../../src/interfaces/IVerification.sol";

/// @notice Drives random sequences of calls by every participant (submitters, the matcher,
/// agents, operators, keepers, the arbiter, the admin), with bounded inputs. Each action
/// picks a target its rules allow (mirrored here: status, clocks, eligibility, barring,
/// inactivity) or does nothing, so no call reverts: a revert is a disagreement between the
/// rules as documented and the contract, and fails the run (`fail_on_revert`).
///
/// It keeps `Base`'s fold of every job's terms and state from the logs and its replayed
/// balances, and beside them a model of what every party must hold: what each submitter
/// spent, what each node was paid, slashed and charged, what each dispute holds, what the
/// treasury was given. Money the model expects from a call is computed from the rules and
/// the state before the call; the invariants compare the model with the contract.
contract MarketHandler is Base {
    using JobView for JobTerms;
    using JobView for JobState;
    using JobView for VerifiedState;

    uint256 internal constant MAX_JOBS = 48;
    uint256 internal constant MAX_NODES = 13;
    uint256 internal constant ONE_BPS = 10_000;

    JobMarket public theMarket;
    address[] internal submitters;
    uint64[] internal jobIds;
    /// Verified jobs (`IVerification`), kept apart: no `JobMarket` call applies to them.
    uint64[] internal verifiedIds;
    uint64[] internal nodeIds;
    /// Time, kept here and set at the start of every action.
    uint256 public now_;

    // ---------------------------------------------------------------- the model

    mapping(address submitter => uint256) public initialOf;
    /// Bounties paid to providers and bonds lost to them.
    mapping(address submitter => uint256) public spentOf;
    mapping(address account => uint256) public withdrawnOf;
    mapping(uint64 nodeId => uint256) public stakeIn;
    mapping(uint64 nodeId => uint256) public stakeOut;
    mapping(uint64 nodeId => uint256) public slashedOf;
    mapping(uint64 nodeId => uint256) public earnedOf;
    mapping(uint64 nodeId => uint256) public earningsOut;
    mapping(uint64 nodeId => uint256) public feesAccrued;
    mapping(uint64 nodeId => uint256) public feesSwept;
    mapping(uint64 nodeId => uint256) public lockedOf;
    mapping(uint64 jobId => uint96) public exposureOf;
    /// Stake locked by the node's seats on verified jobs.
    mapping(uint64 nodeId => uint256) public seatLockedOf;
    /// Stake held by the node as a refereed job's provider.
    mapping(uint64 nodeId => uint256) public holdOf;
    uint256 public slashedTotal;
    /// Bounties of Docker seats that revealed and were not paid, to the treasury.
    uint256 public forfeitedTotal;
    uint256 public sweptTotal;
    uint256 public treasuryOut;
    /// The state each job had before its last transition (0 before the first).
    mapping(uint64 jobId => JobState) internal previous;
    /// Calls that should have been refused and were not (a stale, forged or settled state
    /// accepted): must stay 0.
    uint256 public accepted;
    mapping(bytes4 action => uint256) public calls;

    constructor() {
        setUp();
        enableVerification();
        theMarket = market;
        now_ = block.timestamp;
        submitters.push(submitter);
        submitters.push(makeAddr("submitter1"));
        submitters.push(makeAddr("submitter2"));
        for (uint256 i; i < submitters.length; ++i) {
            fund(submitters[i], 1e15);
            if (i != 0) accounts.push(submitters[i]);
            initialOf[submitters[i]] = token.balanceOf(submitters[i]);
        }
        for (uint256 i; i < 3; ++i) {
            _register(i);
        }
        // Every run starts with jobs in every live status: eight posted (two of each of the
        // four Docker kinds), six of them assigned, four answered, two of those disputed.
        for (uint256 i; i < 8; ++i) {
            JobRequirements memory r = _requirements(i % 4);
            r.maxRuntime = RUNTIME;
            vm.prank(submitters[i % submitters.length]);
            jobIds.push(market.postJob(r, uint96(10e6 * (i + 1)), uint40(now_ + 1 days), spec()));
            sync();
        }
        for (uint256 i; i < 6; ++i) {
            (, uint64 nodeId) = _nodeFor(jobIds[i], i);
            _assign(jobIds[i], nodeId, i % 2 == 0);
        }
        for (uint256 i; i < 4; ++i) {
            _submit(jobIds[i]);
        }
        _dispute(jobIds[0]);
        _dispute(jobIds[1]);
        // And replicated jobs in the commit phase: with a fourth node (WASM) the pool holds
        // three members of three operators, seated in both; one job's seats committed.
        _register(2);
        vm.prank(stranger);
        nodes.syncPool(nodeIds);
        sync();
        VerifyParams memory p = verifyParams();
        for (uint256 i; i < 2; ++i) {
            _postVerified(i, 5e6, 1, p);
            _draw(verifiedIds[i], i);
        }
        for (uint256 i; i < 3; ++i) {
            if (_seatNodeOf(verifiedIds[1], i) != 0) _commit(verifiedIds[1], i, i == 0);
        }
        _disputedAtStart(p);
        _dockerAtStart(p);
    }

    /// A replicated Docker job on three sandboxed nodes, seated, one seat committing
    /// another result: random runs go on to reveal it (parted: not slashed, its bounty to
    /// the treasury) and decide.
    function _dockerAtStart(VerifyParams memory p) internal {
        for (uint256 i; i < 3; ++i) {
            _register(3);
        }
        vm.prank(stranger);
        nodes.syncPool(nodeIds);
        sync();
        _postVerified(0, 5e6, 0x101, p);
        uint64 id = verifiedIds[verifiedIds.length - 1];
        require(jobs[id].terms.engine() == ENGINE_DOCKER, "a Docker job");
        _draw(id, 3);
        for (uint256 i; i < 3; ++i) {
            if (_seatNodeOf(id, i) != 0) _commit(id, i, i == 1);
        }
    }

    /// A refereed job claimed, answered and disputed, its panel drawn from the pool (a fifth
    /// node joins it) less its provider, each referee committed (one a lie): random runs
    /// go on to open the reveals, reveal and decide.
    function _disputedAtStart(VerifyParams memory p) internal {
        _register(2);
        vm.prank(stranger);
        nodes.syncPool(nodeIds);
        sync();
        _postVerified(2, 5e6, 0, p);
        uint64 id = verifiedIds[verifiedIds.length - 1];
        (, uint64 provider) = _nodeFor(id, 0);
        vm.prank(agentOf[provider]);
        IReferees(address(market)).claimRefereed(id, provider, jobs[id].terms, verified[id]);
        sync();
        holdOf[provider] += _holdOf(id);
        sealedBy[id] = keccak256(abi.encode("result", id));
        vm.prank(agentOf[provider]);
        IReferees(address(market))
            .submitRefereedResult(id, jobs[id].terms, verified[id], _seal(id, PROVIDER, provider, sealedBy[id]), "");
        sync();
        vm.prank(jobs[id].terms.submitter());
        IReferees(address(market)).requestReferees(id, jobs[id].terms, verified[id]);
        sync();
        disputeEscrow[id] = uint256(_bond(id)) + uint256(verified[id].bounty()) * jobs[id].terms.size();
        _draw(id, 7);
        for (uint256 i; i < 3; ++i) {
            if (_seatNodeOf(id, i) != 0) _commit(id, i, i == 2);
        }
    }

    modifier step() {
        vm.warp(now_);
        _;
    }

    // ================================================================ views for invariants

    function jobCount() external view returns (uint256) {
        return jobIds.length;
    }

    function jobAt(uint256 i) external view returns (uint64 id, JobTerms memory terms, JobState memory state) {
        id = jobIds[i];
        return (id, jobs[id].terms, jobs[id].state);
    }

    function nodeCount() external view returns (uint256) {
        return nodeIds.length;
    }

    function nodeAt(uint256 i) external view returns (uint64) {
        return nodeIds[i];
    }

    function submitterCount() external view returns (uint256) {
        return submitters.length;
    }

    function submitterAt(uint256 i) external view returns (address) {
        return submitters[i];
    }

    function strangers() external view returns (address[4] memory) {
        return [stranger, matcher, arbiter, admin];
    }

    function treasuryAccount() external view returns (address) {
        return treasury;
    }

    function checkReplay() external view {
        assertReplay();
    }

    /// What a live job holds in escrow: its bounty, and its bond while disputed.
    function escrowOf(uint64 jobId) public view returns (uint256) {
        JobStatus s = jobs[jobId].state.status();
        if (s == JobStatus.None || JobView.isSettled(s)) return 0;
        uint256 held = jobs[jobId].state.bounty();
        if (s == JobStatus.Disputed) held += _bond(jobId);
        return held;
    }

    function verifiedCount() external view returns (uint256) {
        return verifiedIds.length;
    }

    /// A verified job: its terms and the hash of its state as the fold tells it (0 once
    /// settled).
    function verifiedAt(uint256 i) external view returns (uint64 id, JobTerms memory terms, bytes32 folded) {
        id = verifiedIds[i];
        terms = jobs[id].terms;
        folded = _isLive(id) ? keccak256(abi.encode(verified[id])) : bytes32(0);
    }

    /// The end of the last dispute's commit phase, as folded.
    function lastDisputeCommitEnd() external view returns (uint256) {
        return verified[lastDispute].commitEnd();
    }

    /// The seat word (node ids) of verified job `i`, as folded.
    function verifiedSeats(uint256 i) external view returns (uint256) {
        return verified[verifiedIds[i]].seats;
    }

    /// What a live verified job holds in escrow: n bounties replicated, one refereed (and,
    /// disputed, the bond and the referees' prepay not paid out yet).
    function verifiedEscrowOf(uint64 jobId) public view returns (uint256) {
        return _isLive(jobId) ? jobs[jobId].terms.escrow() + disputeEscrow[jobId] : 0;
    }

    /// Exposure held for the node's Disputed jobs, from the fold.
    function heldFor(uint64 nodeId) external view returns (uint256 held) {
        for (uint256 i; i < jobIds.length; ++i) {
            uint64 id = jobIds[i];
            if (jobs[id].state.status() == JobStatus.Disputed && jobs[id].state.nodeId() == nodeId) {
                held += exposureOf[id];
            }
        }
    }

    // ================================================================ actions: submitters

    function post(uint256 who, uint256 kind, uint96 bounty, uint32 runtime, uint32 slack) external step {
        if (jobIds.length >= MAX_JOBS) return;
        address s = submitters[who % submitters.length];
        JobRequirements memory r = _requirements(kind);
        r.maxRuntime = uint32(_bound(runtime, 1, runtime % 5 == 0 ? 2 days : 2 hours));
        bounty = uint96(_bound(bounty, 1, 1_000e6));
        uint40 deadline = uint40(now_ + r.maxRuntime + _bound(slack, 0, 12 hours));
        vm.prank(s);
        uint64 id = market.postJob(r, bounty, deadline, spec());
        sync();
        jobIds.push(id);
        _did();
    }

    function deposit(uint256 who, uint256 amount) external step {
        address s = submitters[who % submitters.length];
        vm.prank(s);
        market.deposit(_bound(amount, 1, 500e6));
        sync();
        _did();
    }

    function cancel(uint256 seed) external step {
        _onJob(seed, _isOpen, _cancel);
    }

    function accept(uint256 seed) external step {
        _onJob(seed, _isSubmitted, _accept);
    }

    function dispute(uint256 seed) external step {
        _onJob(seed, _isDisputable, _dispute);
    }

    function withdraw(uint256 who) external step {
        address s = submitters[who % submitters.length];
        uint256 credit = market.creditOf(s);
        if (credit == 0) return;
        vm.prank(s);
        market.withdraw();
        sync();
        withdrawnOf[s] += credit;
        _did();
    }

    // ================================================================ actions: matcher, agents

    function assign(uint256 seed, uint256 nodeSeed) external step {
        (bool found, uint64 id) = _find(seed, _isAssignable);
        if (!found) return;
        (bool any, uint64 nodeId) = _nodeFor(id, nodeSeed);
        if (!any) return;
        _assign(id, nodeId, false);
        _did();
    }

    function claim(uint256 seed, uint256 nodeSeed) external step {
        (bool found, uint64 id) = _find(seed, _isAssignable);
        if (!found) return;
        (bool any, uint64 nodeId) = _nodeFor(id, nodeSeed);
        if (!any) return;
        _assign(id, nodeId, true);
        _did();
    }

    function submit(uint256 seed) external step {
        _onJob(seed, _isAnswerable, _submit);
    }

    function reject(uint256 seed) external step {
        _onJob(seed, _isRejectable, _reject);
    }

    function heartbeat(uint256 nodeSeed) external step {
        uint64 nodeId = nodeIds[nodeSeed % nodeIds.length];
        NodeStatus s = node(nodeId).status;
        if (s == NodeStatus.Exited) return;
        vm.prank(agentOf[nodeId]);
        nodes.heartbeat(nodeId);
        sync();
        _did();
    }

    /// By a keeper once the heartbeat expired, or by the node's own agent at any time.
    function markInactive(uint256 nodeSeed, bool byAgent) external step {
        uint64 nodeId = nodeIds[nodeSeed % nodeIds.length];
        NodeInfo memory n = node(nodeId);
        if (n.status != NodeStatus.Active) return;
        if (byAgent) {
            vm.prank(n.agent);
        } else if (now_ > uint256(n.lastHeartbeat) + HEARTBEAT_TIMEOUT) {
            vm.prank(stranger);
        } else {
            return;
        }
        nodes.markInactive(nodeId);
        sync();
        _did();
    }

    // ================================================================ actions: anyone

    function reclaim(uint256 seed) external step {
        _onJob(seed, _isReclaimable, _reclaim);
    }

    function finalize(uint256 seed, bool batch) external step {
        (bool found, uint64 id) = _find(seed, _isFinalizable);
        if (!found) return;
        if (!batch) {
            _finalize(id);
        } else {
            uint256 n;
            for (uint256 i; i < jobIds.length; ++i) {
                if (_isFinalizable(jobIds[i])) ++n;
            }
            uint64[] memory ids = new uint64[](n);
            JobState[] memory states = new JobState[](n);
            n = 0;
            for (uint256 i; i < jobIds.length; ++i) {
                if (!_isFinalizable(jobIds[i])) continue;
                ids[n] = jobIds[i];
                states[n++] = jobs[jobIds[i]].state;
                _moving(jobIds[i]);
                _paid(jobIds[i], 0);
            }
            vm.prank(stranger);
            market.finalizeBatch(ids, states);
            sync();
        }
        _did();
    }

    function expire(uint256 seed) external step {
        _onJob(seed, _isExpirable, _expire);
    }

    function settleDispute(uint256 seed) external step {
        _onJob(seed, _isLapsed, _settleDispute);
    }

    function sweepFees(uint256 seed) external step {
        uint64[] memory ids = new uint64[](1 + seed % 3);
        for (uint256 i; i < ids.length; ++i) {
            ids[i] = nodeIds[uint256(keccak256(abi.encode(seed, i))) % nodeIds.length];
            bool repeated;
            for (uint256 j; j < i; ++j) {
                if (ids[j] == ids[i]) repeated = true;
            }
            if (repeated) continue; // a node named twice is swept once
            uint256 owed = node(ids[i]).feesOwed;
            feesSwept[ids[i]] += owed;
            sweptTotal += owed;
        }
        vm.prank(stranger);
        nodes.sweepFees(ids);
        sync();
        _did();
    }

    function withdrawTreasury() external step {
        uint256 balance = market.treasuryBalance();
        if (balance == 0) return;
        vm.prank(stranger);
        market.withdrawTreasury();
        sync();
        treasuryOut += balance;
        _did();
    }

    // ================================================================ actions: arbiter, admin

    function resolve(uint256 seed, bool providerWins) external step {
        (bool found, uint64 id) = _find(seed, _isResolvable);
        if (!found) return;
        _resolve(id, providerWins);
        _did();
    }

    /// A new policy for the jobs posted from now on (the node parameters stay).
    function setParams(uint256 seed) external step {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = uint16(seed % 1_001);
        p.challengeWindow = uint32(_bound(seed >> 16, 1, 3 days));
        p.maxAttempts = uint8(_bound(seed >> 48, 1, 5));
        p.disputeBond = uint96(_bound(seed >> 56, 1, 50e6));
        p.disputePeriod = uint32(_bound(seed >> 104, 1, 5 days));
        p.slashBps = uint16(_bound(seed >> 136, 0, 10_000));
        vm.prank(admin);
        market.setParams(p);
        sync();
        _did();
    }

    // ================================================================ actions: verified jobs

    /// A replicated 3/2 job when the pool can seat it (one in three not), else a refereed one; under the
    /// current policy's verification rules (none after a new policy: nothing to post).
    function postVerified(uint256 who, uint96 bounty, uint32 slack) external step {
        if (jobIds.length + verifiedIds.length >= MAX_JOBS) return;
        VerifyParams memory p = IVerification(address(market)).verifyParams(market.policyVersion());
        if (p.poolFloor == 0) return;
        _postVerified(who, uint96(_bound(bounty, p.minVerifiedBounty, p.poolFloor * 10_000 / p.seatBps)), slack, p);
        _did();
    }

    function _postVerified(uint256 who, uint96 bounty, uint32 slack, VerifyParams memory p) internal {
        // Replicated when the pool's kind can seat it (a Docker job one time in two), but
        // one in three refereed anyway (WASM: a Docker job is never refereed).
        JobRequirements memory r = (slack >> 8) % 2 == 1 ? dockerJobOf() : wasmJobOf();
        if (_poolMembersFor(r.engine) < p.minPool) r = wasmJobOf();
        bool replicate = _poolMembersFor(r.engine) >= p.minPool && slack % 3 != 0;
        if (!replicate) r = wasmJobOf();
        VerifyPolicy memory policy = replicate
            ? VerifyPolicy({tier: VERIFY_REPLICATED, size: 3, quorum: 2, revealWindow: 60})
            : VerifyPolicy({tier: VERIFY_REFEREED, size: 3, quorum: 0, revealWindow: 60});
        uint40 deadline = uint40(now_ + 10 minutes + RUNTIME + 60 + _bound(slack, 0, 6 hours));
        address s = submitters[who % submitters.length];
        vm.prank(s);
        uint64 id = IVerification(address(market)).postVerifiedJob(r, policy, bounty, deadline, spec());
        sync();
        verifiedIds.push(id);
    }

    /// Anyone draws a replicated job's armed round (the chain moved to its block).
    function drawVerified(uint256 seed) external step {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            VerifiedState memory v = verified[id];
            if (!_isLive(id) || v.status() != JobStatus.Committing || v.drawBlock() == 0) continue;
            if (now_ + jobs[id].terms.maxRuntime() > v.commitEnd()) continue;
            _draw(id, seed);
            _did();
            return;
        }
    }

    function _draw(uint64 id, uint256 seed) internal {
        VerifiedState memory v = verified[id];
        if (block.number < v.drawBlock()) vm.roll(v.drawBlock());
        vm.prevrandao(bytes32(seed));
        vm.prank(stranger);
        IVerification(address(market)).draw(id, jobs[id].terms, v);
        sync();
        uint256 after_ = verified[id].seats;
        for (uint256 i; i < 3; ++i) {
            uint64 nodeId = uint64(uint48(after_ >> (48 * i)));
            if (nodeId != 0 && uint48(v.seats >> (48 * i)) == 0) seatLockedOf[nodeId] += v.seatStake();
        }
    }

    /// Anyone expires a verified job nothing can run any more.
    function expireVerified(uint256 seed) external step {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            if (!_isLive(id)) continue;
            VerifiedState memory v = verified[id];
            JobTerms memory t = jobs[id].terms;
            bool expirable = t.tier() == VERIFY_REPLICATED
                ? v.status() == JobStatus.Committing && v.seats == 0
                    && (v.drawBlock() == 0 || now_ + t.maxRuntime() > v.commitEnd() || v.rounds() >= 8)
                : v.status() == JobStatus.Open && now_ + t.maxRuntime() > t.deadline();
            if (!expirable) continue;
            vm.prank(stranger);
            IVerification(address(market)).expireVerified(id, t, v);
            sync();
            _did();
            return;
        }
    }

    // ================================================================ actions: seats

    /// The digest each seat's node committed (the job's result, or a lie).
    mapping(uint64 jobId => mapping(uint256 seat => bytes32)) internal committed;

    /// A seated node's agent commits its result's seal (one in four lies).
    function commitSeat(uint256 seed, uint256 lie) external step {
        (bool found, uint64 id, uint256 i) = _findSeat(seed, _isCommittable);
        if (!found) return;
        _commit(id, i, lie % 4 == 0);
        _did();
    }

    function _commit(uint64 id, uint256 i, bool lie) internal {
        uint64 nodeId = _seatNodeOf(id, i);
        bytes32 digest = lie ? keccak256(abi.encode("a lie", id, i)) : keccak256(abi.encode("result", id));
        committed[id][i] = digest;
        vm.prank(agentOf[nodeId]);
        IVerification(address(market)).commitSeat(id, uint8(i), seatOf[id][i], _seal(id, i, nodeId, digest));
        sync();
        assertEq(seatOf[id][i].fields >> 248, 2, "committed");
    }

    /// A seated node's agent gives its seat back: charged by the grace rule on its lock;
    /// only its seat's word changes.
    function rejectSeat(uint256 seed) external step {
        (bool found, uint64 id, uint256 i) = _findSeat(seed, _isCommittable);
        if (!found) return;
        Seat memory st = seatOf[id][i];
        uint64 nodeId = _seatNodeOf(id, i);
        uint256 run = uint40(st.fields >> 120) - uint40(st.fields >> 160);
        uint256 charge = rejectCharge(uint96(st.fields), now_ - uint40(st.fields >> 160), run);
        bytes32 word = market.jobHash(id);
        vm.prank(agentOf[nodeId]);
        IVerification(address(market)).rejectSeat(id, uint8(i), st);
        sync();
        seatLockedOf[nodeId] -= uint96(st.fields);
        _slashed(nodeId, charge);
        assertTrue(market.isBarred(id, nodeId), "barred");
        assertEq(market.jobHash(id), word, "the job's word is untouched");
        _did();
    }

    /// Anyone vacates a Declined seat, or reclaims one whose node was marked Inactive
    /// since it was seated (its seat stake slashed).
    function reclaimSeat(uint256 seed) external step {
        (bool found, uint64 id, uint256 i) = _findSeat(seed, _isSeatReclaimable);
        if (!found) return;
        Seat memory st = seatOf[id][i];
        uint64 nodeId = _seatNodeOf(id, i);
        vm.prank(stranger);
        IVerification(address(market)).reclaimSeat(id, jobs[id].terms, verified[id], uint8(i), st);
        sync();
        if (st.fields >> 248 == 1) {
            seatLockedOf[nodeId] -= uint96(st.fields);
            _slashed(nodeId, uint96(st.fields));
        }
        assertTrue(market.isBarred(id, nodeId), "barred");
        assertEq(_seatNodeOf(id, i), 0, "vacated");
        _did();
    }

    /// Anyone opens the reveals of a job whose filled seats all committed and whose empty
    /// seats cannot fill.
    function openReveals(uint256 seed) external step {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            if (!_isOpenable(id)) continue;
            vm.prank(stranger);
            IVerification(address(market)).openReveals(id, jobs[id].terms, verified[id], _seatList(id));
            sync();
            assertEq(uint8(verified[id].status()), uint8(JobStatus.Revealing));
            _did();
            return;
        }
    }

    /// A committed seat's agent reveals in the reveal phase; first, the attacker's try
    /// with another digest, which must be refused.
    function revealSeat(uint256 seed) external step {
        (bool found, uint64 id, uint256 i) = _findSeat(seed, _isRevealable);
        if (!found) return;
        uint64 nodeId = _seatNodeOf(id, i);
        bytes memory lie = abi.encodeCall(
            IVerification.revealSeat,
            (id, jobs[id].terms, verified[id], uint8(i), seatOf[id][i], keccak256("other"), _salt(id, i, nodeId))
        );
        if (_accepted(agentOf[nodeId], lie)) ++accepted;
        vm.prank(agentOf[nodeId]);
        IVerification(address(market))
            .revealSeat(
                id, jobs[id].terms, verified[id], uint8(i), seatOf[id][i], committed[id][i], _salt(id, i, nodeId)
            );
        sync();
        _did();
    }

    /// Anyone decides a job whose reveal phase ended (or whose filled seats all revealed):
    /// the model pays and slashes each seat by the table (design 18, §2.5).
    function decideVerified(uint256 seed) external step {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            if (!_isDecidable(id)) continue;
            Seat[] memory list = _seatList(id);
            _expectDecision(id, list);
            vm.prank(stranger);
            IVerification(address(market)).decide(id, jobs[id].terms, verified[id], list);
            sync();
            assertEq(market.jobHash(id), bytes32(0), "decided");
            _did();
            return;
        }
    }

    /// How a job is decided, as the model reads its seats.
    struct Decision {
        bytes32 top;
        uint256 agreed;
        bool quorum;
        uint256 bounty;
        uint256 fee;
        address submitter;
        /// A Docker job: a revealer that is not paid is not slashed; its bounty goes to
        /// the treasury.
        bool sandboxed;
    }

    /// The model's side of a decision: who is paid, who slashed, every lock released.
    function _expectDecision(uint64 id, Seat[] memory list) internal {
        Decision memory d;
        (d.top, d.agreed) = _tally(list);
        d.quorum = d.agreed >= jobs[id].terms.quorum();
        d.bounty = verified[id].bounty();
        d.fee = d.bounty * uint16(verified[id].fields >> 32) / ONE_BPS;
        d.submitter = jobs[id].terms.submitter();
        d.sandboxed = jobs[id].terms.engine() == ENGINE_DOCKER;
        for (uint256 i; i < list.length; ++i) {
            uint256 phase = list[i].fields >> 248;
            if (phase != 0 && phase != 4) _expectSeat(d, list, list[i]);
        }
    }

    /// Paid: with the quorum its digest's seats, without it each matched revealer.
    /// Slashed otherwise: with the quorum every seat; without, a seat that committed and did
    /// not reveal, and one that never committed beside two agreeing seats.
    function _expectSeat(Decision memory d, Seat[] memory list, Seat memory st) internal returns (bool pays) {
        uint64 nodeId = uint64(uint48(st.fields >> 200));
        uint256 phase = st.fields >> 248;
        pays = phase == 3 && (d.quorum ? st.digest == d.top : _sameDigests(list, st.digest) > 1);
        seatLockedOf[nodeId] -= uint96(st.fields);
        if (pays) {
            earnedOf[nodeId] += d.bounty - d.fee;
            feesAccrued[nodeId] += d.fee;
            spentOf[d.submitter] += d.bounty;
        } else if (d.sandboxed && phase == 3) {
            forfeitedTotal += d.bounty;
            spentOf[d.submitter] += d.bounty;
        } else if (d.quorum || phase == 2 || (phase == 1 && d.agreed >= 2)) {
            _slashed(nodeId, uint96(st.fields));
        }
    }

    function _tally(Seat[] memory list) internal pure returns (bytes32 top, uint256 agreed) {
        for (uint256 i; i < list.length; ++i) {
            if (list[i].fields >> 248 != 3) continue;
            uint256 same = _sameDigests(list, list[i].digest);
            if (same > agreed) (top, agreed) = (list[i].digest, same);
        }
    }

    function _sameDigests(Seat[] memory list, bytes32 digest) internal pure returns (uint256 same) {
        for (uint256 j; j < list.length; ++j) {
            if (list[j].fields >> 248 == 3 && list[j].digest == digest) ++same;
        }
    }

    function _seatList(uint64 id) internal view returns (Seat[] memory list) {
        list = new Seat[](jobs[id].terms.size());
        for (uint256 i; i < list.length; ++i) {
            list[i] = seatOf[id][i];
        }
    }

    function _seatNodeOf(uint64 id, uint256 i) internal view returns (uint64) {
        return uint64(uint48(verified[id].seats >> (48 * i)));
    }

    function _salt(uint64 id, uint256 i, uint64 nodeId) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", id, i, nodeId));
    }

    function _seal(uint64 id, uint256 i, uint64 nodeId, bytes32 digest) internal view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, address(market), id, uint8(i), nodeId, digest, _salt(id, i, nodeId)));
    }

    /// The first seat, over the live verified jobs from `seed` on, that `pred` holds for.
    function _findSeat(uint256 seed, function(uint64, uint256) internal view returns (bool) pred)
        internal
        view
        returns (bool, uint64, uint256)
    {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            if (!_isLive(id)) continue;
            for (uint256 j; j < 3; ++j) {
                uint256 i = (seed / n + j) % 3;
                if (_seatNodeOf(id, i) != 0 && pred(id, i)) return (true, id, i);
            }
        }
        return (false, 0, 0);
    }

    /// Seated, its run not over, its node not marked Inactive since it was seated.
    function _isCommittable(uint64 id, uint256 i) internal view returns (bool) {
        uint256 f = seatOf[id][i].fields;
        return f >> 248 == 1 && now_ <= uint40(f >> 120) && node(_seatNodeOf(id, i)).inactiveSince < uint40(f >> 160);
    }

    function _inCommitPhase(uint64 id) internal view returns (bool) {
        return verified[id].status() == JobStatus.Committing && now_ <= verified[id].commitEnd();
    }

    function _isSeatReclaimable(uint64 id, uint256 i) internal view returns (bool) {
        uint256 f = seatOf[id][i].fields;
        if (!_inCommitPhase(id)) return false;
        return f >> 248 == 4 || (f >> 248 == 1 && node(_seatNodeOf(id, i)).inactiveSince >= uint40(f >> 160));
    }

    /// A seat committed; every other is committed, past its run, empty or Declined; the
    /// empty ones cannot fill.
    function _isOpenable(uint64 id) internal view returns (bool) {
        if (!_isLive(id) || !_inCommitPhase(id)) return false;
        uint256 committedSeats;
        uint256 empty;
        for (uint256 i; i < 3; ++i) {
            uint256 f = seatOf[id][i].fields;
            if (f == 0 || f >> 248 == 4) ++empty;
            else if (f >> 248 == 1 && now_ <= uint40(f >> 120)) return false;
            else if (f >> 248 != 1) ++committedSeats;
        }
        VerifiedState memory v = verified[id];
        return
            committedSeats != 0 && (empty == 0 || now_ + jobs[id].terms.maxRuntime() > v.commitEnd() || v.rounds() >= 8);
    }

    /// The end of the reveal phase, or 0 before it.
    function _revealBy(uint64 id) internal view returns (uint256) {
        VerifiedState memory v = verified[id];
        if (v.status() == JobStatus.Revealing) return v.until();
        if (v.status() == JobStatus.Committing && now_ > v.commitEnd()) {
            return v.commitEnd() + jobs[id].terms.revealWindow();
        }
        return 0;
    }

    function _isRevealable(uint64 id, uint256 i) internal view returns (bool) {
        return seatOf[id][i].fields >> 248 == 2 && now_ <= _revealBy(id);
    }

    /// In the reveal phase: after it, or once no committed seat is left to reveal; and a
    /// seat word to decide.
    function _isDecidable(uint64 id) internal view returns (bool) {
        if (!_isLive(id) || jobs[id].terms.tier() != VERIFY_REPLICATED) return false;
        uint256 revealBy = _revealBy(id);
        if (revealBy == 0) return false;
        bool pending;
        bool filled;
        for (uint256 i; i < 3; ++i) {
            uint256 f = seatOf[id][i].fields;
            if (f != 0) filled = true;
            if (f >> 248 == 2) pending = true;
        }
        return filled && (now_ > revealBy || !pending);
    }

    // ================================================================ actions: refereed jobs

    /// The matcher places an Open refereed job on an eligible node that can hold it (or
    /// the node's agent claims it).
    function placeRefereed(uint256 seed, uint256 nodeSeed, bool claimed) external step {
        (bool found, uint64 id) = _findVerified(seed, JobStatus.Open);
        if (!found || now_ + jobs[id].terms.maxRuntime() > jobs[id].terms.deadline()) return;
        (bool any, uint64 nodeId) = _nodeFor(id, nodeSeed);
        if (!any) return;
        NodeInfo memory n = node(nodeId);
        // The hold, and beside it the minimum stake (a pool member placed by the matcher:
        // the pool's floor) kept free.
        uint256 hold = _holdOf(id);
        uint256 keep = MIN_STAKE;
        uint256 floor = IVerification(address(market)).poolFloor();
        if (!claimed && n.poolIndex != 0 && floor > keep) keep = floor;
        if (n.stake - n.lockedStake < hold + keep) return;
        if (claimed) vm.prank(agentOf[nodeId]);
        else vm.prank(matcher);
        if (claimed) IReferees(address(market)).claimRefereed(id, nodeId, jobs[id].terms, verified[id]);
        else IReferees(address(market)).assignRefereed(id, nodeId, jobs[id].terms, verified[id]);
        sync();
        holdOf[nodeId] += hold;
        _did();
    }

    /// The provider answers in time with the seal of its result (one in four lies).
    function submitRefereed(uint256 seed, uint256 lie) external step {
        (bool found, uint64 id) = _findVerified(seed, JobStatus.Assigned);
        if (!found || now_ > verified[id].until()) return;
        uint64 nodeId = verified[id].nodeId();
        bytes32 digest =
            lie % 4 == 0 ? keccak256(abi.encode("a lie", id, PROVIDER)) : keccak256(abi.encode("result", id));
        sealedBy[id] = digest;
        vm.prank(agentOf[nodeId]);
        IReferees(address(market))
            .submitRefereedResult(id, jobs[id].terms, verified[id], _seal(id, PROVIDER, nodeId, digest), "gantry://r");
        sync();
        _did();
    }

    /// The submitter accepts, or anyone finalizes after the challenge window.
    function settleRefereed(uint256 seed) external step {
        (bool found, uint64 id) = _findVerified(seed, JobStatus.Submitted);
        if (!found) return;
        uint64 nodeId = verified[id].nodeId();
        uint256 hold = _holdOf(id);
        uint256 bounty = verified[id].bounty();
        uint256 fee = bounty * uint16(verified[id].fields >> 32) / ONE_BPS;
        if (now_ >= verified[id].until()) {
            vm.prank(stranger);
            IReferees(address(market)).finalizeVerified(id, jobs[id].terms, verified[id]);
        } else {
            vm.prank(jobs[id].terms.submitter());
            IReferees(address(market)).acceptVerified(id, jobs[id].terms, verified[id]);
        }
        sync();
        holdOf[nodeId] -= hold;
        earnedOf[nodeId] += bounty - fee;
        feesAccrued[nodeId] += fee;
        spentOf[jobs[id].terms.submitter()] += bounty;
        _did();
    }

    /// The provider gives the job back (charged by the grace rule on the seat stake), or
    /// anyone reclaims it from a provider at fault (the seat stake slashed).
    function faultRefereed(uint256 seed) external step {
        (bool found, uint64 id) = _findVerified(seed, JobStatus.Assigned);
        if (!found) return;
        uint64 nodeId = verified[id].nodeId();
        uint256 run = jobs[id].terms.maxRuntime();
        uint256 assignedAt = verified[id].until() - run;
        uint256 hold = _holdOf(id);
        uint96 seatStake = verified[id].seatStake();
        if (now_ > verified[id].until() || node(nodeId).inactiveSince >= assignedAt) {
            vm.prank(stranger);
            IReferees(address(market)).reclaimRefereed(id, jobs[id].terms, verified[id]);
            _slashed(nodeId, seatStake);
        } else {
            uint256 charge = rejectCharge(seatStake, now_ - assignedAt, run);
            vm.prank(agentOf[nodeId]);
            IReferees(address(market)).rejectRefereed(id, jobs[id].terms, verified[id], "no");
            _slashed(nodeId, charge);
        }
        sync();
        holdOf[nodeId] -= hold;
        assertTrue(market.isBarred(id, nodeId), "barred");
        _did();
    }

    // ================================================================ actions: refereed disputes

    /// The seat number of a provider's seal.
    uint8 internal constant PROVIDER = type(uint8).max;
    /// The digest each refereed provider sealed (its job's result, or a lie), and whether
    /// it was opened in its dispute.
    mapping(uint64 jobId => bytes32) internal sealedBy;
    mapping(uint64 jobId => bool) internal shown;
    /// A disputed job's escrow beside its bounty: the bond, and the referees' prepay until
    /// the decision pays it out or gives it back.
    mapping(uint64 jobId => uint256) internal disputeEscrow;
    /// The referees an Arbitrating job paid from its prepay.
    mapping(uint64 jobId => uint256) internal refereesPaid;
    uint64 internal lastDispute;
    /// Stake a refereed provider repaid its submitter: the referees' pay of a dispute it lost.
    mapping(uint64 nodeId => uint256) public forfeitedOf;

    /// The submitter disputes an answer within the challenge window: it escrows the bond
    /// and r bounties, exactly.
    function disputeRefereed(uint256 seed) external step {
        (bool found, uint64 id) = _findVerified(seed, JobStatus.Submitted);
        if (!found || now_ >= verified[id].until()) return;
        address s = jobs[id].terms.submitter();
        uint256 escrow = uint256(_bond(id)) + uint256(verified[id].bounty()) * jobs[id].terms.size();
        uint256 before = token.balanceOf(s) + market.creditOf(s);
        vm.prank(s);
        IReferees(address(market)).requestReferees(id, jobs[id].terms, verified[id]);
        sync();
        assertEq(before - token.balanceOf(s) - market.creditOf(s), escrow, "the bond and the prepay");
        disputeEscrow[id] = escrow;
        lastDispute = id;
        _did();
    }

    /// In its dispute's reveal phase the provider opens its seal; first, the attacker's
    /// try with another digest, which must be refused.
    function revealProvider(uint256 seed) external step {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            if (!_isLive(id) || jobs[id].terms.tier() != VERIFY_REFEREED || shown[id]) continue;
            uint256 revealBy = _revealBy(id);
            if (revealBy == 0 || now_ > revealBy) continue;
            uint64 nodeId = verified[id].nodeId();
            bytes32 salt = _salt(id, PROVIDER, nodeId);
            bytes memory lie =
                abi.encodeCall(IReferees.revealRefereed, (id, jobs[id].terms, verified[id], keccak256("other"), salt));
            if (_accepted(agentOf[nodeId], lie)) ++accepted;
            vm.prank(agentOf[nodeId]);
            IReferees(address(market)).revealRefereed(id, jobs[id].terms, verified[id], sealedBy[id], salt);
            sync();
            shown[id] = true;
            _did();
            return;
        }
    }

    /// Anyone decides a dispute whose reveal phase ended, or in which the provider and every
    /// committed referee revealed: the model pays and slashes the referees as a replicated
    /// job's seats (a majority of 2 of 3), then the provider by the table (design 18, §2.6).
    function decideDispute(uint256 seed) external step {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            if (!_isLive(id) || jobs[id].terms.tier() != VERIFY_REFEREED) continue;
            uint256 revealBy = _revealBy(id);
            if (revealBy == 0 || (now_ <= revealBy && (!shown[id] || _pendingReveal(id)))) continue;
            Seat[] memory list = _seatList(id);
            bool arbitrating = _expectDispute(id, list);
            vm.prank(stranger);
            IReferees(address(market)).decideReferees(id, jobs[id].terms, verified[id], list);
            sync();
            if (arbitrating) assertEq(uint8(verified[id].status()), uint8(JobStatus.Arbitrating), "to the arbiter");
            else assertEq(market.jobHash(id), bytes32(0), "decided");
            _did();
            return;
        }
    }

    /// The arbiter decides an Arbitrating dispute in time, or anyone settles it after (the
    /// result stands, the bond goes back).
    function arbitrateRefereed(uint256 seed, bool providerWins) external step {
        (bool found, uint64 id) = _findVerified(seed, JobStatus.Arbitrating);
        if (!found) return;
        bool lapsed = now_ >= verified[id].until();
        _endDispute(id, lapsed || providerWins, refereesPaid[id], lapsed);
        if (lapsed) {
            vm.prank(stranger);
            IReferees(address(market)).settleVerified(id, jobs[id].terms, verified[id]);
        } else {
            vm.prank(arbiter);
            IReferees(address(market)).resolveVerified(id, jobs[id].terms, verified[id], providerWins);
        }
        sync();
        assertEq(market.jobHash(id), bytes32(0), "settled");
        _did();
    }

    function _pendingReveal(uint64 id) internal view returns (bool) {
        for (uint256 i; i < 3; ++i) {
            if (seatOf[id][i].fields >> 248 == 2) return true;
        }
        return false;
    }

    /// The model's side of a dispute's decision; true when it goes to the arbiter.
    function _expectDispute(uint64 id, Seat[] memory list) internal returns (bool) {
        Decision memory d;
        (d.top, d.agreed) = _tally(list);
        d.quorum = d.agreed >= (jobs[id].terms.size() + 1) / 2;
        d.bounty = verified[id].bounty();
        d.fee = d.bounty * uint16(verified[id].fields >> 32) / ONE_BPS;
        d.submitter = jobs[id].terms.submitter();
        uint256 paid;
        for (uint256 i; i < list.length; ++i) {
            uint256 phase = list[i].fields >> 248;
            if (phase != 0 && phase != 4 && _expectSeat(d, list, list[i])) ++paid;
        }
        // Paid referees from the prepay (counted spent by `_expectSeat`), the rest back.
        disputeEscrow[id] -= d.bounty * list.length;
        if (shown[id] && !d.quorum) {
            refereesPaid[id] = paid;
            return true;
        }
        _endDispute(id, shown[id] && d.top == sealedBy[id], paid, false);
        return false;
    }

    /// A dispute's end: for the provider (the bounty, and the bond unless the arbiter
    /// lapsed, when it goes back) or against it (its seat stake slashed, the `paid`
    /// referees repaid to the submitter out of its stake, the bond back).
    function _endDispute(uint64 id, bool forProvider, uint256 paid, bool lapsed) internal {
        uint64 p = verified[id].nodeId();
        uint256 bounty = verified[id].bounty();
        uint256 fee = bounty * uint16(verified[id].fields >> 32) / ONE_BPS;
        address s = jobs[id].terms.submitter();
        holdOf[p] -= _holdOf(id);
        if (forProvider) {
            uint256 bond = lapsed ? 0 : _bond(id);
            earnedOf[p] += bounty - fee + bond;
            feesAccrued[p] += fee;
            spentOf[s] += bounty + bond;
        } else {
            _slashed(p, verified[id].seatStake());
            forfeitedOf[p] += paid * bounty;
            spentOf[s] -= paid * bounty;
        }
        disputeEscrow[id] = 0;
    }

    function _holdOf(uint64 id) internal view returns (uint256) {
        return uint256(verified[id].seatStake()) + uint256(verified[id].bounty()) * jobs[id].terms.size();
    }

    /// The first live refereed job at or after `seed` in `status`.
    function _findVerified(uint256 seed, JobStatus status) internal view returns (bool, uint64) {
        uint256 n = verifiedIds.length;
        for (uint256 k; k < n; ++k) {
            uint64 id = verifiedIds[(seed % n + k) % n];
            if (_isLive(id) && jobs[id].terms.tier() == VERIFY_REFEREED && verified[id].status() == status) {
                return (true, id);
            }
        }
        return (false, 0);
    }

    // ================================================================ actions: operators

    function registerNode(uint256 kind) external step {
        if (nodeIds.length >= MAX_NODES) return;
        _register(kind);
        _did();
    }

    function updateCapabilities(uint256 nodeSeed, uint256 kind) external step {
        uint64 nodeId = nodeIds[nodeSeed % nodeIds.length];
        vm.prank(node(nodeId).operator);
        nodes.updateCapabilities(nodeId, _capabilities(kind), "ipfs://moved");
        sync();
        _did();
    }

    function topUpStake(uint256 nodeSeed, uint96 amount) external step {
        uint64 nodeId = nodeIds[nodeSeed % nodeIds.length];
        NodeInfo memory n = node(nodeId);
        if (n.status == NodeStatus.Exiting || n.status == NodeStatus.Exited) return;
        amount = uint96(_bound(amount, 1, 1_000e6));
        vm.prank(n.operator);
        nodes.topUpStake(nodeId, amount);
        sync();
        stakeIn[nodeId] += amount;
        _did();
    }

    /// Leaves at least two nodes that are not exiting.
    function beginExit(uint256 nodeSeed) external step {
        uint64 nodeId = nodeIds[nodeSeed % nodeIds.length];
        NodeInfo memory n = node(nodeId);
        if (n.status == NodeStatus.Exiting || n.status == NodeStatus.Exited) return;
        uint256 staying;
        for (uint256 i; i < nodeIds.length; ++i) {
            NodeStatus s = node(nodeIds[i]).status;
            if (s == NodeStatus.Active || s == NodeStatus.Inactive) ++staying;
        }
        if (staying <= 2) return;
        vm.prank(n.operator);
        nodes.beginExit(nodeId);
        sync();
        _did();
    }

    function withdrawStake(uint256 nodeSeed) external step {
        uint64 nodeId = nodeIds[nodeSeed % nodeIds.length];
        NodeInfo memory n = node(nodeId);
        if (n.status != NodeStatus.Exiting || now_ < n.unbondingEndsAt || n.stake == n.lockedStake) return;
        vm.prank(n.operator);
        nodes.withdrawStake(nodeId);
        sync();
        stakeOut[nodeId] += n.stake - n.lockedStake;
        _did();
    }

    function withdrawEarnings(uint256 nodeSeed) external step {
        uint64 nodeId = nodeIds[nodeSeed % nodeIds.length];
        NodeInfo memory n = node(nodeId);
        if (n.earnings == 0) return;
        vm.prank(n.operator);
        nodes.withdrawEarnings(nodeId);
        sync();
        earningsOut[nodeId] += n.earnings;
        feesSwept[nodeId] += n.feesOwed;
        sweptTotal += n.feesOwed;
        _did();
    }

    /// Anyone brings a node's pool membership up to date.
    function syncPool(uint256 nodeSeed) external step {
        uint64[] memory ids = new uint64[](1);
        ids[0] = nodeIds[nodeSeed % nodeIds.length];
        vm.prank(stranger);
        nodes.syncPool(ids);
        NodeInfo memory n = node(ids[0]);
        bool verifiable = (n.engines >> ENGINE_WASM) & 1 == 1 || (n.engines >> DETERMINISTIC_DOCKER) & 1 == 1;
        bool rule = n.status == NodeStatus.Active && verifiable
            && n.stake - n.lockedStake >= IVerification(address(market)).poolFloor();
        assertEq(n.poolIndex != 0, rule, "after syncPool, a member exactly when it meets the rule");
        _did();
    }

    /// The admin moves the pool's floor (members are caught up by `syncPool`).
    function setVerifyParams(uint256 seed) external step {
        VerifyParams memory p = verifyParams();
        p.poolFloor = uint96(_bound(seed, p.seatFloor, 2 * STAKE));
        vm.prank(admin);
        IVerification(address(market)).setVerifyParams(p);
        _did();
    }

    // ================================================================ actions: time, lifecycles, attacks

    /// Mostly minutes; one in four up to three days (disputes lapse, stakes unbond).
    function warp(uint256 seconds_, bool long) external {
        now_ += _bound(seconds_, 1, long && seconds_ % 2 == 0 ? 3 days : 30 minutes);
        vm.warp(now_);
        _did();
    }

    /// Moves a random live job one step along a path its status allows: keeps lifecycles
    /// going deeper than uniformly picked actions would.
    function advance(uint256 seed, uint256 choice) external step {
        (bool found, uint64 id) = _find(seed, _isLive);
        if (!found) return;
        for (uint256 n = 1 + choice % 3; n > 0 && _isLive(id); --n) {
            _advance(id, choice);
            choice = uint256(keccak256(abi.encode(choice)));
        }
        _did();
    }

    function _advance(uint64 id, uint256 choice) internal {
        JobStatus s = jobs[id].state.status();
        if (s == JobStatus.Open) {
            (bool any, uint64 nodeId) = _nodeFor(id, choice);
            if (_isExpirable(id)) _expire(id);
            else if (any && choice % 8 != 0) _assign(id, nodeId, choice % 2 == 0);
            else _cancel(id);
        } else if (s == JobStatus.Assigned) {
            if (_isReclaimable(id)) _reclaim(id);
            else if (_isRejectable(id) && choice % 4 == 0) _reject(id);
            else _submit(id);
        } else if (s == JobStatus.Submitted) {
            if (_isFinalizable(id)) _finalize(id);
            else if (choice % 3 == 0) _dispute(id);
            else _accept(id);
        } else if (_isLapsed(id)) {
            _settleDispute(id);
        } else {
            _resolve(id, choice % 2 == 0);
        }
    }

    /// The attacker's move: an old state of a job (from before its last transition, or its
    /// last live state once settled), or its current one with a bit flipped, passed to
    /// every call its status names. Each must be refused.
    function replay(uint256 seed, uint8 bit) external step {
        if (jobIds.length == 0) return;
        uint64 id = jobIds[seed % jobIds.length];
        JobState memory s;
        JobStatus target;
        if (seed % 2 == 0) {
            s = previous[id];
            if (s.terms == bytes32(0)) return;
            target = s.status();
        } else {
            if (!_isLive(id)) return;
            s = JobState(jobs[id].state.terms, jobs[id].state.fields ^ (uint256(1) << bit));
            target = jobs[id].state.status();
        }
        if (_tryEverything(id, s, target)) ++accepted;
        _did();
    }

    /// The attacker's other move: with a job's true state, every call its rules forbid at
    /// this moment (too early, too late, the wrong caller, a barred, inactive or ineligible
    /// node), and a keeper's markInactive before the heartbeat timeout. Each must be refused.
    function forbidden(uint256 seed, uint256 nodeSeed) external step {
        (bool found, uint64 id) = _find(seed, _isLive);
        if (!found) return;
        if (_tryForbidden(id, nodeIds[nodeSeed % nodeIds.length])) ++accepted;
        NodeInfo memory n = node(nodeIds[nodeSeed % nodeIds.length]);
        if (n.status == NodeStatus.Active && now_ <= uint256(n.lastHeartbeat) + HEARTBEAT_TIMEOUT) {
            vm.prank(stranger);
            try nodes.markInactive(nodeIds[nodeSeed % nodeIds.length]) {
                ++accepted;
            } catch {}
        }
        _did();
    }

    // ================================================================ the steps

    function _cancel(uint64 id) internal {
        _moving(id);
        Base.cancel(id);
    }

    function _expire(uint64 id) internal {
        _moving(id);
        Base.expire(id);
    }

    function _assign(uint64 id, uint64 nodeId, bool claimed) internal {
        _moving(id);
        if (claimed) Base.claim(id, nodeId);
        else Base.assign(id, nodeId);
    }

    function _submit(uint64 id) internal {
        _moving(id);
        Base.submit(id);
    }

    function _accept(uint64 id) internal {
        _moving(id);
        _paid(id, 0);
        Base.accept(id);
    }

    function _finalize(uint64 id) internal {
        _moving(id);
        _paid(id, 0);
        vm.prank(stranger);
        market.finalize(id, jobs[id].state);
        sync();
    }

    /// A reject: charged for the time held past the grace (`rejectCharge`) of the free
    /// stake; requeued or failed.
    function _reject(uint64 id) internal {
        JobState memory before = _moving(id);
        uint64 nodeId = before.nodeId();
        uint256 held = now_ - _assignedAt(id);
        uint256 charge = rejectCharge(_slashOf(id, nodeId), held, jobs[id].terms.maxRuntime());
        _slashed(nodeId, charge);
        Base.reject(id);
        _checkRequeue(id, before, false);
    }

    /// A reclaim: one slash of the free stake; one attempt; requeued or failed.
    function _reclaim(uint64 id) internal {
        JobState memory before = _moving(id);
        uint64 nodeId = before.nodeId();
        _slashed(nodeId, _slashOf(id, nodeId));
        Base.reclaim(id);
        _checkRequeue(id, before, true);
    }

    function _dispute(uint64 id) internal {
        JobState memory before = _moving(id);
        uint64 nodeId = before.nodeId();
        uint96 exposure = uint96(_slashOf(id, nodeId));
        exposureOf[id] = exposure;
        lockedOf[nodeId] += exposure;
        Base.dispute(id);
    }

    function _resolve(uint64 id, bool providerWins) internal {
        JobState memory before = _moving(id);
        uint64 nodeId = before.nodeId();
        uint96 exposure = exposureOf[id];
        lockedOf[nodeId] -= exposure;
        if (providerWins) {
            _paid(id, _bond(id));
        } else {
            _slashed(nodeId, exposure);
        }
        Base.resolve(id, providerWins);
    }

    function _settleDispute(uint64 id) internal {
        JobState memory before = _moving(id);
        lockedOf[before.nodeId()] -= exposureOf[id];
        _paid(id, 0);
        vm.prank(stranger);
        market.settleDispute(id, jobs[id].terms, jobs[id].state);
        sync();
    }

    // ================================================================ the model's rules

    /// Records the state a job leaves, for `replay`.
    function _moving(uint64 id) internal returns (JobState memory before) {
        before = jobs[id].state;
        previous[id] = before;
    }

    /// The job's node is paid the bounty less the policy's fee (plus `bond`, a dispute won);
    /// its submitter spent the bounty (and the bond).
    function _paid(uint64 id, uint256 bond) internal {
        uint64 nodeId = jobs[id].state.nodeId();
        uint256 bounty = jobs[id].state.bounty();
        uint256 fee = bounty * policies[jobs[id].terms.policy()].feeBps / ONE_BPS;
        earnedOf[nodeId] += bounty - fee + bond;
        feesAccrued[nodeId] += fee;
        spentOf[jobs[id].terms.submitter()] += bounty + bond;
    }

    function _slashed(uint64 nodeId, uint256 amount) internal {
        slashedOf[nodeId] += amount;
        slashedTotal += amount;
    }

    /// One slash, under the job's policy, of the node's stake not held for disputes.
    function _slashOf(uint64 id, uint64 nodeId) internal view returns (uint256) {
        NodeInfo memory n = node(nodeId);
        return uint256(n.stake - n.lockedStake) * policies[jobs[id].terms.policy()].slashBps / ONE_BPS;
    }

    /// After a reject or a reclaim: the node is barred; the job is Open again, or Failed when
    /// out of attempts (faults, or 255 barred nodes) or when no attempt fits.
    function _checkRequeue(uint64 id, JobState memory before, bool fault) internal view {
        JobTerms memory t = jobs[id].terms;
        uint8 faults = before.faults() + (fault ? 1 : 0);
        uint8 barred = before.barred() == type(uint8).max ? type(uint8).max : before.barred() + 1;
        JobStatus expected = faults >= policies[t.policy()].maxAttempts || barred == type(uint8).max
            || now_ + t.maxRuntime() > t.deadline()
            ? JobStatus.Failed
            : JobStatus.Open;
        assertEq(uint8(jobs[id].state.status()), uint8(expected), "requeued or failed, as the rules say");
        assertTrue(market.isBarred(id, before.nodeId()), "barred");
        if (expected == JobStatus.Open) {
            assertEq(jobs[id].state.faults(), faults, "faults");
            assertEq(jobs[id].state.barred(), barred, "barred count");
        }
    }

    function _bond(uint64 id) internal view returns (uint96) {
        uint96 share = uint96(uint256(jobs[id].terms.bounty()) * 1_000 / ONE_BPS);
        uint96 floor = policies[jobs[id].terms.policy()].disputeBond;
        return share > floor ? share : floor;
    }

    function _assignedAt(uint64 id) internal view returns (uint256) {
        return jobs[id].state.until() - jobs[id].terms.maxRuntime();
    }

    // ================================================================ predicates

    function _isLive(uint64 id) internal view returns (bool) {
        JobStatus s = jobs[id].state.status();
        return s != JobStatus.None && !JobView.isSettled(s);
    }

    function _isOpen(uint64 id) internal view returns (bool) {
        return jobs[id].state.status() == JobStatus.Open;
    }

    function _isAssignable(uint64 id) internal view returns (bool) {
        return _isOpen(id) && now_ + jobs[id].terms.maxRuntime() <= jobs[id].terms.deadline();
    }

    function _isExpirable(uint64 id) internal view returns (bool) {
        return _isOpen(id) && now_ + jobs[id].terms.maxRuntime() > jobs[id].terms.deadline();
    }

    function _isAnswerable(uint64 id) internal view returns (bool) {
        return jobs[id].state.status() == JobStatus.Assigned && now_ <= jobs[id].state.until();
    }

    function _isRejectable(uint64 id) internal view returns (bool) {
        return _isAnswerable(id) && node(jobs[id].state.nodeId()).inactiveSince < _assignedAt(id);
    }

    function _isReclaimable(uint64 id) internal view returns (bool) {
        if (jobs[id].state.status() != JobStatus.Assigned) return false;
        return now_ > jobs[id].state.until() || node(jobs[id].state.nodeId()).inactiveSince >= _assignedAt(id);
    }

    function _isSubmitted(uint64 id) internal view returns (bool) {
        return jobs[id].state.status() == JobStatus.Submitted;
    }

    function _isDisputable(uint64 id) internal view returns (bool) {
        return _isSubmitted(id) && now_ < jobs[id].state.until();
    }

    function _isFinalizable(uint64 id) internal view returns (bool) {
        return _isSubmitted(id) && now_ >= jobs[id].state.until();
    }

    function _isResolvable(uint64 id) internal view returns (bool) {
        return jobs[id].state.status() == JobStatus.Disputed && now_ < jobs[id].state.until();
    }

    function _isLapsed(uint64 id) internal view returns (bool) {
        return jobs[id].state.status() == JobStatus.Disputed && now_ >= jobs[id].state.until();
    }

    /// Takes `action` on the first job at or after `seed` that `pred` holds for, if any.
    function _onJob(uint256 seed, function(uint64) internal view returns (bool) pred, function(uint64) internal action)
        internal
    {
        (bool found, uint64 id) = _find(seed, pred);
        if (!found) return;
        action(id);
        _did();
    }

    /// The first job at or after `seed` (cyclically) that `pred` holds for.
    function _find(uint256 seed, function(uint64) internal view returns (bool) pred)
        internal
        view
        returns (bool, uint64)
    {
        uint256 n = jobIds.length;
        if (n == 0) return (false, 0);
        uint256 start = seed % n;
        for (uint256 k; k < n; ++k) {
            uint64 id = jobIds[(start + k) % n];
            if (pred(id)) return (true, id);
        }
        return (false, 0);
    }

    /// The first node at or after `seed` (cyclically) that may take the job: Active, not
    /// barred from it, and meeting every requirement (the contract's rule, mirrored).
    function _nodeFor(uint64 id, uint256 seed) internal view returns (bool, uint64) {
        uint256 n = nodeIds.length;
        uint256 start = seed % n;
        for (uint256 k; k < n; ++k) {
            uint64 nodeId = nodeIds[(start + k) % n];
            if (node(nodeId).status != NodeStatus.Active || market.isBarred(id, nodeId)) continue;
            if (_eligible(jobs[id].terms, capsOf[nodeId])) return (true, nodeId);
        }
        return (false, 0);
    }

    function _eligible(JobTerms memory t, NodeCapabilities memory c) internal pure returns (bool) {
        if ((c.engines >> uint8(t.limits >> 208)) & 1 == 0) return false;
        if (t.gpuModel != bytes32(0) && t.gpuModel != c.gpuModel) return false;
        return c.gpuCount >= uint16(t.limits >> 120) && c.vramMiB >= uint32(t.limits >> 88)
            && c.cpuCores >= uint16(t.limits >> 72) && c.ramMiB >= uint32(t.limits >> 40)
            && c.pricePerGpuHour <= t.maxPricePerGpuHour;
    }

    // ================================================================ the attacker's calls

    /// Every call of a job in `status_`, with the state `s`: true if any was accepted.
    function _tryEverything(uint64 id, JobState memory s, JobStatus status_) internal returns (bool) {
        JobTerms memory t = jobs[id].terms;
        address who = t.submitter();
        address nodeAgent = agentOf[s.nodeId()];
        if (status_ == JobStatus.Open) {
            if (_accepted(who, abi.encodeCall(market.cancel, (id, t, s)))) return true;
            if (_accepted(stranger, abi.encodeCall(market.expire, (id, t, s)))) return true;
            if (_accepted(matcher, abi.encodeCall(market.assign, (id, nodeIds[0], t, s)))) return true;
        } else if (status_ == JobStatus.Assigned) {
            if (_accepted(nodeAgent, abi.encodeCall(market.submitResult, (id, s, bytes32(0), "")))) return true;
            if (_accepted(nodeAgent, abi.encodeCall(market.reject, (id, t, s, "")))) return true;
            if (_accepted(stranger, abi.encodeCall(market.reclaim, (id, t, s)))) return true;
        } else if (status_ == JobStatus.Submitted) {
            if (_accepted(stranger, abi.encodeCall(market.finalize, (id, s)))) return true;
            if (_accepted(who, abi.encodeCall(market.accept, (id, t, s)))) return true;
            if (_accepted(who, abi.encodeCall(market.dispute, (id, t, s)))) return true;
        } else if (status_ == JobStatus.Disputed) {
            if (_accepted(arbiter, abi.encodeCall(market.resolve, (id, t, s, true)))) return true;
            if (_accepted(stranger, abi.encodeCall(market.settleDispute, (id, t, s)))) return true;
        }
        return false;
    }

    function _tryForbidden(uint64 id, uint64 nodeId) internal returns (bool) {
        JobTerms memory t = jobs[id].terms;
        JobState memory s = jobs[id].state;
        JobStatus status_ = s.status();
        if (status_ == JobStatus.Open) {
            bool mayTake = _isAssignable(id) && node(nodeId).status == NodeStatus.Active && !market.isBarred(id, nodeId)
                && _eligible(t, capsOf[nodeId]);
            if (!mayTake) {
                if (_accepted(matcher, abi.encodeCall(market.assign, (id, nodeId, t, s)))) return true;
                if (_accepted(agentOf[nodeId], abi.encodeCall(market.claim, (id, nodeId, t, s)))) return true;
            }
            if (_accepted(stranger, abi.encodeCall(market.claim, (id, nodeId, t, s)))) return true; // not the node's agent
            if (!_isExpirable(id) && _accepted(abi.encodeCall(market.expire, (id, t, s)))) return true;
            if (_accepted(stranger, abi.encodeCall(market.cancel, (id, t, s)))) return true;
        } else if (status_ == JobStatus.Assigned) {
            address nodeAgent = agentOf[s.nodeId()];
            bytes memory answer = abi.encodeCall(market.submitResult, (id, s, bytes32(0), ""));
            bytes memory giveBack = abi.encodeCall(market.reject, (id, t, s, ""));
            if (!_isAnswerable(id) && _accepted(nodeAgent, answer)) return true;
            if (!_isRejectable(id) && _accepted(nodeAgent, giveBack)) return true;
            if (!_isReclaimable(id) && _accepted(abi.encodeCall(market.reclaim, (id, t, s)))) return true;
            if (_accepted(stranger, answer)) return true;
            if (_accepted(stranger, giveBack)) return true;
        } else if (status_ == JobStatus.Submitted) {
            bytes memory dispute_ = abi.encodeCall(market.dispute, (id, t, s));
            if (!_isDisputable(id) && _accepted(t.submitter(), dispute_)) return true;
            if (!_isFinalizable(id) && _accepted(abi.encodeCall(market.finalize, (id, s)))) return true;
            if (_accepted(stranger, abi.encodeCall(market.accept, (id, t, s)))) return true;
            if (_accepted(stranger, dispute_)) return true;
        } else if (status_ == JobStatus.Disputed) {
            bytes memory decide = abi.encodeCall(market.resolve, (id, t, s, false));
            if (!_isResolvable(id) && _accepted(arbiter, decide)) return true;
            if (!_isLapsed(id) && _accepted(abi.encodeCall(market.settleDispute, (id, t, s)))) return true;
            if (_accepted(stranger, abi.encodeCall(market.resolve, (id, t, s, true)))) return true;
        }
        return false;
    }

    /// The market's answer to `call` (from the handler): true if it was accepted.
    function _accepted(bytes memory call) internal returns (bool ok) {
        (ok,) = address(market).call(call);
    }

    /// The market's answer to `who`'s `call`: true if it was accepted.
    function _accepted(address who, bytes memory call) internal returns (bool) {
        vm.prank(who);
        return _accepted(call);
    }

    // ================================================================ fixtures

    function _register(uint256 kind) internal {
        uint256 i = nodeIds.length;
        address owner = makeAddr(string.concat("node operator ", vm.toString(i)));
        fund(owner, 1e15);
        uint64 nodeId = Base.registerNode(owner, 0xA0000 + i, _capabilities(kind), STAKE);
        nodeIds.push(nodeId);
        stakeIn[nodeId] = STAKE;
    }

    /// An H100 box running both engines, an A100 box running Docker, a CPU-only box
    /// running WASM (no Docker), a CPU-only box running Docker in the deterministic sandbox.
    function _capabilities(uint256 kind) internal pure returns (NodeCapabilities memory c) {
        kind %= 4;
        if (kind == 0) return h100Node();
        if (kind == 1) return NodeCapabilities(A100, 4, 40_960, 32, 256_000, 1e6, 4, DOCKER_ONLY);
        if (kind == 2) return NodeCapabilities(bytes32(0), 0, 0, 16, 64_000, 0, 1, WASM_ONLY);
        return NodeCapabilities(bytes32(0), 0, 0, 16, 64_000, 0, 1, SANDBOXED);
    }

    /// An H100 job, any GPU with 30 GiB, a CPU job on Docker, a cheap GPU job, a WASM job.
    function _requirements(uint256 kind) internal pure returns (JobRequirements memory r) {
        kind %= 5;
        if (kind == 0) return h100Job();
        if (kind == 1) return JobRequirements(bytes32(0), 1, 30_000, 8, 64_000, 3e6, 0, 5, ENGINE_DOCKER);
        if (kind == 2) return JobRequirements(bytes32(0), 0, 0, 4, 8_000, 3e6, 0, 1, ENGINE_DOCKER);
        if (kind == 3) return JobRequirements(bytes32(0), 1, 1, 1, 1, 1e6, 0, 10, ENGINE_DOCKER);
        return JobRequirements(bytes32(0), 0, 0, 2, 1_000, 0, 0, 3, ENGINE_WASM);
    }

    function wasmJobOf() internal pure returns (JobRequirements memory r) {
        r = _requirements(4);
        r.maxRuntime = RUNTIME;
    }

    /// A CPU Docker job, verified by replication on sandboxed nodes.
    function dockerJobOf() internal pure returns (JobRequirements memory r) {
        r = wasmJobOf();
        r.engine = ENGINE_DOCKER;
    }

    /// Pool members that take seats of `engine`'s jobs (the contract's `_poolKinds`).
    function _poolMembersFor(uint8 engine) internal view returns (uint256 members) {
        uint8 bit = engine == ENGINE_WASM ? ENGINE_WASM : DETERMINISTIC_DOCKER;
        for (uint256 i; i < nodeIds.length; ++i) {
            NodeInfo memory n = node(nodeIds[i]);
            if (n.poolIndex != 0 && (n.engines >> bit) & 1 == 1) ++members;
        }
    }

    function _did() internal {
        calls[msg.sig]++;
    }
}
