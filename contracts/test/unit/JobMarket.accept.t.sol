// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_Settle_Shared} from "./JobMarket.settle.shared.sol";
import {CompletionKind, JobStatus, MarketParams} from "../../src/types/Types.sol";

contract JobMarket_Accept_Test is JobMarket_Settle_Shared {
    function settle(uint64 id) internal override {
        accept(id);
    }

    function accept(uint64 id) internal {
        vm.prank(submitter);
        market.accept(id);
    }

    function test_Accept_PaysProvider() external {
        uint96 payout = BOUNTY - fee(BOUNTY);
        expectCompleted(jobId, payout, fee(BOUNTY), CompletionKind.Accepted);
        accept(jobId);

        assertProviderPaid(payout, BOUNTY);
        assertEq(payout + fee(BOUNTY), BOUNTY);
    }

    function test_Accept_WithZeroFee() external {
        setProtocolFee(0);
        // The rate is fixed at post time: a job posted now pays no fee.
        uint64 freeJob = postJob();
        assignJob(freeJob, nodeId);
        submitJob(freeJob);
        accept(jobId);
        uint256 operatorBefore = market.creditOf(operator);
        uint256 treasuryBefore = market.creditOf(treasury);
        expectCompleted(freeJob, BOUNTY, 0, CompletionKind.Accepted);
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
        setNewAgent(nodeId);
        accept(jobId);
        assertEq(market.creditOf(operator), BOUNTY - fee(BOUNTY));
        assertEq(market.creditOf(agent), 0);
    }

    function test_RevertWhen_CallerNotSubmitter() external {
        expectNotSubmitter(jobId, stranger);
        vm.prank(stranger);
        market.accept(jobId);
    }

    function test_RevertWhen_CallerIsProvider() external {
        expectNotSubmitter(jobId, operator);
        vm.prank(operator);
        market.accept(jobId);
    }

    function test_RevertWhen_JobDisputed() external {
        disputeJob(jobId);
        expectWrongStatus(JobStatus.Disputed);
        accept(jobId);
    }

    function test_RevertWhen_AcceptedTwice() external {
        accept(jobId);
        expectWrongStatus(JobStatus.Completed);
        accept(jobId);
        assertEq(market.creditOf(operator), BOUNTY - fee(BOUNTY));
    }
}
