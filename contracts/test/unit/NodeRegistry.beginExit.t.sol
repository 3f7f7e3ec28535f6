// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobState, JobStatus, MarketParams, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistryBeginExitTest is NodeRegistryNodeTest {
    using JobView for JobState;

    function test_BeginExit_StartsTheUnbonding() external {
        vm.warp(block.timestamp + 1 hours);
        uint40 endsAt = uint40(block.timestamp) + UNBONDING;
        expectNodeEmit();
        emit INodeRegistry.NodeExitBegun(nodeId, endsAt);
        beginExit(nodeId);

        NodeInfo memory n = nodes.getNode(nodeId);
        assertEq(uint8(n.status), uint8(NodeStatus.Exiting));
        assertEq(n.unbondingEndsAt, endsAt);
        assertEq(n.stake, STAKE, "the stake stays until withdrawn");
        assertReplay();
    }

    function test_BeginExit_FromInactive() external {
        makeInactive(nodeId);
        beginExit(nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
    }

    function test_BeginExit_WhilePaused() external {
        vm.prank(pauser);
        market.setPaused(true);
        beginExit(nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
    }

    /// The end of unbonding is fixed when the exit begins: a later change of the period
    /// does not move it.
    function test_BeginExit_FixesTheEndOfUnbonding() external {
        beginExit(nodeId);
        uint40 endsAt = nodes.getNode(nodeId).unbondingEndsAt;
        MarketParams memory p = marketParams();
        p.unbondingPeriod = 30 days;
        setParams(p);
        assertEq(nodes.getNode(nodeId).unbondingEndsAt, endsAt);
        vm.warp(endsAt);
        withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exited);
    }

    function test_BeginExit_TheNodeGetsNoNewWork() external {
        beginExit(nodeId);
        uint64 jobId = postJob();
        bytes memory reason =
            abi.encodeWithSelector(IJobMarket.JobMarket_NodeNotActive.selector, nodeId, NodeStatus.Exiting);
        expectCannotTake(jobId, nodeId, reason);
    }

    /// The jobs it holds run on: the agent answers them and the node is paid.
    function test_BeginExit_TheNodeFinishesTheJobsItHolds() external {
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        beginExit(nodeId);
        submit(jobId);
        finalize(jobId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Completed));
        assertGt(nodes.getNode(nodeId).earnings, 0);
        assertReplay();
    }

    /// An exiting node is not marked Inactive (it takes no new work anyway); a job it
    /// abandons is reclaimed once its runtime is over, with the slash.
    function test_BeginExit_AnAbandonedJobIsReclaimedAtItsRuntime() external {
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        beginExit(nodeId);
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT + 1);
        expectNotActive(nodeId, NodeStatus.Exiting);
        nodes.markInactive(nodeId);
        vm.warp(jobs[jobId].state.until() + 1);
        reclaim(jobId);
        assertEq(nodes.getNode(nodeId).stake, STAKE - (STAKE * SLASH_BPS) / 10_000);
        assertStatus(nodeId, NodeStatus.Exiting);
        assertReplay();
    }

    function test_BeginExit_RevertWhen_AlreadyExiting() external {
        beginExit(nodeId);
        expectExiting(nodeId);
        vm.prank(operator);
        nodes.beginExit(nodeId);
    }

    function test_BeginExit_RevertWhen_Exited() external {
        exitAndWithdraw(nodeId);
        expectExiting(nodeId);
        vm.prank(operator);
        nodes.beginExit(nodeId);
    }

    function test_BeginExit_RevertWhen_CallerIsNotTheOperator() external {
        expectNotOperator(nodeId, agent);
        vm.prank(agent);
        nodes.beginExit(nodeId);
        expectNotOperator(nodeId, stranger);
        vm.prank(stranger);
        nodes.beginExit(nodeId);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_BeginExit_RevertWhen_UnknownNode() external {
        expectUnknownNode(2);
        vm.prank(operator);
        nodes.beginExit(2);
    }
}
