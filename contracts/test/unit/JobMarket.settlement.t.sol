// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {
    Assignment,
    CompletionKind,
    JobState,
    JobStatus,
    JobTerms,
    MarketParams,
    NodeInfo
} from "../../src/types/Types.sol";

/// Payment, refunds, disputes and batches: every outcome's exact balances, each checked
/// against the replay of the events.
contract JobMarketSettlementTest is Base {
    using JobView for JobTerms;
    using JobView for JobState;

    uint96 internal constant FEE = BOUNTY * FEE_BPS / 10_000;
    uint96 internal constant SLASH = STAKE * SLASH_BPS / 10_000;

    function test_Finalize_PaysTheNode_AndOwesTheFee() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        vm.expectEmit(address(market));
        emit IJobMarket.JobCompleted(jobId, nodeId, BOUNTY - FEE, FEE, CompletionKind.Finalized);
        finalize(jobId);
        NodeInfo memory n = node(nodeId);
        assertEq(n.earnings, BOUNTY - FEE);
        assertEq(n.feesOwed, FEE);
        assertEq(market.jobHash(jobId), bytes32(0));
        assertReplay();
    }

    function test_Finalize_RevertsWhile_TheWindowIsOpen() public {
        (uint64 jobId,) = submittedJob();
        uint40 until = jobs[jobId].state.until();
        vm.warp(until - 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowOpen.selector, jobId, until));
        market.finalize(jobId, jobs[jobId].state);
    }

    function test_Accept_PaysAtOnce_OnlyForTheSubmitter() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, jobId, stranger));
        market.accept(jobId, jobs[jobId].terms, jobs[jobId].state);
        accept(jobId);
        assertEq(node(nodeId).earnings, BOUNTY - FEE);
        assertReplay();
    }

    function test_WithdrawEarnings_PaysTheOperator_AndSweepsTheFees() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        finalize(jobId);
        uint256 before = token.balanceOf(operator);
        vm.prank(operator);
        nodes.withdrawEarnings(nodeId);
        sync();
        assertEq(token.balanceOf(operator) - before, BOUNTY - FEE);
        assertEq(market.treasuryBalance(), FEE);
        market.withdrawTreasury();
        sync();
        assertEq(token.balanceOf(treasury), FEE);
        assertReplay();
    }

    function test_ResolveForTheProvider_PaysIt_AndTheBond() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        dispute(jobId);
        resolve(jobId, true);
        assertEq(node(nodeId).earnings, BOUNTY - FEE + DISPUTE_BOND);
        assertEq(node(nodeId).lockedStake, 0);
        assertEq(node(nodeId).stake, STAKE);
        assertReplay();
    }

    function test_ResolveForTheSubmitter_RefundsBountyAndBond_AndSlashesTheExposureToTheTreasury() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        dispute(jobId);
        resolve(jobId, false);
        assertEq(market.creditOf(submitter), BOUNTY + DISPUTE_BOND, "its own money back, never more");
        assertEq(node(nodeId).stake, STAKE - SLASH);
        assertEq(market.treasuryBalance(), SLASH);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Failed));
        assertReplay();
    }

    function test_Resolve_RevertsAfterTheDisputeLapsed() public {
        (uint64 jobId,) = submittedJob();
        dispute(jobId);
        uint40 until = jobs[jobId].state.until();
        vm.warp(until);
        vm.prank(arbiter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DisputeLapsed.selector, jobId, until));
        market.resolve(jobId, jobs[jobId].terms, jobs[jobId].state, false);
    }

    function test_Dispute_TakesTheLargerBond() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob(h100Job(), 500e6, uint40(block.timestamp + 1 days));
        assign(jobId, nodeId);
        submit(jobId);
        vm.expectEmit(address(market));
        emit IJobMarket.JobDisputed(jobId, nodeId, 50e6, SLASH, uint40(block.timestamp + DISPUTE_PERIOD));
        dispute(jobId);
        assertReplay();
    }

    function test_Cancel_RefundsTheBounty() public {
        uint64 jobId = postJob();
        cancel(jobId);
        assertEq(market.creditOf(submitter), BOUNTY);
        assertReplay();
    }

    function test_Expire_RevertsWhileAnAttemptFits() public {
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 2 * RUNTIME));
        vm.warp(block.timestamp + RUNTIME);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotExpired.selector, jobId));
        market.expire(jobId, jobs[jobId].terms, jobs[jobId].state);
    }

    function test_PostJob_SpendsCreditsFirst_ThenPullsTheRest() public {
        vm.prank(submitter);
        market.deposit(30e6);
        sync();
        uint256 before = token.balanceOf(submitter);
        vm.recordLogs();
        uint64 jobId = postJob();
        assertEq(market.creditOf(submitter), 0);
        assertEq(before - token.balanceOf(submitter), BOUNTY - 30e6, "only the rest was pulled");
        assertEq(jobs[jobId].terms.bounty(), BOUNTY);
        assertReplay();
    }

    function test_FinalizeBatch_PaysEveryJob() public {
        uint64 nodeId = registerNode();
        uint64[] memory ids = new uint64[](3);
        for (uint256 i; i < 3; ++i) {
            ids[i] = postJob();
        }
        Assignment[] memory batch = new Assignment[](3);
        for (uint256 i; i < 3; ++i) {
            batch[i] = Assignment(ids[i], nodeId, jobs[ids[i]].terms, jobs[ids[i]].state);
        }
        vm.prank(matcher);
        market.assignBatch(batch);
        sync();
        JobState[] memory states = new JobState[](3);
        for (uint256 i; i < 3; ++i) {
            submit(ids[i]);
        }
        for (uint256 i; i < 3; ++i) {
            states[i] = jobs[ids[i]].state;
        }
        vm.warp(states[2].until());
        market.finalizeBatch(ids, states);
        sync();
        assertEq(node(nodeId).earnings, 3 * (BOUNTY - FEE));
        assertReplay();
    }

    function test_AssignBatch_IsAllOrNothing() public {
        uint64 nodeId = registerNode();
        uint64 a = postJob();
        uint64 b = postJob();
        Assignment[] memory batch = new Assignment[](2);
        batch[0] = Assignment(a, nodeId, jobs[a].terms, jobs[a].state);
        JobState memory stale = jobs[b].state;
        stale.fields += 1;
        batch[1] = Assignment(b, nodeId, jobs[b].terms, stale);
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, b));
        market.assignBatch(batch);
        assertEq(uint8(status(a)), uint8(JobStatus.Open));
    }

    function test_SetParams_AddsAPolicy_PostedJobsKeepTheirs() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 1_000;
        setParams(p);
        finalize(jobId);
        assertEq(node(nodeId).feesOwed, FEE, "the fee it was posted with");
        uint64 later = postJob();
        assertEq(jobs[later].terms.policy(), 2);
        assertReplay();
    }

    function test_SetPaused_StopsPosting_NotSettlement() public {
        (uint64 jobId,) = submittedJob();
        vm.prank(pauser);
        market.setPaused(true);
        vm.prank(submitter);
        vm.expectRevert(IJobMarket.JobMarket_Paused.selector);
        market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), spec());
        finalize(jobId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Completed));
    }
}
