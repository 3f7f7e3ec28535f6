// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";

contract NodeRegistry_SetAgent_Test is NodeRegistry_Node_Test {
    address internal newAgent = makeAddr("newAgent");

    function setAgentAs(address caller, uint64 id, address agent_) internal {
        vm.prank(caller);
        registry.setAgent(id, agent_);
    }

    function test_SetAgent_ReplacesAgentKey() external {
        expectRegistryEmit();
        emit INodeRegistry.NodeAgentChanged(nodeId, newAgent);
        setAgentAs(operator, nodeId, newAgent);

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
        setAgentAs(operator, nodeId, address(0));
    }

    function test_RevertWhen_SetAgentOfUnknownNode() external {
        expectUnknownNode(0);
        setAgentAs(operator, 0, newAgent);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        expectNotOperator(nodeId, agent);
        setAgentAs(agent, nodeId, newAgent);
    }
}
