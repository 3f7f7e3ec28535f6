// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../../Base.t.sol";
import {JobView} from "../../JobView.sol";
import {JobMarket} from "../../../src/JobMarket.sol";
import {JobRequirements, JobState, JobStatus, JobTerms, NodeInfo, NodeStatus} from "../../../src/types/Types.sol";

/// @notice Drives random sequences of valid calls against the market (any participant:
/// submitter, matcher, agents, keepers, arbiter), keeping the fold and the replayed
/// balances of `Base` as it goes. Each action picks a target its rules allow, or does
/// nothing, so that no call reverts.
contract MarketHandler is Base {
    using JobView for JobTerms;
    using JobView for JobState;

    uint64[] internal jobIds;
    uint64[] internal nodeIds;
    /// Time, tracked here: a test's `block.timestamp` may be stale after warps.
    uint256 public now_;
    /// Everything the submitter put in (bounties and bonds): its credits never exceed it.
    uint256 public paidIn;
    mapping(uint64 nodeId => uint256) public stakeIn;
    mapping(bytes4 action => uint256) public calls;
    uint256 internal withdrawn;

    constructor() {
        setUp();
        now_ = block.timestamp;
        fund(submitter, 1e15);
        for (uint256 i; i < 3; ++i) {
            _register(i);
        }
    }

    // ---------------------------------------------------------------- views for invariants

    function jobCount() external view returns (uint256) {
        return jobIds.length;
    }

    function nodeCount() external view returns (uint256) {
        return nodeIds.length;
    }

    function jobAt(uint256 i) external view returns (uint64, JobTerms memory, JobState memory) {
        uint64 id = jobIds[i];
        return (id, jobs[id].terms, jobs[id].state);
    }

    function nodeAt(uint256 i) external view returns (uint64) {
        return nodeIds[i];
    }

    function checkReplay() external view {
        assertReplay();
    }

    function theMarket() external view returns (JobMarket) {
        return market;
    }

    function nodeInfo(uint64 nodeId) external view returns (NodeInfo memory) {
        return node(nodeId);
    }

    /// What the submitter holds or took out of the market: credits plus withdrawals.
    function submitterGot() external view returns (uint256) {
        return market.creditOf(submitter) + withdrawn;
    }

    // ---------------------------------------------------------------- actions

    function warp(uint256 seconds_) external {
        now_ += bound(seconds_, 1, 2 hours);
        vm.warp(now_);
        calls[this.warp.selector]++;
    }

    function post(uint96 bounty, uint32 runtime, uint32 slack) external {
        bounty = uint96(bound(bounty, 1e6, 1_000e6));
        runtime = uint32(bound(runtime, 60, 4 hours));
        slack = uint32(bound(slack, 0, 8 hours));
        JobRequirements memory requirements = h100Job();
        requirements.maxRuntime = runtime;
        uint64 id = postJob(requirements, bounty, uint40(now_ + runtime + slack));
        jobIds.push(id);
        paidIn += bounty;
        calls[this.post.selector]++;
    }

    function registerMore(uint256 seed) external {
        if (nodeIds.length >= 8) return;
        _register(bound(seed, 3, 1_000) + nodeIds.length * 1_000);
        calls[this.registerMore.selector]++;
    }

    function assignOrClaim(uint256 jobSeed, uint256 nodeSeed, bool claimIt) external {
        (bool found, uint64 jobId) = _job(jobSeed, JobStatus.Open);
        if (!found) return;
        JobTerms memory t = jobs[jobId].terms;
        if (now_ + t.maxRuntime() > t.deadline()) return;
        uint64 nodeId = nodeIds[bound(nodeSeed, 0, nodeIds.length - 1)];
        if (node(nodeId).status != NodeStatus.Active || market.isBarred(jobId, nodeId)) return;
        if (claimIt) claim(jobId, nodeId);
        else assign(jobId, nodeId);
        calls[this.assignOrClaim.selector]++;
    }

    function submitOrReject(uint256 jobSeed, bool rejectIt) external {
        (bool found, uint64 jobId) = _job(jobSeed, JobStatus.Assigned);
        if (!found) return;
        JobState memory s = jobs[jobId].state;
        if (now_ > s.until()) return;
        if (rejectIt) {
            uint256 assignedAt = s.until() - jobs[jobId].terms.maxRuntime();
            if (node(s.nodeId()).inactiveSince >= assignedAt) return;
            reject(jobId);
        } else {
            submit(jobId);
        }
        calls[this.submitOrReject.selector]++;
    }

    function reclaimIt(uint256 jobSeed) external {
        (bool found, uint64 jobId) = _job(jobSeed, JobStatus.Assigned);
        if (!found) return;
        JobState memory s = jobs[jobId].state;
        uint256 assignedAt = s.until() - jobs[jobId].terms.maxRuntime();
        if (now_ <= s.until() && node(s.nodeId()).inactiveSince < assignedAt) return;
        reclaim(jobId);
        calls[this.reclaimIt.selector]++;
    }

    function settle(uint256 jobSeed, uint8 how) external {
        (bool found, uint64 jobId) = _job(jobSeed, JobStatus.Submitted);
        if (!found) return;
        uint40 until = jobs[jobId].state.until();
        how = how % 3;
        if (how == 0 && now_ >= until) {
            market.finalize(jobId, jobs[jobId].state);
            sync();
        } else if (how == 1) {
            accept(jobId);
        } else if (now_ < until) {
            dispute(jobId);
            paidIn += _bond(jobId);
        } else {
            return;
        }
        calls[this.settle.selector]++;
    }

    function endDispute(uint256 jobSeed, bool providerWins) external {
        (bool found, uint64 jobId) = _job(jobSeed, JobStatus.Disputed);
        if (!found) return;
        if (now_ < jobs[jobId].state.until()) {
            resolve(jobId, providerWins);
        } else {
            vm.prank(stranger);
            market.settleDispute(jobId, jobs[jobId].terms, jobs[jobId].state);
            sync();
        }
        calls[this.endDispute.selector]++;
    }

    function cancelOrExpire(uint256 jobSeed) external {
        (bool found, uint64 jobId) = _job(jobSeed, JobStatus.Open);
        if (!found) return;
        JobTerms memory t = jobs[jobId].terms;
        if (now_ + t.maxRuntime() > t.deadline()) expire(jobId);
        else cancel(jobId);
        calls[this.cancelOrExpire.selector]++;
    }

    function liveness(uint256 nodeSeed, bool beat) external {
        uint64 nodeId = nodeIds[bound(nodeSeed, 0, nodeIds.length - 1)];
        NodeInfo memory n = node(nodeId);
        if (beat) {
            vm.prank(agentOf[nodeId]);
            nodes.heartbeat(nodeId);
        } else if (n.status == NodeStatus.Active && now_ > uint256(n.lastHeartbeat) + HEARTBEAT_TIMEOUT) {
            vm.prank(stranger);
            nodes.markInactive(nodeId);
        } else {
            return;
        }
        sync();
        calls[this.liveness.selector]++;
    }

    function withdrawals(uint256 nodeSeed) external {
        uint256 credits = market.creditOf(submitter);
        if (credits != 0) {
            vm.prank(submitter);
            market.withdraw();
            withdrawn += credits;
        }
        uint64 nodeId = nodeIds[bound(nodeSeed, 0, nodeIds.length - 1)];
        if (node(nodeId).earnings != 0) {
            vm.prank(node(nodeId).operator);
            nodes.withdrawEarnings(nodeId);
        }
        sync();
        calls[this.withdrawals.selector]++;
    }

    // ---------------------------------------------------------------- internal

    function _register(uint256 i) internal {
        address owner = makeAddr(string(abi.encode("operator", i)));
        fund(owner, 1e12);
        accounts.push(owner);
        uint64 nodeId = registerNode(owner, 0x5000 + i, h100Node(), STAKE);
        nodeIds.push(nodeId);
        stakeIn[nodeId] = STAKE;
    }

    /// The first job at or after `seed` (cyclically) with `wanted` status.
    function _job(uint256 seed, JobStatus wanted) internal view returns (bool, uint64) {
        uint256 n = jobIds.length;
        if (n == 0) return (false, 0);
        uint256 start = seed % n;
        for (uint256 k; k < n; ++k) {
            uint64 id = jobIds[(start + k) % n];
            if (jobs[id].state.status() == wanted) return (true, id);
        }
        return (false, 0);
    }

    function _bond(uint64 jobId) internal view returns (uint256) {
        uint256 share = uint256(jobs[jobId].terms.bounty()) / 10;
        return share > DISPUTE_BOND ? share : DISPUTE_BOND;
    }
}
