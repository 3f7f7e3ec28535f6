// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {CompletionKind, JobStatus, MarketParams} from "../../src/types/Types.sol";

contract JobMarket_Finalize_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;
    uint40 internal endsAt;

    function setUp() public override {
        super.setUp();
        (jobId, nodeId) = submittedJob();
        endsAt = jobOf(jobId).challengeEndsAt;
    }

    function finalize(uint64 id) internal {
        vm.prank(stranger);
        market.finalize(id);
    }

    function test_Finalize_PaysProviderAtWindowEnd() external {
        assertEq(endsAt, block.timestamp + CHALLENGE_WINDOW);
        vm.warp(endsAt);
        uint96 payout = BOUNTY - fee(BOUNTY);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobCompleted(jobId, nodeId, operator, payout, fee(BOUNTY), CompletionKind.Finalized);
        finalize(jobId);

        assertStatus(jobId, JobStatus.Completed);
        assertEq(market.creditOf(operator), payout);
        assertEq(market.creditOf(treasury), fee(BOUNTY));
        assertEq(market.creditOf(stranger), 0);
        assertEq(market.creditOf(submitter), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
        assertNodeCounters(nodeId, 0, 0, 1, 0);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }

    function test_Finalize_PaysProviderLongAfterWindow() external {
        vm.warp(uint256(endsAt) + 30 days);
        finalize(jobId);
        assertStatus(jobId, JobStatus.Completed);
        assertEq(market.creditOf(operator), BOUNTY - fee(BOUNTY));
    }

    function test_Finalize_BySubmitter() external {
        vm.warp(endsAt);
        vm.prank(submitter);
        market.finalize(jobId);
        assertStatus(jobId, JobStatus.Completed);
    }

    /// A fee raised after posting does not apply: the submitter pays the rate it saw.
    function test_Finalize_UsesFeeFixedAtPost() external {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 1_000;
        setMarketParams(p);
        vm.warp(endsAt);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobCompleted(
            jobId, nodeId, operator, BOUNTY - fee(BOUNTY), fee(BOUNTY), CompletionKind.Finalized
        );
        finalize(jobId);
        assertEq(market.creditOf(treasury), fee(BOUNTY));
        assertEq(jobOf(jobId).protocolFeeBps, FEE_BPS);
    }

    function test_Finalize_UsesWindowAtSubmitTime() external {
        MarketParams memory p = marketParams();
        p.challengeWindow = 10 * CHALLENGE_WINDOW;
        setMarketParams(p);
        vm.warp(endsAt);
        finalize(jobId);
        assertStatus(jobId, JobStatus.Completed);
    }

    function test_RevertWhen_ChallengeWindowOpen() external {
        vm.warp(endsAt - 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowOpen.selector, jobId, endsAt));
        finalize(jobId);
    }

    function test_RevertWhen_JustSubmitted() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowOpen.selector, jobId, endsAt));
        finalize(jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        finalize(99);
    }

    function test_RevertWhen_JobAssigned() external {
        uint64 assigned = postJob();
        assignJob(assigned, nodeId);
        vm.warp(endsAt);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, assigned, JobStatus.Assigned));
        finalize(assigned);
    }

    function test_RevertWhen_JobDisputed() external {
        disputeJob(jobId);
        vm.warp(endsAt);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Disputed));
        finalize(jobId);
    }

    function test_RevertWhen_FinalizedTwice() external {
        vm.warp(endsAt);
        finalize(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Completed));
        finalize(jobId);
        assertEq(market.creditOf(operator), BOUNTY - fee(BOUNTY));
    }
}
