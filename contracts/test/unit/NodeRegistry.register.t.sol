// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {NodeRegistry_Capabilities_Shared} from "./NodeRegistry.capabilities.shared.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_Register_Test is NodeRegistry_Capabilities_Shared {
    function register(NodeCapabilities memory caps, uint96 stake) internal returns (uint64) {
        vm.prank(operator);
        return registry.register(agent, caps, META, stake);
    }

    function validCapabilities() internal pure override returns (NodeCapabilities memory) {
        return h100Node();
    }

    function submitCapabilities(NodeCapabilities memory caps) internal override {
        register(caps, STAKE);
    }

    function assertNothingStored() internal view override {
        assertEq(registry.nodeCount(), 0);
    }

    function test_Register_StoresNodeAndPullsStake() external {
        uint256 operatorBefore = token.balanceOf(operator);
        uint32 now32 = uint32(block.timestamp);

        expectRegistryEmit();
        emit INodeRegistry.NodeRegistered(1, operator, agent, h100Node(), META, STAKE, now32);
        uint64 nodeId = register(h100Node(), STAKE);

        assertEq(nodeId, 1);
        assertEq(registry.nodeCount(), 1);
        assertStatus(nodeId, NodeStatus.Active);
        assertEq(registry.agentOf(nodeId), agent);

        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.operator, operator);
        assertEq(node.agent, agent);
        assertNodeCounters(nodeId, 0, 0, 0, 0);
        assertEq(node.lastHeartbeat, now32);
        assertEq(node.stake, STAKE);
        assertEq(node.totalSlashed, 0);
        assertEq(node.unbondingEndsAt, 0);
        assertCapabilities(node.capabilities, h100Node());

        assertEq(token.balanceOf(address(registry)), STAKE);
        assertEq(token.balanceOf(operator), operatorBefore - STAKE);
    }

    function test_Register_AssignsSequentialIds() external {
        uint64 first = registerNode();
        fund(stranger, STAKE);

        expectRegistryEmit();
        emit INodeRegistry.NodeRegistered(2, stranger, stranger, a100Node(), "", MIN_STAKE, uint32(block.timestamp));
        vm.prank(stranger);
        uint64 second = registry.register(stranger, a100Node(), "", MIN_STAKE);

        assertEq(first, 1);
        assertEq(second, 2);
        assertEq(registry.nodeCount(), 2);
        assertEq(registry.getNode(second).operator, stranger);
        assertEq(registry.getNode(first).operator, operator);
        assertEq(token.balanceOf(address(registry)), STAKE + MIN_STAKE);
    }

    function test_Register_AcceptsCpuOnlyNode() external {
        uint64 nodeId = register(cpuOnlyNode(), STAKE);
        assertCapabilities(registry.getNode(nodeId).capabilities, cpuOnlyNode());
    }

    function test_Register_AcceptsStakeEqualToMinimum() external {
        uint64 nodeId = register(h100Node(), MIN_STAKE);
        assertEq(registry.getNode(nodeId).stake, MIN_STAKE);
        assertEq(token.balanceOf(address(registry)), MIN_STAKE);
    }

    function test_RevertWhen_AgentIsZeroAddress() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ZeroAddress.selector));
        vm.prank(operator);
        registry.register(address(0), h100Node(), META, STAKE);
    }

    function test_RevertWhen_StakeBelowMinimum() external {
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeTooLow.selector, MIN_STAKE - 1, MIN_STAKE)
        );
        register(h100Node(), MIN_STAKE - 1);
    }

    function test_RevertWhen_StakeNotApproved() external {
        token.mint(stranger, STAKE);
        vm.expectRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector, address(registry), uint256(0), uint256(STAKE)
            )
        );
        vm.prank(stranger);
        registry.register(agent, h100Node(), META, STAKE);
    }

    function test_RevertWhen_Paused() external {
        vm.prank(pauser);
        registry.pause();
        vm.expectRevert(abi.encodeWithSelector(Pausable.EnforcedPause.selector));
        register(h100Node(), STAKE);
    }
}
