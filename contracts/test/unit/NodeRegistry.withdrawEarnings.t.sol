// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";

import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {MarketParams, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistryWithdrawEarningsTest is NodeRegistryNodeTest {
    /// The fee of a `BOUNTY` job under the fixture's policy: 2.5%.
    uint96 internal constant FEE = (BOUNTY * FEE_BPS) / 10_000;

    function test_WithdrawEarnings_PaysTheOperator_AndSweepsTheFeesToTheTreasury() external {
        (, uint96 payout, uint96 fee) = paidJob(nodeId, BOUNTY);
        assertEq(fee, FEE);
        assertEq(payout, BOUNTY - FEE);
        NodeInfo memory n = nodes.getNode(nodeId);
        assertEq(n.earnings, payout);
        assertEq(n.feesOwed, fee);
        uint256 operatorBefore = token.balanceOf(operator);
        uint256 treasuryBefore = market.treasuryBalance();

        expectNodeEmit();
        emit INodeRegistry.FeesSwept(nodeId, fee);
        expectNodeEmit();
        emit INodeRegistry.NodeEarningsWithdrawn(nodeId, operator, payout);
        withdrawEarnings(nodeId);

        n = nodes.getNode(nodeId);
        assertEq(n.earnings, 0);
        assertEq(n.feesOwed, 0);
        assertEq(n.stake, STAKE, "the stake is not touched");
        assertEq(token.balanceOf(operator), operatorBefore + payout);
        assertEq(market.treasuryBalance(), treasuryBefore + fee, "the fee is the treasury's now");
        assertReplay();

        // And the treasury takes it out.
        market.withdrawTreasury();
        sync();
        assertEq(token.balanceOf(treasury), fee);
        assertReplay();
    }

    function testFuzz_WithdrawEarnings_PaysTheBountyLessTheFee(uint96 bounty) external {
        bounty = uint96(bound(bounty, 1, 5_000e6));
        (, uint96 payout, uint96 fee) = paidJob(nodeId, bounty);
        assertEq(uint256(payout) + fee, bounty);
        assertEq(fee, (uint256(bounty) * FEE_BPS) / 10_000);
        uint256 operatorBefore = token.balanceOf(operator);
        withdrawEarnings(nodeId);
        assertEq(token.balanceOf(operator), operatorBefore + payout);
        assertEq(market.treasuryBalance(), fee);
        assertReplay();
    }

    function test_WithdrawEarnings_PaysEveryJobAtOnce() external {
        paidJob(nodeId, BOUNTY);
        paidJob(nodeId, 2 * BOUNTY);
        uint96 fees = FEE + (2 * BOUNTY * FEE_BPS) / 10_000;
        uint96 earnings = 3 * BOUNTY - fees;
        assertEq(nodes.getNode(nodeId).earnings, earnings);
        uint256 operatorBefore = token.balanceOf(operator);
        expectNodeEmit();
        emit INodeRegistry.FeesSwept(nodeId, fees);
        expectNodeEmit();
        emit INodeRegistry.NodeEarningsWithdrawn(nodeId, operator, earnings);
        withdrawEarnings(nodeId);
        assertEq(token.balanceOf(operator), operatorBefore + earnings);
        assertReplay();
    }

    /// Jobs of a fee-free policy owe nothing: nothing is swept, no FeesSwept.
    function test_WithdrawEarnings_WithNoFeesOwed_SweepsNothing() external {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 0;
        setParams(p);
        paidJob(nodeId, BOUNTY);
        vm.prank(operator);
        nodes.withdrawEarnings(nodeId);
        Vm.Log[] memory logs = marketLogs();
        assertEq(logs.length, 1);
        assertEq(logs[0].topics[0], INodeRegistry.NodeEarningsWithdrawn.selector);
        assertEq(market.treasuryBalance(), 0);
        assertReplay();
    }

    /// A won dispute's bond is earnings too.
    function test_WithdrawEarnings_IncludesAWonDisputesBond() external {
        (uint64 jobId,) = submittedJob();
        dispute(jobId);
        resolve(jobId, true);
        uint96 expected = BOUNTY - FEE + DISPUTE_BOND;
        assertEq(nodes.getNode(nodeId).earnings, expected);
        uint256 operatorBefore = token.balanceOf(operator);
        withdrawEarnings(nodeId);
        assertEq(token.balanceOf(operator), operatorBefore + expected);
        assertReplay();
    }

    /// Earnings outlive the node: an Exited node's operator still takes them.
    function test_WithdrawEarnings_AfterTheNodeExited() external {
        (, uint96 payout,) = paidJob(nodeId, BOUNTY);
        exitAndWithdraw(nodeId);
        assertStatus(nodeId, NodeStatus.Exited);
        uint256 operatorBefore = token.balanceOf(operator);
        withdrawEarnings(nodeId);
        assertEq(token.balanceOf(operator), operatorBefore + payout);
        assertEq(token.balanceOf(address(market)), market.treasuryBalance(), "only the treasury's share is left");
        assertReplay();
    }

    function test_WithdrawEarnings_WhilePaused() external {
        paidJob(nodeId, BOUNTY);
        vm.prank(pauser);
        market.setPaused(true);
        withdrawEarnings(nodeId);
        assertEq(nodes.getNode(nodeId).earnings, 0);
    }

    function test_WithdrawEarnings_RevertWhen_NothingEarned() external {
        expectNothingToWithdraw(nodeId);
        vm.prank(operator);
        nodes.withdrawEarnings(nodeId);
    }

    function test_WithdrawEarnings_RevertWhen_AlreadyWithdrawn() external {
        paidJob(nodeId, BOUNTY);
        withdrawEarnings(nodeId);
        expectNothingToWithdraw(nodeId);
        vm.prank(operator);
        nodes.withdrawEarnings(nodeId);
    }

    /// The agent works; the operator is paid.
    function test_WithdrawEarnings_RevertWhen_CallerIsNotTheOperator() external {
        paidJob(nodeId, BOUNTY);
        expectNotOperator(nodeId, agent);
        vm.prank(agent);
        nodes.withdrawEarnings(nodeId);
        expectNotOperator(nodeId, treasury);
        vm.prank(treasury);
        nodes.withdrawEarnings(nodeId);
    }

    function test_WithdrawEarnings_RevertWhen_UnknownNode() external {
        expectUnknownNode(2);
        vm.prank(operator);
        nodes.withdrawEarnings(2);
    }

    /// Earnings are the node's, not a credit of its operator's account.
    function test_WithdrawEarnings_AreNotCredits() external {
        paidJob(nodeId, BOUNTY);
        assertEq(market.creditOf(operator), 0);
        vm.prank(operator);
        vm.expectRevert(IJobMarket.JobMarket_NothingToWithdraw.selector);
        market.withdraw();
    }
}
