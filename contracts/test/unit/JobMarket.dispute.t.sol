// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus, MarketParams} from "../../src/types/Types.sol";

contract JobMarket_Dispute_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;
    uint40 internal endsAt;

    function setUp() public override {
        super.setUp();
        (jobId, nodeId) = submittedJob();
        endsAt = jobOf(jobId).challengeEndsAt;
    }

    function test_Dispute_PostsBond() external {
        uint256 submitterBefore = token.balanceOf(submitter);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobDisputed(jobId, nodeId, DISPUTE_BOND);
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
        MarketParams memory p = marketParams();
        p.disputeBond = 0;
        setMarketParams(p);
        vm.prank(submitter);
        token.approve(address(market), 0);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobDisputed(jobId, nodeId, 0);
        disputeJob(jobId);
        assertStatus(jobId, JobStatus.Disputed);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

    function test_RevertWhen_CallerNotSubmitter() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, jobId, stranger));
        vm.prank(stranger);
        market.dispute(jobId);
    }

    function test_RevertWhen_ChallengeWindowClosed() external {
        vm.warp(endsAt);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowClosed.selector, jobId, endsAt));
        disputeJob(jobId);
    }

    function test_RevertWhen_ChallengeWindowLongClosed() external {
        vm.warp(uint256(endsAt) + 1 days);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowClosed.selector, jobId, endsAt));
        disputeJob(jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        disputeJob(99);
    }

    function test_RevertWhen_JobAssigned() external {
        uint64 assigned = postJob();
        assignJob(assigned, nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, assigned, JobStatus.Assigned));
        disputeJob(assigned);
    }

    function test_RevertWhen_JobCompleted() external {
        vm.prank(submitter);
        market.accept(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Completed));
        disputeJob(jobId);
    }

    function test_RevertWhen_DisputedTwice() external {
        disputeJob(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Disputed));
        disputeJob(jobId);
        assertEq(token.balanceOf(address(market)), BOUNTY + DISPUTE_BOND);
    }

    function test_RevertWhen_BondNotApproved() external {
        vm.prank(submitter);
        token.approve(address(market), DISPUTE_BOND - 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector, address(market), DISPUTE_BOND - 1, DISPUTE_BOND
            )
        );
        disputeJob(jobId);
    }
}
