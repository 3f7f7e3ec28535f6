// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_PostedJob_Test} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Expire_Test is JobMarket_PostedJob_Test {
    function expire(uint64 id) internal {
        vm.prank(stranger);
        market.expire(id);
    }

    function expectExpired(uint64 nodeId, uint256 refund, uint96 slashed) internal {
        expectMarketEmit();
        emit IJobMarket.JobExpired(jobId, nodeId, refund, slashed);
    }

    function expectDeadlineNotPassed() internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DeadlineNotPassed.selector, jobId, deadline));
    }

    /// Assigns the job to a freshly registered node and lets it submit its result.
    function submitForJob() internal {
        assignJob(jobId, registerNode());
        submitJob(jobId);
    }

    function test_Expire_RefundsOpenJob() external {
        vm.warp(deadline);
        expectExpired(0, BOUNTY, 0);
        expire(jobId);

        assertStatus(jobId, JobStatus.Expired);
        assertEq(market.creditOf(submitter), BOUNTY);
        assertEq(market.creditOf(stranger), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

    function test_Expire_RefundsAndSlashesAssignedJob() external {
        uint64 nodeId = registerNode();
        assignJob(jobId, nodeId);
        vm.warp(deadline);
        uint256 refund = uint256(BOUNTY) + SLASH;

        expectExpired(nodeId, refund, SLASH);
        expire(jobId);

        assertStatus(jobId, JobStatus.Expired);
        assertEq(market.creditOf(submitter), refund);
        assertEq(token.balanceOf(address(market)), refund);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        assertEq(nodeOf(nodeId).stake, STAKE - SLASH);
        assertEq(nodeOf(nodeId).totalSlashed, SLASH);
    }

    function test_Expire_RequeuedJobNamesNoNode() external {
        uint64 nodeId = registerNode();
        assignAndReject(jobId, nodeId);
        vm.warp(deadline);
        expectExpired(0, BOUNTY, 0);
        expire(jobId);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }

    function test_Expire_LongAfterDeadline() external {
        vm.warp(uint256(deadline) + 365 days);
        expire(jobId);
        assertStatus(jobId, JobStatus.Expired);
    }

    function test_RevertWhen_DeadlineNotPassed() external {
        expectDeadlineNotPassed();
        expire(jobId);
    }

    function test_RevertWhen_OneSecondBeforeDeadline() external {
        vm.warp(deadline - 1);
        expectDeadlineNotPassed();
        expire(jobId);
    }

    function test_RevertWhen_AssignedBeforeDeadline() external {
        assignJob(jobId, registerNode());
        vm.warp(deadline - 1);
        expectDeadlineNotPassed();
        expire(jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        expectUnknownJob(99);
        expire(99);
    }

    function test_RevertWhen_JobSubmitted() external {
        submitForJob();
        vm.warp(deadline);
        expectWrongStatus(JobStatus.Submitted);
        expire(jobId);
    }

    function test_RevertWhen_JobDisputed() external {
        submitForJob();
        disputeJob(jobId);
        vm.warp(deadline);
        expectWrongStatus(JobStatus.Disputed);
        expire(jobId);
    }

    function test_RevertWhen_JobCancelled() external {
        vm.prank(submitter);
        market.cancel(jobId);
        vm.warp(deadline);
        expectWrongStatus(JobStatus.Cancelled);
        expire(jobId);
    }

    function test_RevertWhen_ExpiredTwice() external {
        vm.warp(deadline);
        expire(jobId);
        expectWrongStatus(JobStatus.Expired);
        expire(jobId);
        assertEq(market.creditOf(submitter), BOUNTY);
    }
}
