// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";

contract JobMarket_Withdraw_Test is JobMarketBase {
    function withdraw(address account) internal {
        vm.prank(account);
        market.withdraw();
    }

    function test_Withdraw_PaysCredits() external {
        (uint64 jobId,) = submittedJob();
        vm.prank(submitter);
        market.accept(jobId);
        uint96 payout = BOUNTY - fee(BOUNTY);
        uint256 operatorBefore = token.balanceOf(operator);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.Withdrawn(operator, payout);
        withdraw(operator);

        assertEq(market.creditOf(operator), 0);
        assertEq(token.balanceOf(operator), operatorBefore + payout);
        assertEq(token.balanceOf(address(market)), fee(BOUNTY));

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.Withdrawn(treasury, fee(BOUNTY));
        withdraw(treasury);
        assertEq(market.creditOf(treasury), 0);
        assertEq(token.balanceOf(treasury), fee(BOUNTY));
        assertEq(token.balanceOf(address(market)), 0, "market empty once everyone withdrew");
    }

    function test_Withdraw_PaysAccumulatedCredits() external {
        uint64 first = postJob();
        uint64 second = postJob();
        vm.startPrank(submitter);
        market.cancel(first);
        market.cancel(second);
        vm.stopPrank();
        assertEq(market.creditOf(submitter), 2 * uint256(BOUNTY));
        uint256 before = token.balanceOf(submitter);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.Withdrawn(submitter, 2 * uint256(BOUNTY));
        withdraw(submitter);
        assertEq(token.balanceOf(submitter), before + 2 * uint256(BOUNTY));
        assertEq(market.creditOf(submitter), 0);
    }

    function test_Withdraw_PaysSlashedStakeToSubmitter() external {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        assignJob(jobId, nodeId);
        vm.warp(jobOf(jobId).deadline);
        market.expire(jobId);
        uint256 before = token.balanceOf(submitter);
        withdraw(submitter);
        assertEq(token.balanceOf(submitter), before + BOUNTY + SLASH);
        assertEq(token.balanceOf(address(market)), 0);
    }

    function test_Withdraw_WhilePaused() external {
        uint64 jobId = postJob();
        vm.prank(submitter);
        market.cancel(jobId);
        pauseMarket();
        withdraw(submitter);
        assertEq(market.creditOf(submitter), 0);
    }

    function test_RevertWhen_NothingToWithdraw() external {
        vm.expectRevert(IJobMarket.JobMarket_NothingToWithdraw.selector);
        withdraw(stranger);
    }

    function test_RevertWhen_WithdrawnTwice() external {
        uint64 jobId = postJob();
        vm.prank(submitter);
        market.cancel(jobId);
        withdraw(submitter);
        vm.expectRevert(IJobMarket.JobMarket_NothingToWithdraw.selector);
        withdraw(submitter);
    }

    function test_RevertWhen_OnlyEscrowNoCredit() external {
        postJob();
        vm.expectRevert(IJobMarket.JobMarket_NothingToWithdraw.selector);
        withdraw(submitter);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }
}
