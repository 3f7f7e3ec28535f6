// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_PostedJob_Test} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Cancel_Test is JobMarket_PostedJob_Test {
    function cancel(address caller, uint64 id) internal {
        vm.prank(caller);
        market.cancel(id);
    }

    /// Cancels the job as its submitter and checks that the bounty was credited back.
    function assertCancelled() internal {
        cancel(submitter, jobId);
        assertStatus(jobId, JobStatus.Cancelled);
        assertEq(market.creditOf(submitter), BOUNTY);
    }

    function test_Cancel_RefundsBounty() external {
        expectMarketEmit();
        emit IJobMarket.JobCancelled(jobId, BOUNTY);
        assertCancelled();
        assertEq(token.balanceOf(address(market)), BOUNTY, "refund is a credit");
        assertEq(jobOf(jobId).bounty, BOUNTY);
    }

    function test_Cancel_RequeuedJob() external {
        assignAndReject(jobId, registerNode());
        assertCancelled();
    }

    function test_Cancel_AfterDeadline() external {
        vm.warp(deadline + 1);
        assertCancelled();
    }

    function test_Cancel_WhilePaused() external {
        pauseMarket();
        cancel(submitter, jobId);
        assertStatus(jobId, JobStatus.Cancelled);
    }

    function test_RevertWhen_CallerNotSubmitter() external {
        expectNotSubmitter(jobId, stranger);
        cancel(stranger, jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        expectUnknownJob(99);
        cancel(submitter, 99);
    }

    function test_RevertWhen_JobAssigned() external {
        assignJob(jobId, registerNode());
        expectWrongStatus(JobStatus.Assigned);
        cancel(submitter, jobId);
    }

    function test_RevertWhen_CancelledTwice() external {
        cancel(submitter, jobId);
        expectWrongStatus(JobStatus.Cancelled);
        cancel(submitter, jobId);
        assertEq(market.creditOf(submitter), BOUNTY);
    }

    function test_RevertWhen_JobExpired() external {
        vm.warp(deadline);
        market.expire(jobId);
        expectWrongStatus(JobStatus.Expired);
        cancel(submitter, jobId);
    }
}
