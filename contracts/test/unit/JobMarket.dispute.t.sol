// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_Settle_Shared} from "./JobMarket.settle.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Dispute_Test is JobMarket_Settle_Shared {
    function settle(uint64 id) internal override {
        disputeJob(id);
    }

    function expectDisputed(uint96 bond) internal {
        expectMarketEmit();
        emit IJobMarket.JobDisputed(jobId, nodeId, bond);
    }

    function expectWindowClosed() internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowClosed.selector, jobId, endsAt));
    }

    function test_Dispute_PostsBond() external {
        uint256 submitterBefore = token.balanceOf(submitter);
        expectDisputed(DISPUTE_BOND);
        disputeJob(jobId);

        assertStatus(jobId, JobStatus.Disputed);
        assertEq(token.balanceOf(submitter), submitterBefore - DISPUTE_BOND);
        assertEq(token.balanceOf(address(market)), BOUNTY + DISPUTE_BOND);
        assertEq(market.creditOf(submitter), 0);
        assertEq(jobOf(jobId).challengeEndsAt, endsAt);
        assertNodeCounters(nodeId, 0, 1, 0, 0);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }

    function test_Dispute_OneSecondBeforeWindowEnds() external {
        vm.warp(endsAt - 1);
        disputeJob(jobId);
        assertStatus(jobId, JobStatus.Disputed);
    }

    function test_Dispute_WithZeroBond() external {
        setDisputeBond(0);
        vm.prank(submitter);
        token.approve(address(market), 0);

        expectDisputed(0);
        disputeJob(jobId);
        assertStatus(jobId, JobStatus.Disputed);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

    function test_RevertWhen_CallerNotSubmitter() external {
        expectNotSubmitter(jobId, stranger);
        vm.prank(stranger);
        market.dispute(jobId);
    }

    function test_RevertWhen_ChallengeWindowClosed() external {
        vm.warp(endsAt);
        expectWindowClosed();
        disputeJob(jobId);
    }

    function test_RevertWhen_ChallengeWindowLongClosed() external {
        vm.warp(uint256(endsAt) + 1 days);
        expectWindowClosed();
        disputeJob(jobId);
    }

    function test_RevertWhen_JobCompleted() external {
        vm.prank(submitter);
        market.accept(jobId);
        expectWrongStatus(JobStatus.Completed);
        disputeJob(jobId);
    }

    function test_RevertWhen_DisputedTwice() external {
        disputeJob(jobId);
        expectWrongStatus(JobStatus.Disputed);
        disputeJob(jobId);
        assertEq(token.balanceOf(address(market)), BOUNTY + DISPUTE_BOND);
    }

    function test_RevertWhen_BondNotApproved() external {
        vm.prank(submitter);
        token.approve(address(market), DISPUTE_BOND - 1);
        expectAllowanceShort(DISPUTE_BOND - 1, DISPUTE_BOND);
        disputeJob(jobId);
    }
}
