// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_Settle_Shared} from "./JobMarket.settle.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {CompletionKind, JobStatus, MarketParams} from "../../src/types/Types.sol";

contract JobMarket_Finalize_Test is JobMarket_Settle_Shared {
    function finalize(uint64 id) internal {
        vm.prank(stranger);
        market.finalize(id);
    }

    function expectWindowOpen() internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowOpen.selector, jobId, endsAt));
    }

    function settle(uint64 id) internal override {
        finalize(id);
    }

    function test_Finalize_PaysProviderAtWindowEnd() external {
        assertEq(endsAt, block.timestamp + CHALLENGE_WINDOW);
        vm.warp(endsAt);
        uint96 payout = BOUNTY - fee(BOUNTY);
        expectCompleted(jobId, payout, fee(BOUNTY), CompletionKind.Finalized);
        finalize(jobId);

        assertProviderPaid(payout, BOUNTY);
        assertEq(market.creditOf(stranger), 0);
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
        setProtocolFee(1_000);
        vm.warp(endsAt);
        expectCompleted(jobId, BOUNTY - fee(BOUNTY), fee(BOUNTY), CompletionKind.Finalized);
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
        expectWindowOpen();
        finalize(jobId);
    }

    function test_RevertWhen_JustSubmitted() external {
        expectWindowOpen();
        finalize(jobId);
    }

    function test_RevertWhen_JobDisputed() external {
        disputeJob(jobId);
        vm.warp(endsAt);
        expectWrongStatus(JobStatus.Disputed);
        finalize(jobId);
    }

    function test_RevertWhen_FinalizedTwice() external {
        vm.warp(endsAt);
        finalize(jobId);
        expectWrongStatus(JobStatus.Completed);
        finalize(jobId);
        assertEq(market.creditOf(operator), BOUNTY - fee(BOUNTY));
    }
}
