// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {JobView} from "../JobView.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobState, JobStatus, MarketParams, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistryWithdrawStakeTest is NodeRegistryNodeTest {
    using JobView for JobState;

    /// What one dispute holds of the fixture node's untouched stake.
    uint96 internal constant EXPOSURE = (STAKE * SLASH_BPS) / 10_000;

    function expectWithdrawn(uint96 amount, uint96 left) internal {
        expectNodeEmit();
        emit INodeRegistry.NodeStakeWithdrawn(nodeId, operator, amount, left);
    }

    /// A disputed job of the fixture node, its dispute open for `period` (a policy set
    /// before the job is posted): the job's id.
    function disputedJob(uint32 period) internal returns (uint64 jobId) {
        MarketParams memory p = marketParams();
        p.disputePeriod = period;
        setParams(p);
        (jobId,) = submittedJob();
        dispute(jobId);
        assertEq(nodes.getNode(nodeId).lockedStake, EXPOSURE);
    }

    // ---------------------------------------------------------------- paid

    function test_WithdrawStake_PaysTheStakeBack_AtTheEndOfUnbonding() external {
        beginExit(nodeId);
        uint40 endsAt = nodes.getNode(nodeId).unbondingEndsAt;
        vm.warp(endsAt);
        uint256 operatorBefore = token.balanceOf(operator);

        expectWithdrawn(STAKE, 0);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        sync();

        NodeInfo memory n = nodes.getNode(nodeId);
        assertEq(uint8(n.status), uint8(NodeStatus.Exited));
        assertEq(n.stake, 0);
        assertEq(n.unbondingEndsAt, endsAt);
        assertEq(n.operator, operator, "the record stays");
        assertEq(token.balanceOf(operator), operatorBefore + STAKE);
        assertEq(token.balanceOf(address(market)), 0);
        assertReplay();
    }

    function testFuzz_WithdrawStake_PaysTheWholeStake_AnyTimeAfterUnbonding(uint96 stake, uint256 wait) external {
        stake = uint96(bound(stake, MIN_STAKE, type(uint96).max));
        wait = bound(wait, 0, 3650 days);
        fund(operator, stake);
        uint64 id = registerNode(operator, OTHER_AGENT_KEY, a100Node(), stake);
        beginExit(id);
        vm.warp(uint256(nodes.getNode(id).unbondingEndsAt) + wait);
        uint256 operatorBefore = token.balanceOf(operator);
        withdrawStake(id);
        assertEq(token.balanceOf(operator), operatorBefore + stake);
        assertStatus(id, NodeStatus.Exited);
        assertReplay();
    }

    function test_WithdrawStake_PaysWhatASlashLeft() external {
        uint96 slashed = slashOnce(nodeId);
        assertEq(slashed, EXPOSURE);
        exitAndUnbond(nodeId);
        uint256 operatorBefore = token.balanceOf(operator);
        expectWithdrawn(STAKE - slashed, 0);
        withdrawStake(nodeId);
        assertEq(token.balanceOf(operator), operatorBefore + STAKE - slashed);
        assertStatus(nodeId, NodeStatus.Exited);
        assertReplay();
    }

    function test_WithdrawStake_WhilePaused() external {
        exitAndUnbond(nodeId);
        vm.prank(pauser);
        market.setPaused(true);
        withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exited);
    }

    // ---------------------------------------------------------------- held for disputes

    /// An open dispute holds its exposure: the rest is paid, the node stays Exiting with
    /// what is held; once the dispute is settled (here: lapsed, the result stands) a second
    /// call pays the rest and the node is Exited.
    function test_WithdrawStake_HoldsWhatAnOpenDisputeExposes_AndPaysItOnceSettled() external {
        uint64 jobId = disputedJob(DISPUTE_PERIOD);
        exitAndUnbond(nodeId);
        assertGe(block.timestamp, jobs[jobId].state.until(), "the dispute has lapsed, but nobody settled it");
        uint256 operatorBefore = token.balanceOf(operator);

        expectWithdrawn(STAKE - EXPOSURE, EXPOSURE);
        withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
        assertEq(nodes.getNode(nodeId).stake, EXPOSURE);
        assertEq(token.balanceOf(operator), operatorBefore + STAKE - EXPOSURE);
        expectNothingToWithdraw(nodeId);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);

        vm.prank(stranger);
        market.settleDispute(jobId, jobs[jobId].terms, jobs[jobId].state);
        sync();
        assertEq(nodes.getNode(nodeId).lockedStake, 0);

        expectWithdrawn(EXPOSURE, 0);
        withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exited);
        assertEq(token.balanceOf(operator), operatorBefore + STAKE);
        assertReplay();
    }

    function test_WithdrawStake_PaysTheHeldStakeAfterTheProviderWins() external {
        uint64 jobId = disputedJob(20 days);
        exitAndUnbond(nodeId);
        withdrawStake(nodeId);
        assertEq(nodes.getNode(nodeId).stake, EXPOSURE);

        resolve(jobId, true);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Completed));
        expectWithdrawn(EXPOSURE, 0);
        withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exited);
        assertReplay();
    }

    /// Questionable (see the report): a lost dispute takes what it held, nothing is left,
    /// and `withdrawStake` refuses with NothingToWithdraw, so the node stays Exiting with a
    /// zero stake and never reaches Exited.
    function test_WithdrawStake_AfterALostDisputeTookWhatWasHeld_NothingIsLeft_AndTheNodeStaysExiting() external {
        uint64 jobId = disputedJob(20 days);
        exitAndUnbond(nodeId);
        withdrawStake(nodeId);

        resolve(jobId, false);
        assertEq(nodes.getNode(nodeId).stake, 0);
        assertEq(nodes.getNode(nodeId).lockedStake, 0);
        expectNothingToWithdraw(nodeId);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
        assertReplay();
    }

    /// Questionable too: a node slashed to nothing before its exit cannot complete it.
    function test_WithdrawStake_RevertWhen_SlashedToNothing_TheNodeStaysExiting() external {
        MarketParams memory p = marketParams();
        p.slashBps = 10_000;
        setParams(p);
        assertEq(slashOnce(nodeId), STAKE);
        exitAndUnbond(nodeId);
        expectNothingToWithdraw(nodeId);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
    }

    // ---------------------------------------------------------------- refused

    function test_WithdrawStake_RevertWhen_StillUnbonding() external {
        beginExit(nodeId);
        uint40 endsAt = nodes.getNode(nodeId).unbondingEndsAt;
        vm.warp(endsAt - 1);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StillUnbonding.selector, nodeId, endsAt));
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
    }

    function testFuzz_WithdrawStake_RevertWhen_StillUnbonding(uint256 wait) external {
        beginExit(nodeId);
        uint40 endsAt = nodes.getNode(nodeId).unbondingEndsAt;
        vm.warp(bound(wait, block.timestamp, endsAt - 1));
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StillUnbonding.selector, nodeId, endsAt));
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
    }

    function test_WithdrawStake_RevertWhen_NotExiting() external {
        vm.warp(block.timestamp + UNBONDING);
        expectNotExiting(nodeId);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        makeInactive(nodeId);
        expectNotExiting(nodeId);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
    }

    function test_WithdrawStake_RevertWhen_AlreadyExited() external {
        exitAndWithdraw(nodeId);
        expectNotExiting(nodeId);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
    }

    function test_WithdrawStake_RevertWhen_CallerIsNotTheOperator() external {
        exitAndUnbond(nodeId);
        expectNotOperator(nodeId, agent);
        vm.prank(agent);
        nodes.withdrawStake(nodeId);
        expectNotOperator(nodeId, stranger);
        vm.prank(stranger);
        nodes.withdrawStake(nodeId);
    }

    function test_WithdrawStake_RevertWhen_UnknownNode() external {
        expectUnknownNode(2);
        vm.prank(operator);
        nodes.withdrawStake(2);
    }
}
