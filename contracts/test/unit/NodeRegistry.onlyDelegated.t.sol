// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {stdError} from "forge-std/StdError.sol";

import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {NodeStatus} from "../../src/types/Types.sol";

/// The extension's own address serves nothing that writes: only the market's delegatecall
/// runs it (on the market's storage). Its views read its own, empty, storage.
contract NodeRegistryOnlyDelegatedTest is NodeRegistryNodeTest {
    NodeRegistry internal extension;

    function setUp() public override {
        super.setUp();
        extension = NodeRegistry(market.nodeRegistry());
        fund(address(this), STAKE);
        token.approve(address(extension), type(uint256).max);
    }

    function expectOnlyThroughMarket() internal {
        vm.expectRevert(NodeRegistry.NodeRegistry_OnlyThroughMarket.selector);
    }

    function test_OnlyDelegated_TheMarketServesTheExtension() external view {
        assertTrue(market.nodeRegistry() != address(market));
        assertEq(address(extension.token()), address(token));
        assertGt(market.nodeRegistry().code.length, 0);
    }

    function test_OnlyDelegated_Register() external {
        expectOnlyThroughMarket();
        extension.register(h100Node(), META, STAKE, address(this), 0, "");
        assertEq(token.balanceOf(address(extension)), 0);
    }

    function test_OnlyDelegated_UpdateCapabilities() external {
        expectOnlyThroughMarket();
        vm.prank(operator);
        extension.updateCapabilities(nodeId, a100Node(), META);
    }

    function test_OnlyDelegated_SetAgent() external {
        expectOnlyThroughMarket();
        vm.prank(operator);
        extension.setAgent(nodeId, operator, 0, "");
    }

    function test_OnlyDelegated_TopUpStake() external {
        expectOnlyThroughMarket();
        vm.prank(operator);
        extension.topUpStake(nodeId, 1);
    }

    function test_OnlyDelegated_BeginExit() external {
        expectOnlyThroughMarket();
        vm.prank(operator);
        extension.beginExit(nodeId);
    }

    function test_OnlyDelegated_WithdrawStake() external {
        expectOnlyThroughMarket();
        vm.prank(operator);
        extension.withdrawStake(nodeId);
    }

    function test_OnlyDelegated_WithdrawEarnings() external {
        expectOnlyThroughMarket();
        vm.prank(operator);
        extension.withdrawEarnings(nodeId);
    }

    function test_OnlyDelegated_SweepFees() external {
        expectOnlyThroughMarket();
        extension.sweepFees(new uint64[](0));
    }

    function test_OnlyDelegated_Heartbeat() external {
        expectOnlyThroughMarket();
        vm.prank(agent);
        extension.heartbeat(nodeId);
    }

    function test_OnlyDelegated_MarkInactive() external {
        expectOnlyThroughMarket();
        vm.prank(agent);
        extension.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Active);
    }

    /// Questionable (see the report): the views are not guarded; they read the extension's
    /// own empty storage, and `nodeCount` underflows there (its next id is 0, not 1).
    function test_OnlyDelegated_SyncPool() external {
        expectOnlyThroughMarket();
        extension.syncPool(new uint64[](1));
    }

    function test_OnlyDelegated_ViewsReadTheExtensionsEmptyStorage() external {
        assertEq(extension.getNode(nodeId).operator, address(0));
        assertEq(extension.agentNonce(agent), 0);
        assertEq(
            extension.consentDigest(operator, agent, 0, 1) == nodes.consentDigest(operator, agent, 0, 1),
            false,
            "another domain: the extension's address"
        );
        vm.expectRevert(stdError.arithmeticError);
        extension.nodeCount();
    }
}
