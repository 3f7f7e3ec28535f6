// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {CompletionKind, JobStatus, MarketParams} from "../../src/types/Types.sol";

contract JobMarket_Accept_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        (jobId, nodeId) = submittedJob();
    }

    function accept(uint64 id) internal {
        vm.prank(submitter);
        market.accept(id);
    }

    function test_Accept_PaysProvider() external {
        uint96 payout = BOUNTY - fee(BOUNTY);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobCompleted(jobId, nodeId, operator, payout, fee(BOUNTY), CompletionKind.Accepted);
        accept(jobId);

        assertStatus(jobId, JobStatus.Completed);
        assertEq(market.creditOf(operator), payout);
        assertEq(market.creditOf(treasury), fee(BOUNTY));
        assertEq(market.creditOf(submitter), 0);
        assertEq(payout + fee(BOUNTY), BOUNTY);
        assertEq(token.balanceOf(address(market)), BOUNTY, "credits stay in the market until withdrawn");
        assertNodeCounters(nodeId, 0, 0, 1, 0);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }

    function test_Accept_WithZeroFee() external {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 0;
        setMarketParams(p);
        // The rate is fixed at post time: a job posted now pays no fee.
        uint64 freeJob = postJob();
        assignJob(freeJob, nodeId);
        submitJob(freeJob);
        accept(jobId);
        uint256 operatorBefore = market.creditOf(operator);
        uint256 treasuryBefore = market.creditOf(treasury);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobCompleted(freeJob, nodeId, operator, BOUNTY, 0, CompletionKind.Accepted);
        accept(freeJob);
        assertEq(market.creditOf(operator) - operatorBefore, BOUNTY);
        assertEq(market.creditOf(treasury), treasuryBefore);
    }

    function test_Accept_UsesFeeRecipientAtPayTime() external {
        address newTreasury = makeAddr("newTreasury");
        MarketParams memory p = marketParams();
        p.feeRecipient = newTreasury;
        setMarketParams(p);
        accept(jobId);
        assertEq(market.creditOf(newTreasury), fee(BOUNTY));
        assertEq(market.creditOf(treasury), 0);
    }

    function test_Accept_PaysOperatorAfterAgentChange() external {
        vm.prank(operator);
        registry.setAgent(nodeId, makeAddr("newAgent"));
        accept(jobId);
        assertEq(market.creditOf(operator), BOUNTY - fee(BOUNTY));
        assertEq(market.creditOf(agent), 0);
    }

    function test_RevertWhen_CallerNotSubmitter() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, jobId, stranger));
        vm.prank(stranger);
        market.accept(jobId);
    }

    function test_RevertWhen_CallerIsProvider() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, jobId, operator));
        vm.prank(operator);
        market.accept(jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        accept(99);
    }

    function test_RevertWhen_JobAssigned() external {
        uint64 assigned = postJob();
        assignJob(assigned, nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, assigned, JobStatus.Assigned));
        accept(assigned);
    }

    function test_RevertWhen_JobDisputed() external {
        disputeJob(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Disputed));
        accept(jobId);
    }

    function test_RevertWhen_AcceptedTwice() external {
        accept(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Completed));
        accept(jobId);
        assertEq(market.creditOf(operator), BOUNTY - fee(BOUNTY));
    }
}
