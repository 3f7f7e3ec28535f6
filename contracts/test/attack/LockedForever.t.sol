// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AttackBase} from "./AttackBase.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {CompletionKind, JobState, JobStatus, JobTerms, MarketParams, NodeStatus} from "../../src/types/Types.sol";

/// @notice Someone tries to lock another party's money for good by doing nothing: an
/// arbiter who never decides, a submitter who disputes and walks away, a job nobody takes,
/// a node that vanishes with a job. The rules: every wait has an end that anyone can apply
/// (`settleDispute`, `expire`, `reclaim`, `finalize`), a dispute holds only its exposure of
/// the stake, and the rest of a stake comes out after unbonding.
contract LockedForever is AttackBase {
    using JobView for JobTerms;
    using JobView for JobState;

    /// The arbiter never acts: before the dispute's deadline nobody can apply the default;
    /// from it, anyone does (the result stands, the bond goes back), and the arbiter is too
    /// late.
    function test_anUnresolvedDispute_endsAtItsDeadline_withTheDefault() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        uint256 initial = wealth(submitter);
        dispute(jobId);
        assertEq(node(nodeId).lockedStake, SLASH, "one slash held, not the stake");
        uint40 deadline = untilOf(jobId);
        vm.warp(deadline - 1);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DisputeOpen.selector, jobId, deadline));
        market.settleDispute(jobId, jobs[jobId].terms, jobs[jobId].state);
        vm.warp(deadline);
        vm.prank(arbiter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DisputeLapsed.selector, jobId, deadline));
        market.resolve(jobId, jobs[jobId].terms, jobs[jobId].state, false);
        vm.expectEmit(address(market));
        emit IJobMarket.JobCompleted(jobId, nodeId, BOUNTY - FEE, FEE, CompletionKind.DisputeLapsed);
        settleDispute(jobId);
        assertStatus(jobId, JobStatus.Completed);
        assertEq(node(nodeId).lockedStake, 0, "released");
        assertEq(node(nodeId).earnings, BOUNTY - FEE, "paid");
        assertEq(wealth(submitter), initial, "the bond back");
        assertReplay();
    }

    /// While a dispute is open the node exits with everything but the exposure; once it
    /// ends, the rest comes out and the node is Exited.
    function test_aPendingDispute_holdsOnlyItsExposure() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        dispute(jobId);
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        uint256 before = token.balanceOf(operator);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        sync();
        assertEq(token.balanceOf(operator) - before, STAKE - SLASH, "all but the exposure");
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Exiting));
        vm.prank(stranger);
        market.settleDispute(jobId, jobs[jobId].terms, jobs[jobId].state);
        sync();
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        sync();
        assertEq(token.balanceOf(operator) - before, STAKE);
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Exited));
        assertReplay();
    }

    /// A stake with nothing held comes out at the end of the unbonding, not a second before.
    function test_aStake_comesOutAfterUnbonding() public {
        uint64 nodeId = registerNode();
        beginExit(nodeId);
        uint40 endsAt = node(nodeId).unbondingEndsAt;
        vm.warp(endsAt - 1);
        withdrawStakeAt(nodeId, endsAt);
        assertStakeAndReplay(nodeId, 0);
    }

    /// An Open job nobody takes: it expires once no attempt fits, refunded to its submitter
    /// (whoever calls it); not a second before.
    function test_anOpenJobNobodyTakes_expiresAndRefunds() public {
        uint256 initial = wealth(submitter);
        uint40 deadline = uint40(block.timestamp + 1 days);
        uint64 jobId = postJob(h100Job(), BOUNTY, deadline);
        vm.warp(deadline - RUNTIME);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotExpired.selector, jobId));
        market.expire(jobId, jobs[jobId].terms, jobs[jobId].state);
        vm.warp(deadline - RUNTIME + 1);
        expire(jobId);
        assertStatus(jobId, JobStatus.Expired);
        assertEq(wealth(submitter), initial);
        assertEq(wealth(stranger), 0);
        assertReplay();
    }

    /// The node vanishes with the job (no heartbeat): after the timeout anyone marks it
    /// Inactive and reclaims the job at once, without waiting for `until`; another node runs
    /// it.
    function test_aJobWhoseNodeVanished_isReclaimable() public {
        (uint64 jobId, uint64 gone) = claimedJob();
        goSilent(gone);
        reclaim(jobId);
        assertStatus(jobId, JobStatus.Open);
        runOnAnotherNode(jobId, "other");
        assertReplay();
    }

    /// The node vanished after unbonding its whole stake while still holding a job nobody
    /// reclaimed: the reclaim slashes nothing (there is nothing), but the job goes back to
    /// the queue all the same.
    function test_aJobOfAnExitedNode_isStillReclaimable() public {
        uint64 gone = registerNode();
        uint64 jobId = postJob(runtimeJob(1 days), BOUNTY, uint40(block.timestamp + 30 days));
        claim(jobId, gone);
        vm.prank(operator);
        nodes.beginExit(gone);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(operator);
        nodes.withdrawStake(gone);
        sync();
        assertEq(uint8(node(gone).status), uint8(NodeStatus.Exited));
        reclaim(jobId);
        assertStatus(jobId, JobStatus.Open);
        cancel(jobId);
        assertReplay();
    }

    /// The submitter walks away after the result: anyone finalizes once the window closes.
    function test_aResultNobodyAccepts_isFinalizedByAnyone() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        vm.warp(untilOf(jobId));
        vm.prank(stranger);
        market.finalize(jobId, jobs[jobId].state);
        sync();
        assertEq(node(nodeId).earnings, BOUNTY - FEE);
        assertReplay();
    }

    /// The operator never withdraws its earnings: anyone moves the fees its jobs owe into
    /// the treasury, and anyone pays the treasury out, to the treasury.
    function test_feesAndTreasury_areMovedByAnyone() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        finalize(jobId);
        uint64[] memory ids = new uint64[](1);
        ids[0] = nodeId;
        vm.prank(stranger);
        nodes.sweepFees(ids);
        vm.prank(stranger);
        market.withdrawTreasury();
        sync();
        assertEq(token.balanceOf(treasury), FEE);
        assertEq(wealth(stranger), 0);
        assertReplay();
    }

    /// QUESTIONABLE (reported): a node that loses a dispute after withdrawing the rest of
    /// its stake has nothing left but stays Exiting (never Exited), and its operator's
    /// withdrawStake reverts NothingToWithdraw. Nothing is locked; the status just never
    /// reaches its end. (It needs a dispute period longer than the unbonding: the admin
    /// sets no upper bound on `disputePeriod`.)
    function test_aLostDisputeAfterTheWithdrawal_leavesTheNodeExiting() public {
        MarketParams memory p = marketParams();
        p.disputePeriod = 20 days;
        setParams(p);
        (uint64 jobId, uint64 nodeId) = submittedJob();
        dispute(jobId);
        vm.prank(operator);
        nodes.beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        sync();
        assertEq(node(nodeId).stake, SLASH, "the exposure, held");
        resolve(jobId, false);
        assertEq(node(nodeId).stake, 0, "slashed to nothing");
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NothingToWithdraw.selector, nodeId));
        nodes.withdrawStake(nodeId);
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Exiting), "never Exited");
        assertReplay();
    }
}
