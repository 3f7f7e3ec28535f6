// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";

contract NodeRegistry_SetAgent_Test is NodeRegistry_Unit_Test {
    uint64 internal nodeId;
    address internal newAgent = makeAddr("newAgent");

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function test_SetAgent_ReplacesAgentKey() external {
        expectRegistryEmit();
        emit INodeRegistry.NodeAgentChanged(nodeId, newAgent);
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);

        assertEq(registry.agentOf(nodeId), newAgent);
        assertEq(registry.getNode(nodeId).agent, newAgent);
        assertEq(registry.getNode(nodeId).operator, operator);

        // The new key heartbeats; the old one no longer may.
        vm.prank(newAgent);
        registry.heartbeat(nodeId);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotAgent.selector, nodeId, agent));
        vm.prank(agent);
        registry.heartbeat(nodeId);
    }

    function test_RevertWhen_AgentIsZeroAddress() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ZeroAddress.selector));
        vm.prank(operator);
        registry.setAgent(nodeId, address(0));
    }

    function test_RevertWhen_SetAgentOfUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(0)));
        vm.prank(operator);
        registry.setAgent(0, newAgent);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, agent));
        vm.prank(agent);
        registry.setAgent(nodeId, newAgent);
    }
}
