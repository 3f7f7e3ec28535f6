// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Expire_Test is JobMarketBase {
    uint64 internal jobId;
    uint40 internal deadline;

    function setUp() public override {
        super.setUp();
        jobId = postJob();
        deadline = jobOf(jobId).deadline;
    }

    function expire(uint64 id) internal {
        vm.prank(stranger);
        market.expire(id);
    }

    function test_Expire_RefundsOpenJob() external {
        vm.warp(deadline);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobExpired(jobId, 0, BOUNTY, 0);
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

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobExpired(jobId, nodeId, refund, SLASH);
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
        assignJob(jobId, nodeId);
        vm.prank(agent);
        market.reject(jobId, "bad input");
        vm.warp(deadline);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobExpired(jobId, 0, BOUNTY, 0);
        expire(jobId);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }

    function test_Expire_LongAfterDeadline() external {
        vm.warp(uint256(deadline) + 365 days);
        expire(jobId);
        assertStatus(jobId, JobStatus.Expired);
    }

    function test_RevertWhen_DeadlineNotPassed() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DeadlineNotPassed.selector, jobId, deadline));
        expire(jobId);
    }

    function test_RevertWhen_OneSecondBeforeDeadline() external {
        vm.warp(deadline - 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DeadlineNotPassed.selector, jobId, deadline));
        expire(jobId);
    }

    function test_RevertWhen_AssignedBeforeDeadline() external {
        assignJob(jobId, registerNode());
        vm.warp(deadline - 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DeadlineNotPassed.selector, jobId, deadline));
        expire(jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        expire(99);
    }

    function test_RevertWhen_JobSubmitted() external {
        assignJob(jobId, registerNode());
        submitJob(jobId);
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Submitted));
        expire(jobId);
    }

    function test_RevertWhen_JobDisputed() external {
        assignJob(jobId, registerNode());
        submitJob(jobId);
        disputeJob(jobId);
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Disputed));
        expire(jobId);
    }

    function test_RevertWhen_JobCancelled() external {
        vm.prank(submitter);
        market.cancel(jobId);
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Cancelled));
        expire(jobId);
    }

    function test_RevertWhen_ExpiredTwice() external {
        vm.warp(deadline);
        expire(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Expired));
        expire(jobId);
        assertEq(market.creditOf(submitter), BOUNTY);
    }
}
