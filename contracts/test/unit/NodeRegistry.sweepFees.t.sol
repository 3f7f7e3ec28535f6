// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";

contract NodeRegistrySweepFeesTest is NodeRegistryNodeTest {
    uint64 internal second;

    function setUp() public override {
        super.setUp();
        second = registerNode(operator, OTHER_AGENT_KEY, h100Node(), STAKE);
    }

    function ids(uint64 a) internal pure returns (uint64[] memory list) {
        list = new uint64[](1);
        list[0] = a;
    }

    function ids(uint64 a, uint64 b) internal pure returns (uint64[] memory list) {
        list = new uint64[](2);
        list[0] = a;
        list[1] = b;
    }

    function sweep(uint64[] memory list) internal {
        vm.prank(stranger);
        nodes.sweepFees(list);
        sync();
    }

    function test_SweepFees_MovesTheFeesToTheTreasury_ByAnyone() external {
        (, uint96 payout, uint96 fee) = paidJob(nodeId, BOUNTY);
        uint256 held = token.balanceOf(address(market));

        expectNodeEmit();
        emit INodeRegistry.FeesSwept(nodeId, fee);
        sweep(ids(nodeId));

        assertEq(nodes.getNode(nodeId).feesOwed, 0);
        assertEq(nodes.getNode(nodeId).earnings, payout, "earnings stay");
        assertEq(market.treasuryBalance(), fee);
        assertEq(token.balanceOf(address(market)), held, "no token moves");
        assertReplay();
    }

    function test_SweepFees_ManyNodes() external {
        (,, uint96 fee1) = paidJob(nodeId, BOUNTY);
        (,, uint96 fee2) = paidJob(second, 4 * BOUNTY);
        expectNodeEmit();
        emit INodeRegistry.FeesSwept(nodeId, fee1);
        expectNodeEmit();
        emit INodeRegistry.FeesSwept(second, fee2);
        sweep(ids(nodeId, second));
        assertEq(market.treasuryBalance(), uint256(fee1) + fee2);
        assertReplay();
    }

    /// A node that owes nothing (none earned, already swept, or listed twice) is passed over
    /// without an event.
    function test_SweepFees_PassesOverNodesThatOweNothing() external {
        (,, uint96 fee) = paidJob(nodeId, BOUNTY);
        vm.prank(stranger);
        nodes.sweepFees(ids(second, nodeId));
        vm.prank(stranger);
        nodes.sweepFees(ids(nodeId, nodeId));
        assertOnlyLog(INodeRegistry.FeesSwept.selector, fee);
        assertEq(market.treasuryBalance(), fee);
        assertReplay();
    }

    function test_SweepFees_EmptyList() external {
        vm.prank(stranger);
        nodes.sweepFees(new uint64[](0));
        assertEq(marketLogs().length, 0);
    }

    /// After a sweep, the operator's withdrawal has no fee left to sweep.
    function test_SweepFees_ThenWithdrawEarnings_SweepsNothingMore() external {
        (, uint96 payout, uint96 fee) = paidJob(nodeId, BOUNTY);
        sweep(ids(nodeId));
        vm.prank(operator);
        nodes.withdrawEarnings(nodeId);
        assertOnlyLog(INodeRegistry.NodeEarningsWithdrawn.selector, payout);
        assertEq(market.treasuryBalance(), fee);
        assertReplay();
    }

    function test_SweepFees_RevertWhen_AnyNodeIsUnknown() external {
        paidJob(nodeId, BOUNTY);
        expectUnknownNode(3);
        vm.prank(stranger);
        nodes.sweepFees(ids(nodeId, 3));
        assertGt(nodes.getNode(nodeId).feesOwed, 0, "the whole batch is refused");
        expectUnknownNode(0);
        nodes.sweepFees(ids(0));
    }
}
