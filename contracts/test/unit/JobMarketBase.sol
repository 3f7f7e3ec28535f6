// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobInfo, NodeInfo} from "../../src/types/Types.sol";
import {Base} from "../Base.t.sol";
import {
    JobInfo,
    JobRequirements,
    JobStatus,
    MarketParams,
    NodeCapabilities,
    NodeInfo,
    NodeStatus
} from "../../src/types/Types.sol";

/// @notice Helpers shared by the JobMarket unit tests.
abstract contract JobMarketBase is Base {
    uint96 internal constant SLASH = uint96((uint256(STAKE) * SLASH_BPS) / 10_000);

    function jobOf(uint64 jobId) internal view returns (JobInfo memory) {
        return market.getJob(jobId);
    }

    function nodeOf(uint64 nodeId) internal view returns (NodeInfo memory) {
        return registry.getNode(nodeId);
    }

    function statusOf(uint64 jobId) internal view returns (JobStatus) {
        return market.getJob(jobId).status;
    }

    function assertStatus(uint64 jobId, JobStatus expected) internal view {
        assertEq(uint8(market.getJob(jobId).status), uint8(expected), "job status");
    }

    function assertNodeCounters(
        uint64 nodeId,
        uint256 activeJobs,
        uint256 settlingJobs,
        uint256 completedJobs,
        uint256 failedJobs
    ) internal view {
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.activeJobs, activeJobs, "activeJobs");
        assertEq(node.settlingJobs, settlingJobs, "settlingJobs");
        assertEq(node.completedJobs, completedJobs, "completedJobs");
        assertEq(node.failedJobs, failedJobs, "failedJobs");
    }

    /// The slash of a node with `stake` at the fixture's slash rate.
    function slashOf(uint96 stake) internal pure returns (uint96) {
        return uint96((uint256(stake) * SLASH_BPS) / 10_000);
    }

    /// Registers a node of `operator` run by `agent` with the given capabilities.
    function registerNodeWith(NodeCapabilities memory capabilities) internal returns (uint64 nodeId) {
        vm.prank(operator);
        nodeId = registry.register(agent, capabilities, "ipfs://node-meta", STAKE);
    }

    function postJobWith(JobRequirements memory requirements) internal returns (uint64 jobId) {
        vm.prank(submitter);
        jobId = market.postJob(requirements, BOUNTY, uint40(block.timestamp + 1 days), specJson());
    }

    function postJobWithDeadline(uint40 deadline) internal returns (uint64 jobId) {
        vm.prank(submitter);
        jobId = market.postJob(h100Job(), BOUNTY, deadline, specJson());
    }

    /// Warps past the node's heartbeat timeout and marks it Inactive.
    function makeInactive(uint64 nodeId) internal {
        uint256 expiresAt = uint256(registry.getNode(nodeId).lastHeartbeat) + HEARTBEAT_TIMEOUT;
        if (block.timestamp <= expiresAt) vm.warp(expiresAt + 1);
        registry.markInactive(nodeId);
        assertEq(uint8(registry.statusOf(nodeId)), uint8(NodeStatus.Inactive));
    }

    function heartbeat(uint64 nodeId) internal {
        vm.prank(registry.agentOf(nodeId));
        registry.heartbeat(nodeId);
    }

    function beginExit(uint64 nodeId) internal {
        vm.prank(operator);
        registry.beginExit(nodeId);
    }

    function disputeJob(uint64 jobId) internal {
        vm.prank(submitter);
        market.dispute(jobId);
    }

    function setMarketParams(MarketParams memory p) internal {
        vm.prank(admin);
        market.setParams(p);
    }

    function pauseMarket() internal {
        vm.prank(pauser);
        market.pause();
    }
}
