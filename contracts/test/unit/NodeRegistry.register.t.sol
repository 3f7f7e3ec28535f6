// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_Register_Test is NodeRegistry_Unit_Test {
    function test_Register_StoresNodeAndPullsStake() external {
        uint256 operatorBefore = token.balanceOf(operator);
        uint32 now32 = uint32(block.timestamp);

        expectRegistryEmit();
        emit INodeRegistry.NodeRegistered(1, operator, agent, h100Node(), META, STAKE, now32);
        vm.prank(operator);
        uint64 nodeId = registry.register(agent, h100Node(), META, STAKE);

        assertEq(nodeId, 1);
        assertEq(registry.nodeCount(), 1);
        assertStatus(nodeId, NodeStatus.Active);
        assertEq(registry.agentOf(nodeId), agent);

        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.operator, operator);
        assertEq(node.agent, agent);
        assertEq(node.activeJobs, 0);
        assertEq(node.settlingJobs, 0);
        assertEq(node.lastHeartbeat, now32);
        assertEq(node.stake, STAKE);
        assertEq(node.completedJobs, 0);
        assertEq(node.failedJobs, 0);
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
        vm.prank(operator);
        uint64 nodeId = registry.register(agent, cpuOnlyNode(), META, STAKE);
        assertCapabilities(registry.getNode(nodeId).capabilities, cpuOnlyNode());
    }

    function test_Register_AcceptsStakeEqualToMinimum() external {
        vm.prank(operator);
        uint64 nodeId = registry.register(agent, h100Node(), META, MIN_STAKE);
        assertEq(registry.getNode(nodeId).stake, MIN_STAKE);
        assertEq(token.balanceOf(address(registry)), MIN_STAKE);
    }

    function test_RevertWhen_AgentIsZeroAddress() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ZeroAddress.selector));
        vm.prank(operator);
        registry.register(address(0), h100Node(), META, STAKE);
    }

    function test_RevertWhen_ModelWithoutGpus() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuCount = 0;
        expectInvalid(caps);
    }

    function test_RevertWhen_GpusWithoutModel() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = bytes32(0);
        expectInvalid(caps);
    }

    function test_RevertWhen_GpusWithoutVram() external {
        NodeCapabilities memory caps = h100Node();
        caps.vramMiB = 0;
        expectInvalid(caps);
    }

    function test_RevertWhen_CpuCoresIsZero() external {
        NodeCapabilities memory caps = h100Node();
        caps.cpuCores = 0;
        expectInvalid(caps);
    }

    function test_RevertWhen_MaxConcurrentJobsIsZero() external {
        NodeCapabilities memory caps = h100Node();
        caps.maxConcurrentJobs = 0;
        expectInvalid(caps);
    }

    function test_RevertWhen_StakeBelowMinimum() external {
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeTooLow.selector, MIN_STAKE - 1, MIN_STAKE)
        );
        vm.prank(operator);
        registry.register(agent, h100Node(), META, MIN_STAKE - 1);
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
        vm.prank(operator);
        registry.register(agent, h100Node(), META, STAKE);
    }

    function expectInvalid(NodeCapabilities memory caps) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_InvalidCapabilities.selector));
        vm.prank(operator);
        registry.register(agent, caps, META, STAKE);
        assertEq(registry.nodeCount(), 0);
    }
}
