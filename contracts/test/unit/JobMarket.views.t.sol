// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {JobInfo, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Views_Test is JobMarketBase {
    function test_GetJob_UnknownJobIsEmpty() external view {
        JobInfo memory job = jobOf(1);
        assertEq(job.submitter, address(0));
        assertEq(uint8(job.status), uint8(JobStatus.None));
        assertEq(job.attempts, 0);
        assertEq(job.deadline, 0);
        assertEq(job.bounty, 0);
        assertEq(job.specHash, bytes32(0));
        assertEq(job.requirements.gpuModel, bytes32(0));
        assertEq(job.requirements.priority, 0);
        assertEq(job.nodeId, 0);
    }

    function test_GetJob_TracksLifecycle() external {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        JobInfo memory job = jobOf(jobId);
        assertEq(job.submitter, submitter);
        assertEq(uint8(job.status), uint8(JobStatus.Submitted));
        assertEq(job.attempts, 1);
        assertEq(job.deadline, block.timestamp + 1 days);
        assertEq(job.bounty, BOUNTY);
        assertEq(job.specHash, keccak256(specJson()));
        assertEq(job.requirements.minRamMiB, h100Job().minRamMiB);
        assertEq(job.nodeId, nodeId);
        assertEq(job.assignedAt, block.timestamp);
        assertEq(job.challengeEndsAt, block.timestamp + CHALLENGE_WINDOW);
        assertEq(job.resultHash, keccak256("result"));

        vm.warp(job.challengeEndsAt);
        market.finalize(jobId);
        job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Completed));
        assertEq(job.nodeId, nodeId, "last node kept after completion");
        assertEq(job.resultHash, keccak256("result"));
    }

    function test_Params_ReturnsDeployedParams() external view {
        assertMarketParams(market.params(), marketParams());
    }

    function test_JobCount_CountsPostedJobs() external {
        assertEq(market.jobCount(), 0);
        postJob();
        assertEq(market.jobCount(), 1);
        uint64 second = postJob();
        vm.prank(submitter);
        market.cancel(second);
        assertEq(market.jobCount(), 2, "cancelled jobs still count");
    }

    function test_CreditOf_StartsAtZero() external {
        assertEq(market.creditOf(stranger), 0);
        uint64 jobId = postJob();
        assertEq(market.creditOf(submitter), 0, "escrow is not a credit");
        vm.prank(submitter);
        market.cancel(jobId);
        assertEq(market.creditOf(submitter), BOUNTY);
    }

    function test_Roles_AreDistinct() external view {
        assertEq(market.MATCHER_ROLE(), keccak256("MATCHER_ROLE"));
        assertEq(market.ARBITER_ROLE(), keccak256("ARBITER_ROLE"));
        assertEq(market.PAUSER_ROLE(), keccak256("PAUSER_ROLE"));
        assertTrue(market.hasRole(market.MATCHER_ROLE(), matcher));
        assertTrue(market.hasRole(market.ARBITER_ROLE(), arbiter));
        assertTrue(market.hasRole(market.PAUSER_ROLE(), pauser));
        assertEq(market.MAX_SPEC_BYTES(), 16_384);
    }
}
