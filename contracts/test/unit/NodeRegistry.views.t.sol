// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_Views_Test is NodeRegistry_Unit_Test {
    function test_Views_UnknownNodeIsEmpty() external view {
        NodeInfo memory node = registry.getNode(1);
        assertEq(node.operator, address(0));
        assertEq(node.agent, address(0));
        assertEq(uint8(node.status), uint8(NodeStatus.None));
        assertEq(node.stake, 0);
        assertEq(node.capabilities.gpuModel, bytes32(0));
        assertEq(uint8(registry.statusOf(1)), uint8(NodeStatus.None));
        assertEq(registry.agentOf(1), address(0));
        assertEq(registry.nodeCount(), 0);
    }

    function test_Views_ParamsAfterDeploy() external view {
        assertParams(registry.params(), registryParams());
        assertEq(address(registry.token()), address(token));
    }

    function test_Views_NodeCountCountsExitedNodes() external {
        uint64 first = registerNode();
        registerNode();
        exitAndWithdraw(first);
        assertEq(registry.nodeCount(), 2);
        assertEq(registry.agentOf(first), agent);
        assertEq(uint8(registry.statusOf(first)), uint8(NodeStatus.Exited));
    }
}
