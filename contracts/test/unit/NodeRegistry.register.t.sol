// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";

import {NodeRegistryUnitTest} from "./NodeRegistry.base.sol";
import {NodeRegistryCapabilitiesShared} from "./NodeRegistry.capabilities.shared.sol";
import {NodeRegistryConsentShared} from "./NodeRegistry.consent.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {MarketParams, NodeCapabilities, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistryRegisterTest is NodeRegistryCapabilitiesShared, NodeRegistryConsentShared {
    // ---------------------------------------------------------------- the shared rules' hooks

    function submitCapabilities(NodeCapabilities memory caps, string memory metadataURI) internal override {
        vm.prank(operator);
        nodes.register(caps, metadataURI, STAKE, operator, 0, "");
    }

    function assertNothingStored() internal view override {
        assertEq(nodes.nodeCount(), 0, "no node");
        assertEq(token.balanceOf(address(market)), 0, "no stake taken");
    }

    function consentKey() internal pure override returns (uint256) {
        return AGENT_KEY;
    }

    function bind(address caller, address agent_, uint256 deadline, bytes memory signature) internal override {
        vm.prank(caller);
        nodes.register(h100Node(), META, STAKE, agent_, deadline, signature);
    }

    function boundAgent() internal view override returns (address) {
        return nodes.getNode(nodes.nodeCount()).agent;
    }

    // ---------------------------------------------------------------- register

    function register(uint96 stake) internal returns (uint64 id) {
        bytes memory signature = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        id = nodes.register(h100Node(), META, stake, agent, block.timestamp + 1 hours, signature);
        sync();
    }

    function test_Register_StoresTheNode_AndPullsTheStake() external {
        uint256 operatorBefore = token.balanceOf(operator);
        uint32 now32 = uint32(block.timestamp);
        bytes memory signature = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);

        expectNodeEmit();
        emit INodeRegistry.NodeRegistered(1, operator, agent, h100Node(), META, STAKE, now32);
        vm.prank(operator);
        uint64 id = nodes.register(h100Node(), META, STAKE, agent, block.timestamp + 1 hours, signature);
        sync();

        assertEq(id, 1);
        assertEq(nodes.nodeCount(), 1);
        NodeInfo memory n = assertedNode(id, operator, agent, NodeStatus.Active);
        assertEq(n.lastHeartbeat, now32);
        assertEq(n.stake, STAKE);
        assertEq(n.lockedStake, 0);
        assertEq(n.earnings, 0);
        assertEq(n.feesOwed, 0);
        assertEq(n.registeredAt, now32);
        assertEq(n.gpuModelTag, tagOf(H100));
        assertEq(n.inactiveSince, 0);
        assertEq(n.unbondingEndsAt, 0);
        assertEq(nodes.agentNonce(agent), 1);

        assertEq(token.balanceOf(operator), operatorBefore - STAKE);
        assertEq(token.balanceOf(address(market)), STAKE);
        assertEq(token.balanceOf(market.nodeRegistry()), 0, "the extension holds nothing");
        assertReplay();
    }

    function test_Register_EmitsOnlyNodeRegistered_AtTheMarketsAddress() external {
        register(STAKE);
        // `register` folded its logs already; run a second one and look at its logs alone.
        bytes memory signature = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        nodes.register(a100Node(), "", MIN_STAKE, agent, block.timestamp + 1 hours, signature);
        Vm.Log[] memory logs = marketLogs();
        assertEq(logs.length, 1);
        assertEq(logs[0].topics[0], INodeRegistry.NodeRegistered.selector);
        assertEq(logs[0].topics[1], bytes32(uint256(2)));
        assertEq(logs[0].topics[2], bytes32(uint256(uint160(operator))));
        assertEq(logs[0].topics[3], bytes32(uint256(uint160(agent))));
        assertReplay();
    }

    function test_Register_AssignsSequentialIds() external {
        uint64 first = register(STAKE);
        uint64 second = registerSelf(stranger, a100Node(), MIN_STAKE);
        uint64 third = register(STAKE);
        assertEq(first, 1);
        assertEq(second, 2);
        assertEq(third, 3);
        assertEq(nodes.nodeCount(), 3);
        assertEq(nodes.getNode(second).operator, stranger);
        assertEq(nodes.getNode(second).agent, stranger);
        assertEq(nodes.getNode(third).agent, agent, "one agent may serve several nodes, with a consent each");
        assertEq(nodes.agentNonce(agent), 2);
        assertEq(token.balanceOf(address(market)), 2 * uint256(STAKE) + MIN_STAKE);
        assertReplay();
    }

    function test_Register_ACpuOnlyNode_HasNoModelTag() external {
        uint64 id = registerSelf(stranger, cpuOnlyNode(), STAKE);
        assertEq(nodes.getNode(id).gpuModelTag, bytes6(0));
    }

    function test_Register_AcceptsTheMinimumStake() external {
        uint64 id = register(MIN_STAKE);
        assertEq(nodes.getNode(id).stake, MIN_STAKE);
        assertReplay();
    }

    function testFuzz_Register_TakesExactlyTheStake(uint96 stake) external {
        stake = uint96(bound(stake, MIN_STAKE, type(uint96).max));
        fund(stranger, stake);
        vm.prank(stranger);
        uint64 id = nodes.register(h100Node(), META, stake, stranger, 0, "");
        sync();
        assertEq(nodes.getNode(id).stake, stake);
        assertEq(token.balanceOf(stranger), 0);
        assertEq(token.balanceOf(address(market)), stake);
        assertReplay();
    }

    function testFuzz_Register_RevertWhen_StakeBelowTheMinimum(uint96 stake) external {
        stake = uint96(bound(stake, 0, MIN_STAKE - 1));
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeTooLow.selector, stake, MIN_STAKE));
        vm.prank(operator);
        nodes.register(h100Node(), META, stake, operator, 0, "");
        assertNothingStored();
    }

    function test_Register_FollowsTheCurrentMinimumStake() external {
        MarketParams memory p = marketParams();
        p.minStake = STAKE + 1;
        setParams(p);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeTooLow.selector, STAKE, STAKE + 1));
        vm.prank(operator);
        nodes.register(h100Node(), META, STAKE, operator, 0, "");
    }

    function test_Register_RevertWhen_Paused() external {
        vm.prank(pauser);
        market.setPaused(true);
        bytes memory signature = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.expectRevert(IJobMarket.JobMarket_Paused.selector);
        vm.prank(operator);
        nodes.register(h100Node(), META, STAKE, agent, block.timestamp + 1 hours, signature);
        assertNothingStored();

        vm.prank(pauser);
        market.setPaused(false);
        vm.prank(operator);
        nodes.register(h100Node(), META, STAKE, agent, block.timestamp + 1 hours, signature);
        assertEq(nodes.nodeCount(), 1, "the same consent serves once unpaused");
    }

    function test_Register_RevertWhen_StakeNotApproved() external {
        token.mint(stranger, STAKE);
        vm.expectRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector, address(market), uint256(0), uint256(STAKE)
            )
        );
        vm.prank(stranger);
        nodes.register(h100Node(), META, STAKE, stranger, 0, "");
        assertNothingStored();
    }

    function test_Register_RevertWhen_StakeNotHeld() external {
        vm.prank(stranger);
        token.approve(address(market), type(uint256).max);
        vm.expectRevert(
            abi.encodeWithSelector(IERC20Errors.ERC20InsufficientBalance.selector, stranger, uint256(0), uint256(STAKE))
        );
        vm.prank(stranger);
        nodes.register(h100Node(), META, STAKE, stranger, 0, "");
    }

    /// A job's state packs the node id into 48 bits: the last id that fits is served, the
    /// next is refused.
    function test_Register_RevertWhen_NodeIdsRunOut() external {
        // `_nodeParams` (slot 5): minStake 96 | heartbeatTimeout 32 | unbondingPeriod 32 | nextNodeId 64.
        bytes32 slot = bytes32(uint256(5));
        uint256 word = uint256(vm.load(address(market), slot));
        uint256 idMask = uint256(type(uint64).max) << 160;
        vm.store(address(market), slot, bytes32((word & ~idMask) | (uint256((1 << 48) - 1) << 160)));
        assertEq(nodes.nodeCount(), (1 << 48) - 2);

        vm.prank(operator);
        uint64 last = nodes.register(h100Node(), META, STAKE, operator, 0, "");
        assertEq(last, (1 << 48) - 1);
        vm.expectRevert(INodeRegistry.NodeRegistry_TooManyNodes.selector);
        vm.prank(operator);
        nodes.register(h100Node(), META, STAKE, operator, 0, "");
        assertEq(market.params().minStake, MIN_STAKE, "the rest of the slot is intact");
    }
}
