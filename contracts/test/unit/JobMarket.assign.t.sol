// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarket_Assignment_Shared} from "./JobMarket.assignment.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {
    JobInfo,
    JobRequirements,
    JobStatus,
    MarketParams,
    NodeCapabilities,
    NodeStatus
} from "../../src/types/Types.sol";

contract JobMarket_Assign_Test is JobMarket_Assignment_Shared {
    function take(uint64 id, uint64 node) internal override {
        assignJob(id, node);
    }

    function test_Assign_AssignsJob() external {
        uint40 now40 = uint40(block.timestamp);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 1, false, now40);
        assignJob(jobId, nodeId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Assigned));
        assertEq(job.attempts, 1);
        assertEq(job.nodeId, nodeId);
        assertEq(job.assignedAt, now40);
        assertEq(job.challengeEndsAt, 0);
        assertEq(job.bounty, BOUNTY);
        assertNodeCounters(nodeId, 1, 0, 0, 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

    /// The admin lowered maxAttempts after the job was requeued: no attempt is left.
    function test_RevertWhen_NoAttemptsLeft() external {
        assignJob(jobId, nodeId);
        vm.prank(agent);
        market.reject(jobId, "bad input");
        MarketParams memory p = marketParams();
        p.maxAttempts = 1;
        setMarketParams(p);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NoAttemptsLeft.selector, jobId, uint8(1)));
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_CallerNotMatcher() external {
        bytes32 role = market.MATCHER_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, agent, role));
        vm.prank(agent);
        market.assign(jobId, nodeId);
    }
}
