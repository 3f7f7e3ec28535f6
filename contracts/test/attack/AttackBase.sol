// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {JobRequirements, JobState, JobStatus, JobTerms, NodeInfo} from "../../src/types/Types.sol";

/// @notice What the attack classes share: the attacker's own nodes and submitters, and the
/// figures the rules promise (one slash, one fee), on top of `Base`'s fold and replay.
abstract contract AttackBase is Base {
    using JobView for JobTerms;
    using JobView for JobState;

    /// One slash of a fresh node's stake.
    uint96 internal constant SLASH = STAKE * SLASH_BPS / 10_000;
    /// The protocol fee of one default bounty.
    uint96 internal constant FEE = BOUNTY * FEE_BPS / 10_000;
    /// A block, as the worker sees its assignment one block after it.
    uint256 internal constant BLOCK = 12;

    /// Registers an H100 node for a fresh operator `name`, served by the agent of `agentKey`
    /// (which consents with its signature).
    function nodeOf(string memory name, uint256 agentKey) internal returns (uint64 nodeId) {
        address owner = makeAddr(name);
        fund(owner, 10_000e6);
        nodeId = registerNode(owner, agentKey, h100Node(), STAKE);
    }

    /// Registers an H100 node whose operator is its own agent (consent by calling): the
    /// cheapest way for an attacker to field many nodes.
    function selfNode(uint256 i) internal returns (uint64 nodeId) {
        address owner = vm.addr(0x5E1F_0000 + i);
        fund(owner, STAKE);
        vm.prank(owner);
        nodeId = nodes.register(h100Node(), "", STAKE, owner, 0, "");
        sync();
    }

    /// A funded submitter whose credits the replay tracks.
    function newSubmitter(string memory name) internal returns (address who) {
        who = makeAddr(name);
        fund(who, 10_000e6);
        accounts.push(who);
    }

    function postAs(address who, JobRequirements memory requirements, uint96 bounty, uint40 deadline)
        internal
        returns (uint64 jobId)
    {
        vm.prank(who);
        jobId = market.postJob(requirements, bounty, deadline, spec());
        sync();
    }

    function runtimeJob(uint32 maxRuntime) internal pure returns (JobRequirements memory r) {
        r = h100Job();
        r.maxRuntime = maxRuntime;
    }

    /// What `account` holds in and out of the market: its tokens and its credits.
    function wealth(address account) internal view returns (uint256) {
        return token.balanceOf(account) + market.creditOf(account);
    }

    /// One slash of the node's stake not held for disputes.
    function freeSlash(uint64 nodeId) internal view returns (uint96) {
        NodeInfo memory n = node(nodeId);
        return uint96(uint256(n.stake - n.lockedStake) * SLASH_BPS / 10_000);
    }

    function assignedAt(uint64 jobId) internal view returns (uint40) {
        return jobs[jobId].state.until() - jobs[jobId].terms.maxRuntime();
    }

    function untilOf(uint64 jobId) internal view returns (uint40) {
        return jobs[jobId].state.until();
    }

    function bondOf(uint64 jobId) internal view returns (uint96) {
        uint96 share = jobs[jobId].terms.bounty() / 10;
        uint96 floor = policies[jobs[jobId].terms.policy()].disputeBond;
        return share > floor ? share : floor;
    }

    /// The node holds `expected` of stake, and the replayed balances agree with the market's.
    function assertStakeAndReplay(uint64 nodeId, uint256 expected) internal view {
        assertEq(node(nodeId).stake, expected);
        assertReplay();
    }

    function assertStatus(uint64 jobId, JobStatus expected) internal view {
        assertEq(uint8(status(jobId)), uint8(expected), "status");
    }

    /// An honest node of another operator (`name`) takes the job, runs it and is paid the
    /// bounty less the fee.
    function runOnAnotherNode(uint64 jobId, string memory name) internal returns (uint64 other) {
        other = nodeOf(name, OTHER_AGENT_KEY);
        claim(jobId, other);
        submit(jobId);
        finalize(jobId);
        assertEq(node(other).earnings, BOUNTY - FEE);
    }

    /// A job claimed by a fresh node: (jobId, nodeId).
    function claimedJob() internal returns (uint64 jobId, uint64 nodeId) {
        nodeId = registerNode();
        jobId = postJob();
        claim(jobId, nodeId);
    }

    /// A job the matcher assigned to a fresh node: (jobId, nodeId).
    function assignedJob() internal returns (uint64 jobId, uint64 nodeId) {
        nodeId = registerNode();
        jobId = postJob();
        assign(jobId, nodeId);
    }

    /// The node misses its heartbeats: once the timeout is over, a keeper marks it Inactive.
    function goSilent(uint64 nodeId) internal {
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT + 1);
        markInactive(nodeId, stranger);
    }

    function rejectAt(uint64 jobId, uint256 at) internal {
        vm.warp(at);
        reject(jobId);
    }
}
