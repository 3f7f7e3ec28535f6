// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";

import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {MarketParams, NodeStatus, ReclaimKind} from "../../src/types/Types.sol";

contract NodeRegistryHeartbeatTest is NodeRegistryNodeTest {
    function test_Heartbeat_RecordsTheTime() external {
        vm.warp(block.timestamp + 1 minutes);
        uint32 now32 = uint32(block.timestamp);
        vm.prank(agent);
        nodes.heartbeat(nodeId);
        Vm.Log[] memory logs = marketLogs();
        assertEq(logs.length, 1, "no NodeReactivated for an Active node");
        assertEq(logs[0].topics[0], INodeRegistry.NodeHeartbeat.selector);
        assertEq(logs[0].topics[1], bytes32(uint256(nodeId)));
        assertEq(abi.decode(logs[0].data, (uint32)), now32);
        assertEq(nodes.getNode(nodeId).lastHeartbeat, now32);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function testFuzz_Heartbeat_RecordsTheTime(uint32 wait) external {
        vm.warp(block.timestamp + bound(wait, 0, 3650 days));
        expectNodeEmit();
        emit INodeRegistry.NodeHeartbeat(nodeId, uint32(block.timestamp));
        heartbeat(nodeId);
        assertEq(nodes.getNode(nodeId).lastHeartbeat, block.timestamp);
    }

    function test_Heartbeat_ReactivatesAnInactiveNode() external {
        makeInactive(nodeId);
        uint40 inactiveSince = nodes.getNode(nodeId).inactiveSince;
        vm.warp(block.timestamp + 1 hours);
        uint32 now32 = uint32(block.timestamp);

        vm.prank(agent);
        nodes.heartbeat(nodeId);
        Vm.Log[] memory logs = marketLogs();
        assertEq(logs.length, 2);
        assertEq(logs[0].topics[0], INodeRegistry.NodeReactivated.selector);
        assertEq(abi.decode(logs[0].data, (uint32)), now32);
        assertEq(logs[1].topics[0], INodeRegistry.NodeHeartbeat.selector);
        assertEq(abi.decode(logs[1].data, (uint32)), now32);

        assertStatus(nodeId, NodeStatus.Active);
        assertEq(nodes.getNode(nodeId).lastHeartbeat, now32);
        assertEq(nodes.getNode(nodeId).inactiveSince, inactiveSince, "kept: what it held stays reclaimable");
    }

    /// The node gets work again; a job it held when it went Inactive stays reclaimable.
    function test_Heartbeat_Reactivated_TheNodeGetsWork_ButWhatItHeldStaysReclaimable() external {
        uint64 held = postJob();
        assign(held, nodeId);
        makeInactive(nodeId);
        vm.warp(block.timestamp + 1);
        heartbeat(nodeId);

        uint64 fresh = postJob();
        assign(fresh, nodeId);
        vm.prank(stranger);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobReclaimed(held, nodeId, ReclaimKind.NodeInactive, stranger);
        market.reclaim(held, jobs[held].terms, jobs[held].state);
        sync();
        expectNotReclaimable(fresh);
        assertReplay();
    }

    /// A slash below the minimum stake makes the node Inactive; heartbeats do not bring it
    /// back until the operator tops the stake up to the minimum.
    function test_Heartbeat_ReactivatesOnlyAtTheMinimumStake() external {
        uint64 id = registerNode(operator, OTHER_AGENT_KEY, h100Node(), MIN_STAKE);
        uint96 slashed = slashOnce(id);
        assertStatus(id, NodeStatus.Inactive);

        vm.prank(otherAgent);
        nodes.heartbeat(id);
        Vm.Log[] memory logs = marketLogs();
        assertEq(logs.length, 1, "a heartbeat, no reactivation");
        assertStatus(id, NodeStatus.Inactive);

        topUp(id, slashed - 1);
        heartbeat(id);
        assertStatus(id, NodeStatus.Inactive);
        topUp(id, 1);
        expectNodeEmit();
        emit INodeRegistry.NodeReactivated(id, uint32(block.timestamp));
        heartbeat(id);
        assertStatus(id, NodeStatus.Active);
        assertReplay();
    }

    /// The rule reads the minimum in force: a node marked Inactive whose stake is below a
    /// raised minimum stays Inactive.
    function testFuzz_Heartbeat_ReactivatesExactlyWhenTheStakeIsAtTheMinimum(uint96 minStake) external {
        minStake = uint96(bound(minStake, 1, 2 * uint256(STAKE)));
        MarketParams memory p = marketParams();
        p.minStake = minStake;
        setParams(p);
        makeInactive(nodeId);
        heartbeat(nodeId);
        assertStatus(nodeId, STAKE >= minStake ? NodeStatus.Active : NodeStatus.Inactive);
    }

    /// A raised minimum does not demote an Active node (only a slash or a missed heartbeat
    /// does): its heartbeats keep it Active.
    function test_Heartbeat_AnActiveNodeStaysActiveUnderARaisedMinimum() external {
        MarketParams memory p = marketParams();
        p.minStake = STAKE + 1;
        setParams(p);
        heartbeat(nodeId);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_Heartbeat_AnExitingNodeStaysExiting() external {
        makeInactive(nodeId);
        beginExit(nodeId);
        vm.warp(block.timestamp + 1 minutes);
        vm.prank(agent);
        nodes.heartbeat(nodeId);
        Vm.Log[] memory logs = marketLogs();
        assertEq(logs.length, 1);
        assertEq(logs[0].topics[0], INodeRegistry.NodeHeartbeat.selector);
        assertStatus(nodeId, NodeStatus.Exiting);
        assertEq(nodes.getNode(nodeId).lastHeartbeat, block.timestamp);
    }

    function test_Heartbeat_WhilePaused() external {
        vm.prank(pauser);
        market.setPaused(true);
        vm.warp(block.timestamp + 1 minutes);
        heartbeat(nodeId);
        assertEq(nodes.getNode(nodeId).lastHeartbeat, block.timestamp);
    }

    function test_Heartbeat_RevertWhen_CallerIsNotTheAgent() external {
        expectNotAgent(nodeId, operator);
        vm.prank(operator);
        nodes.heartbeat(nodeId);
        expectNotAgent(nodeId, stranger);
        vm.prank(stranger);
        nodes.heartbeat(nodeId);
    }

    function test_Heartbeat_RevertWhen_Exited() external {
        exitAndWithdraw(nodeId);
        expectNotActive(nodeId, NodeStatus.Exited);
        vm.prank(agent);
        nodes.heartbeat(nodeId);
    }

    function test_Heartbeat_RevertWhen_UnknownNode() external {
        expectUnknownNode(2);
        vm.prank(agent);
        nodes.heartbeat(2);
    }
}
