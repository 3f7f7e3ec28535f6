// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Cancel_Test is JobMarketBase {
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        jobId = postJob();
    }

    function cancel(address caller, uint64 id) internal {
        vm.prank(caller);
        market.cancel(id);
    }

    function test_Cancel_RefundsBounty() external {
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobCancelled(jobId, BOUNTY);
        cancel(submitter, jobId);

        assertStatus(jobId, JobStatus.Cancelled);
        assertEq(market.creditOf(submitter), BOUNTY);
        assertEq(token.balanceOf(address(market)), BOUNTY, "refund is a credit");
        assertEq(jobOf(jobId).bounty, BOUNTY);
    }

    function test_Cancel_RequeuedJob() external {
        uint64 nodeId = registerNode();
        assignJob(jobId, nodeId);
        vm.prank(agent);
        market.reject(jobId, "bad input");
        cancel(submitter, jobId);
        assertStatus(jobId, JobStatus.Cancelled);
        assertEq(market.creditOf(submitter), BOUNTY);
    }

    function test_Cancel_AfterDeadline() external {
        vm.warp(jobOf(jobId).deadline + 1);
        cancel(submitter, jobId);
        assertStatus(jobId, JobStatus.Cancelled);
        assertEq(market.creditOf(submitter), BOUNTY);
    }

    function test_Cancel_WhilePaused() external {
        pauseMarket();
        cancel(submitter, jobId);
        assertStatus(jobId, JobStatus.Cancelled);
    }

    function test_RevertWhen_CallerNotSubmitter() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, jobId, stranger));
        cancel(stranger, jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        cancel(submitter, 99);
    }

    function test_RevertWhen_JobAssigned() external {
        assignJob(jobId, registerNode());
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Assigned));
        cancel(submitter, jobId);
    }

    function test_RevertWhen_CancelledTwice() external {
        cancel(submitter, jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Cancelled));
        cancel(submitter, jobId);
        assertEq(market.creditOf(submitter), BOUNTY);
    }

    function test_RevertWhen_JobExpired() external {
        vm.warp(jobOf(jobId).deadline);
        market.expire(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Expired));
        cancel(submitter, jobId);
    }
}
